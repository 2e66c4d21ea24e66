"""A running job's word while its database calls wait: a hung PostgreSQL (a stopped server, a stalled
disk, a frozen VM) answers nothing, not even an error, so nothing would tell the user otherwise.

``DatabaseWait`` stands between a job and its status message. A database call made through
``watched`` that has not answered after ``SLOW_S`` puts the status on hold: it says ``text`` (the
job waits for the database), offered again with each progress frame (an edit within the chat's
interval is dropped, and the frames keep coming while the backend renders). Once every such call has
answered, the newest progress shows again. A killed server is told where the job records its outcome
(``store.db.Patient``); this is for one that hangs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from ..core.logs import get_logger
from .ports import StatusMessage
from .progress_record import ProgressRecord

log = get_logger("jobs")

T = TypeVar("T")

SLOW_S = 3.0
"""A database call that has not answered after this long is told (a normal one takes milliseconds)."""


class DatabaseWait:
    """A job's ``StatusMessage`` that says ``text`` while a ``watched`` call of the job waits for the
    database longer than ``slow_s``, and its progress otherwise."""

    def __init__(self, status: StatusMessage, text: str, what: str, record: ProgressRecord | None = None,
                 slow_s: float = SLOW_S):
        self.status = status
        self.record = record  # where the job's percent goes (``update``'s)
        self.text = text
        self.what = what  # for the log: "job 12"
        self.slow_s = slow_s
        self._slow = 0  # watched calls past slow_s, not answered yet
        self._latest: str | None = None  # the newest progress text, shown again once they answer

    async def watched(self, call: Awaitable[T]) -> T:
        """``await call``; past ``slow_s`` the status says that the job waits for the database."""
        task = asyncio.ensure_future(call)
        try:
            await asyncio.wait([task], timeout=self.slow_s)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.done():
            return task.result()
        self._slow += 1
        if self._slow == 1:
            log.warning("%s: the database has not answered for %.0f s; its status says so", self.what, self.slow_s)
            await self.status.update(self.text)
        try:
            return await task
        finally:
            self._slow -= 1
            if not self._slow:
                log.info("%s: the database answers again", self.what)
                if self._latest is not None:
                    await self.status.update(self._latest)

    async def update(self, text: str, *, percent: int | None = None) -> None:
        """Show ``text``; ``percent``: how far the run is, when it says (recorded, not shown)."""
        if percent is not None and self.record is not None:
            self.record.note(percent)
        self._latest = text
        await self.status.update(self.text if self._slow else text)

    async def preview(self, image: bytes) -> None:
        if not self._slow:
            await self.status.preview(image)

    def results_follow(self) -> None:
        self.status.results_follow()

    async def finish(self, text: str, **kwargs) -> None:
        await self.status.finish(text, **kwargs)
