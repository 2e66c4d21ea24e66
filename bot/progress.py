"""One status message per job, edited at most once per interval per chat.

Telegram allows roughly one message edit per second per chat before answering
429; progress frames arrive far faster, so we keep only the newest text and
send it when the chat's interval has passed. The last edit is never dropped.
Edits run in the background: a slow Bot API never holds up the job itself. The final text
is sent like a result (``bot/sending.py``): retried while Telegram failed it for sure.
A job whose "Queued" reply has not gone out yet has no status message: the first text
posts one, and it becomes the job's unless the late "Queued" got recorded first (then
ours is deleted and theirs edited). A message id of None is never edited.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from telegram import Bot
from telegram.error import BadRequest, TelegramError
from telegram.ext import AIORateLimiter

from ..jobs.ports import ChatError
from ..logs import get_logger
from .sending import send

log = get_logger("progress")

STATUS = "status"
"""``rate_limit_args`` of a status message (a "Queued" reply, a progress edit): results go first."""
STATUS_SLOTS = 3
"""Status messages inside the rate limiter at once: all a result may find ahead of it."""

AdoptFn = Callable[[int], Awaitable[int | None]]
"""Records a newly posted status message unless the job has one; returns the job's."""


class ResultsFirstLimiter(AIORateLimiter):
    """PTB's AIORateLimiter, except that status messages give way to every other request.

    A status message enters the limiter only while no other request waits there, and no more
    than ``STATUS_SLOTS`` at once, so a result never queues behind a backlog of "Queued"
    replies and progress edits (which the throttle coalesces meanwhile).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._others = 0
        self._no_others = asyncio.Event()
        self._no_others.set()
        self._status_slots = asyncio.Semaphore(STATUS_SLOTS)

    async def process_request(self, callback, args, kwargs, endpoint, data, rate_limit_args):
        if rate_limit_args != STATUS:
            self._others += 1
            self._no_others.clear()
            try:
                return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)
            finally:
                self._others -= 1
                if not self._others:
                    self._no_others.set()
        async with self._status_slots:
            while self._others:
                await self._no_others.wait()
            return await super().process_request(callback, args, kwargs, endpoint, data, None)


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
    def __init__(self, bot: Bot, chat_id: int, message_id: int | None, throttle: ChatThrottle, *,
                 reply_to: int | None = None, adopt: AdoptFn | None = None):
        self.bot = bot
        self.chat_id = chat_id
        self.message_id = message_id
        self._reply_to = reply_to
        self._adopt = adopt
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
            await send(lambda: self._write(text), f"status in chat {self.chat_id}")
            self._shown = text
        except ChatError as exc:  # e.g. the user deleted the message
            log.info("final status in chat %s not shown: %s", self.chat_id, exc)

    async def _write(self, text: str) -> None:
        if self.message_id is None:
            await self._post(text)
        else:
            await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.message_id,
                                             rate_limit_args=STATUS)

    async def _show(self, text: str) -> None:
        try:
            await self._write(text)
            self._shown = text
        except BadRequest as exc:  # e.g. the user deleted the message: progress is best effort
            log.info("progress edit in chat %s skipped: %s", self.chat_id, exc)
        except TelegramError as exc:
            log.warning("progress edit in chat %s failed: %s", self.chat_id, exc)

    async def _post(self, text: str) -> None:
        """Post the status message; if the job got one meanwhile, use that one instead."""
        sent = await self.bot.send_message(self.chat_id, text, reply_to_message_id=self._reply_to,
                                           allow_sending_without_reply=True, rate_limit_args=STATUS)
        adopted = await self._adopt(sent.message_id) if self._adopt is not None else None
        self.message_id = adopted or sent.message_id
        if self.message_id != sent.message_id:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.chat_id, sent.message_id, rate_limit_args=STATUS)
            await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.message_id,
                                             rate_limit_args=STATUS)
