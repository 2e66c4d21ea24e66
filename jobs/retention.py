"""Retention: finished jobs older than ``COURIER_RETENTION_DAYS`` go, with their files on the backends.

``Retention`` runs beside the dispatcher: once at start and then every ``INTERVAL_S``, it deletes
old jobs in batches (``store.privacy.purge_old``, at most ``MAX_BATCHES`` per round, so one
round stays short however much has piled up) and asks each backend to delete the files they
left, through Courier's route there (``POST /courier/files/delete``). ``/forget`` uses the same
``delete_backend_files``. The bot's messages stay: the chat is the user's.
"""

from __future__ import annotations

import asyncio

from ..core.logs import get_logger
from ..store import privacy
from .comfy.client import ComfyClient
from .errors import ComfyError

log = get_logger("retention")

INTERVAL_S = 3600.0
BATCH = 500
MAX_BATCHES = 20


async def delete_backend_files(clients: list[ComfyClient], left: privacy.Leftovers) -> int:
    """Delete the leftovers' files (and ComfyUI history entries) on their backends; returns how many
    files could not be deleted (their backend is gone from the settings, unreachable, or refused)."""
    by_url = {client.base_url: client for client in clients}
    kept = 0
    for backend, files in left.files.items():
        client = by_url.get(backend.rstrip("/"))
        if client is None:
            kept += len(files)
            continue
        try:
            reply = await client.delete_files(files, left.prompt_ids.get(backend, []))
        except ComfyError as exc:
            log.warning("could not delete %d file(s) on %s: %s", len(files), backend, exc)
            kept += len(files)
            continue
        kept += reply.get("refused", 0) + reply.get("failed", 0)
    return kept


async def purge(pool, clients: list[ComfyClient], days: int, *, batch: int = BATCH,
                max_batches: int = MAX_BATCHES) -> privacy.Leftovers:
    """One round: delete up to ``batch * max_batches`` old jobs and their files; returns what went."""
    done = privacy.Leftovers()
    for _ in range(max_batches):
        left = await privacy.purge_old(pool, days, batch)
        await delete_backend_files(clients, left)
        done.add(left)
        if left.jobs < batch:
            break
    return done


class Retention:
    """The periodic purge; ``days == 0`` keeps everything (then ``start`` does nothing)."""

    def __init__(self, pool, clients: list[ComfyClient], days: int, interval_s: float = INTERVAL_S):
        self.pool = pool
        self.clients = clients
        self.days = days
        self.interval_s = interval_s
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self.days > 0 and self._task is None:
            self._task = asyncio.create_task(self._run(), name="courier-retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            try:
                done = await purge(self.pool, self.clients, self.days)
                if done.jobs:
                    log.info("retention: deleted %d job(s) older than %d days", done.jobs, self.days)
            except Exception:
                log.exception("the retention purge failed")
            await asyncio.sleep(self.interval_s)
