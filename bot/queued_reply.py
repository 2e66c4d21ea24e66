"""The "Queued" reply of a job, in one place: sent after the job is committed, in a task of its own.

``jobs.submit.announce`` decides in PostgreSQL whether the reply still goes (the job may have
started or been cancelled) and whether it becomes the job's status message. While a reply is on
its way to Telegram, its future is kept here by job id, resolving to its message id (None: it did
not go): a job that starts meanwhile edits that reply rather than post a second status message
(``TelegramSink.status``), and a cancel waits for it to say "cancelled" there (``admin``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable

from ..jobs.submit import announce
from .limiter import STATUS_SLOTS
from .sink import delete_message


class QueuedReplies:
    """The bot's "Queued" replies under way (one per bot, in ``BotData``)."""

    def __init__(self):
        self._on_its_way: dict[int, asyncio.Future] = {}
        self._sending = asyncio.Semaphore(STATUS_SLOTS)
        """Replies under way: the rest wait before reading their queue position, so a burst of
        commands does not flood PostgreSQL with position reads that Telegram's pace makes stale."""

    def on_its_way(self, job_id: int | None) -> asyncio.Future | None:
        """The future of ``job_id``'s reply while it is on its way to Telegram, else None."""
        return self._on_its_way.get(job_id)

    async def send(self, bot, pool, job_id: int, chat_id: int,
                   post_status: Callable[[int], Awaitable[int]]) -> None:
        """Send ``job_id``'s reply with ``post_status(position)`` (which returns its message id)."""
        async def post_and_tell(position: int) -> int:
            on_its_way = asyncio.get_running_loop().create_future()
            self._on_its_way[job_id] = on_its_way
            message_id = None
            try:
                message_id = await post_status(position)
                return message_id
            finally:
                on_its_way.set_result(message_id)
                del self._on_its_way[job_id]

        async with self._sending:
            await announce(pool, job_id, post_and_tell, functools.partial(delete_message, bot, chat_id))
