"""A running job's progress in PostgreSQL (``courier_jobs.progress``, ``{"percent": n}``): what
``GET /courier/jobs`` answers and the panel shows as "running N%".

Progress frames come many a second; the row is written at most once every ``EVERY_S`` per job and
only when the percent changed, in the background (a slow database never holds up the job), best
effort: a write that fails is logged and the next one may go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ..core.logs import get_logger
from ..store import jobs
from ..store.errors import StoreError

log = get_logger("jobs")

EVERY_S = 3.0
"""At most one write per job this often (the panel polls every few seconds)."""


class ProgressRecord:
    """Writes job ``job_id``'s percent, throttled (``note``)."""

    def __init__(self, pool, job_id: int, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic):
        self._pool = pool
        self._job_id = job_id
        self._every_s = every_s
        self._clock = clock
        self._written: int | None = None
        self._next_at = 0.0
        self._task: asyncio.Task | None = None

    def note(self, percent: int) -> None:
        """The job is ``percent`` done: written unless it is what the row says, a write is under way,
        or the last one went less than ``every_s`` ago."""
        if percent == self._written or self._clock() < self._next_at or (self._task and not self._task.done()):
            return
        self._written, self._next_at = percent, self._clock() + self._every_s
        self._task = asyncio.create_task(self._write(percent), name=f"courier-progress-row-{self._job_id}")

    async def _write(self, percent: int) -> None:
        try:
            await jobs.set_progress(self._pool, self._job_id, {"percent": percent})
        except (StoreError, OSError) as exc:
            log.info("job %s: its progress not recorded: %s", self._job_id, exc)
