"""One status message per job, edited at most once per interval per chat.

Telegram allows roughly one message edit per second per chat before answering
429; progress frames arrive far faster, so we keep only the newest text and
send it when the chat's interval has passed. The last edit is never dropped.
Edits run in the background: a slow Bot API never holds up the job itself. The final text
is sent like a result (``bot/sending.py``): retried while Telegram failed it for sure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from telegram.error import BadRequest, TelegramError

from ..jobs.ports import ChatError
from ..logs import get_logger
from .sending import send

log = get_logger("progress")

EditFn = Callable[[str], Awaitable[object]]


class ChatThrottle:
    """Shared by all jobs: when each chat may be edited next."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.clock = clock
        self._next_allowed: dict[int, float] = {}

    def try_acquire(self, chat_id: int) -> bool:
        now = self.clock()
        if now < self._next_allowed.get(chat_id, 0.0):
            return False
        self._next_allowed[chat_id] = now + self.interval_s
        return True


class ProgressMessage:
    def __init__(self, chat_id: int, edit: EditFn, throttle: ChatThrottle):
        self.chat_id = chat_id
        self._edit = edit
        self._throttle = throttle
        self._shown = ""
        self._pending: asyncio.Task | None = None

    async def update(self, text: str) -> None:
        """Start showing ``text`` if the chat may be edited now; otherwise drop it (a newer one follows)."""
        if text == self._shown or (self._pending and not self._pending.done()):
            return
        if self._throttle.try_acquire(self.chat_id):
            self._pending = asyncio.create_task(self._show(text), name=f"courier-progress-{self.chat_id}")

    async def finish(self, text: str) -> None:
        """The final text, always shown, after any edit still in flight."""
        if self._pending is not None:
            await self._pending
        if text == self._shown:
            return
        try:
            await send(lambda: self._edit(text), f"status in chat {self.chat_id}")
            self._shown = text
        except ChatError as exc:  # e.g. the user deleted the message
            log.info("final status in chat %s not shown: %s", self.chat_id, exc)

    async def _show(self, text: str) -> None:
        try:
            await self._edit(text)
            self._shown = text
        except BadRequest as exc:  # e.g. the user deleted the message: progress is best effort
            log.info("progress edit in chat %s skipped: %s", self.chat_id, exc)
        except TelegramError as exc:
            log.warning("progress edit in chat %s failed: %s", self.chat_id, exc)
