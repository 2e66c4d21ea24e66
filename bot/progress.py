"""One status message per job, edited at most once per interval per chat.

Telegram allows roughly one message edit per second per chat before answering
429; progress frames arrive far faster, so a text that comes within the chat's
interval is dropped (a newer one follows). A run's first text and its last are never dropped.
Edits run in the background: a slow Bot API never holds up the job itself. The final text
is sent like a result (``bot/sending.py``): retried while Telegram failed it for sure.
A job whose "Queued" reply has not gone out yet has no status message: the first text
edits that reply if it is on its way (in this process), else posts one, which becomes the
job's unless the late "Queued" got recorded first (then ours is deleted and theirs edited).
A message id of None is never edited.

Live previews: Telegram cannot turn a text message into a photo (editMessageMedia refuses
a text message), so the first preview sends a photo with the status as its caption and
deletes the text; later previews replace its photo (editMessageMedia), texts its caption.
The final text replaces the photo again (a new text message), so the job's results are
what remains of it. Each move is recorded (``moved``), for /forget.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from telegram import Bot, InputMediaPhoto
from telegram.error import BadRequest, TelegramError

from ..jobs.ports import ChatError
from ..logs import get_logger
from ..store.errors import StoreError
from .limiter import STATUS
from .sending import send

log = get_logger("progress")

AdoptFn = Callable[[int], Awaitable[int | None]]
"""Records a newly posted status message unless the job has one; returns the job's."""
MovedFn = Callable[[int], Awaitable[None]]
"""Records the message that took the place of the job's status message."""
QueuedReplyFn = Callable[[], "asyncio.Future[int | None] | None"]
"""The job's "Queued" reply if it is on its way to Telegram, resolving to its message id."""
NO_TEXT = "there is no text in the message to edit"
"""Telegram's answer to a text edit of a photo message (a status another run turned into one)."""


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
                 reply_to: int | None = None, adopt: AdoptFn | None = None, moved: MovedFn | None = None,
                 queued_reply: QueuedReplyFn | None = None):
        self.bot = bot
        self.chat_id = chat_id
        self.message_id = message_id
        self._reply_to = reply_to
        self._adopt = adopt
        self._moved = moved
        self._queued_reply = queued_reply
        self._throttle = throttle
        self._shown = ""
        self._text = ""  # the newest text, shown with the next preview
        self._image: bytes | None = None  # a preview not shown yet
        self._photo = False  # the status message is a photo (it shows a preview)
        self._pending: asyncio.Task | None = None

    async def update(self, text: str) -> None:
        """Start showing ``text`` if the chat may be edited now, or if it is the run's first; otherwise
        drop it (a newer one follows)."""
        self._text = text
        if text == self._shown and self._image is None:
            return
        self._start()

    async def preview(self, image: bytes) -> None:
        """Show ``image`` with the newest text when the chat may be edited next (the newest image wins)."""
        self._image = image
        self._start()

    def _start(self) -> None:
        if self._pending and not self._pending.done():
            return
        # A run's first text is never dropped: without it a job started right after another one's
        # edit in the chat would show a stale "Queued", or no status at all, until its result.
        if self._throttle.try_acquire(self.chat_id) or not self._shown:
            self._pending = asyncio.create_task(self._show(), name=f"courier-progress-{self.chat_id}")

    async def finish(self, text: str) -> None:
        """The final text, always shown, after any edit still in flight; it takes a preview's place."""
        if self._pending is not None:
            await self._pending
        if text == self._shown and not self._photo:
            return
        try:
            if self._photo:
                await send(lambda: self._replace_photo(text), f"status in chat {self.chat_id}")
            else:
                await send(lambda: self._write(text), f"status in chat {self.chat_id}")
            self._shown = text
        except ChatError as exc:  # e.g. the user deleted the message
            log.info("final status in chat %s not shown: %s", self.chat_id, exc)

    async def _write(self, text: str) -> None:
        if self.message_id is None:
            await self._post(text)
            return
        try:
            await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.message_id,
                                             rate_limit_args=STATUS)
        except BadRequest as exc:
            if NO_TEXT not in exc.message.lower():
                raise
            self._photo = True  # an earlier run of the job showed a preview there
            await self.bot.edit_message_caption(chat_id=self.chat_id, message_id=self.message_id, caption=text,
                                                rate_limit_args=STATUS)

    async def _show(self) -> None:
        text, image, self._image = self._text, self._image, None
        if image is None and text == self._shown:
            return
        try:
            if image is not None:
                await self._show_preview(text, image)
            elif self._photo:
                await self.bot.edit_message_caption(chat_id=self.chat_id, message_id=self.message_id, caption=text,
                                                    rate_limit_args=STATUS)
            else:
                await self._write(text)
            self._shown = text
        except BadRequest as exc:  # e.g. the user deleted the message: progress is best effort
            log.info("progress edit in chat %s skipped: %s", self.chat_id, exc)
        except TelegramError as exc:
            log.warning("progress edit in chat %s failed: %s", self.chat_id, exc)

    async def _show_preview(self, text: str, image: bytes) -> None:
        if self._photo:
            await self.bot.edit_message_media(InputMediaPhoto(image, caption=text or None), chat_id=self.chat_id,
                                              message_id=self.message_id, rate_limit_args=STATUS)
            return
        if self.message_id is None:  # the job's status message first, so a late "Queued" finds its place
            await self._post(text)
        sent = await self.bot.send_photo(self.chat_id, image, caption=text or None,
                                         reply_to_message_id=self._reply_to, allow_sending_without_reply=True,
                                         rate_limit_args=STATUS)
        await self._take_place(sent.message_id)
        self._photo = True

    async def _replace_photo(self, text: str) -> None:
        sent = await self.bot.send_message(self.chat_id, text, reply_to_message_id=self._reply_to,
                                           allow_sending_without_reply=True, rate_limit_args=STATUS)
        await self._take_place(sent.message_id)
        self._photo = False

    async def _take_place(self, message_id: int) -> None:
        """``message_id`` becomes the status message; the one it replaces is deleted."""
        replaced, self.message_id = self.message_id, message_id
        if self._moved is not None:
            try:
                await self._moved(message_id)
            except StoreError as exc:  # the chat shows it anyway; only /forget would miss it
                log.warning("status message %s in chat %s not recorded: %s", message_id, self.chat_id, exc)
        if replaced is not None:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.chat_id, replaced, rate_limit_args=STATUS)

    async def _post(self, text: str) -> None:
        """Post the status message (or edit the job's "Queued" reply, if that is on its way); if the
        job got one meanwhile, use that one instead."""
        on_its_way = self._queued_reply() if self._queued_reply is not None else None
        if on_its_way is not None and (queued := await asyncio.shield(on_its_way)) is not None:
            self.message_id = (await self._adopt(queued) if self._adopt is not None else None) or queued
            await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.message_id,
                                             rate_limit_args=STATUS)
            return
        sent = await self.bot.send_message(self.chat_id, text, reply_to_message_id=self._reply_to,
                                           allow_sending_without_reply=True, rate_limit_args=STATUS)
        adopted = await self._adopt(sent.message_id) if self._adopt is not None else None
        self.message_id = adopted or sent.message_id
        if self.message_id != sent.message_id:
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.chat_id, sent.message_id, rate_limit_args=STATUS)
            await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.message_id,
                                             rate_limit_args=STATUS)
