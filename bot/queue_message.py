"""One queue message per chat: the chat's queued jobs, their places and when they start, edited as the
queue moves; it acknowledges commands, so that the requests spent on that grow with chats, not commands.

``refresh(bot, chat_id)`` follows every change of the chat's queue: a job queued (``context``), one
started (its status's first word: ``job_messages``), cancelled (``admin``). One chat's refreshes
coalesce: its message goes out a moment (``after_s``: ``progress.MOMENT_S``, or the progress interval
if shorter) after the first of them, so a job that starts at once has none, then at most once every
``every_s``, each time with the latest text only.

PostgreSQL holds which message it is and who sends it (``store.queue_messages``): a host sends it
only while it holds the chat's row, so two hosts never post a chat's message twice nor edit it at
once. It holds the row from the first update of a burst to its last, each update one statement
(``hold``: it renews the hold, records what the last update left and reads the queue), and lets it
go at the end, or at once when the queue emptied. Once the chat has no queued job, the message stays
for the job that started last, which takes it over as its status message (the states:
``job_messages``): it is never deleted under a job on its way to it. It says that the jobs were
cancelled when a cancel emptied the queue, and is deleted only when no running job of the chat could
take it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time

from telegram.error import TelegramError

from ..core import i18n
from ..core.logs import get_logger
from ..jobs.ports import ChatError
from ..store import queue_messages
from ..store.errors import StoreError
from .limiter import STATUS
from .progress import MOMENT_S
from .sending import send

log = get_logger("queue")

HOLD_S = 60.0
"""How long a host's hold of a chat's message lasts past its last update (renewed with each; longer
than any send with its retries and the wait for the next update)."""
MAX_LINES = 20
"""Queued jobs listed; the rest are counted (up to ``MAX_COUNTED``)."""
MAX_COUNTED = 1000
EDITS_PER_INTERVAL = 2
"""A queue message is edited at most once per this many progress intervals (``every_s``)."""
ROUNDS_AT_ONCE = 8
"""Chats whose message is being brought up to date at once. The others wait before they read their
queue, not after: under a flood the text is read just before Telegram's limit lets it go, so one
message says more (with every chat's round at once, all would show the queue as it was then)."""
FLUSH_S = 15.0
"""How long stopping waits for the chats' last updates (200 chats at Telegram's 30 a second: 7 s)."""


@dataclasses.dataclass
class _Chat:
    next_at: float
    dirty: bool = True
    cancelled: list[str] = dataclasses.field(default_factory=list)  # texts for a message whose queue emptied
    task: asyncio.Task | None = None
    kept: queue_messages.Held | None = None  # this host holds the chat's row; its last update left it so


class QueueMessages:
    """The bot's queue messages (one per bot, in ``BotData``; ``data`` gives the pool and settings)."""

    def __init__(self, data, clock=time.monotonic):
        self._data = data
        self._clock = clock
        self._chats: dict[int, _Chat] = {}
        self._now = asyncio.Event()  # set while stopping: updates go out without their wait
        self._turns = asyncio.Semaphore(ROUNDS_AT_ONCE)

    @property
    def store(self):
        return self._data.store

    @property
    def after_s(self) -> float:
        return min(MOMENT_S, self._data.settings.progress_interval_s)

    @property
    def every_s(self) -> float:
        return EDITS_PER_INTERVAL * self._data.settings.progress_interval_s

    def refresh(self, bot, chat_id: int, cancelled: list[str] | tuple = ()) -> None:
        """Bring chat ``chat_id``'s queue message up to date soon (``cancelled``: what it says of the
        jobs cancelled, if that leaves the chat's queue empty)."""
        if self._data.store is None:  # a bot without a store (tests of handlers alone)
            return
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = self._chats[chat_id] = _Chat(next_at=self._clock() + self.after_s)
        chat.dirty = True
        chat.cancelled.extend(cancelled)
        if chat.task is None:
            chat.task = asyncio.create_task(self._keep(bot, chat_id, chat), name=f"courier-queue-{chat_id}")

    async def flush(self, timeout_s: float = FLUSH_S) -> None:
        """Bring every chat's message up to date now, waiting at most ``timeout_s`` (the bot stops:
        a chat would show its queue as it was until its next change)."""
        self._now.set()
        tasks = [chat.task for chat in self._chats.values() if chat.task is not None]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=timeout_s)
            for task in late:
                task.cancel()
            if late:
                log.warning("%d queue messages not updated before the bot stopped", len(late))

    async def _keep(self, bot, chat_id: int, chat: _Chat) -> None:
        try:
            while chat.dirty:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._now.wait(), max(0.0, chat.next_at - self._clock()))
                async with self._turns:
                    chat.dirty, cancelled, chat.cancelled = False, chat.cancelled, []
                    try:
                        if not await self._round(bot, chat_id, chat, cancelled):  # another host sends it now
                            if self._now.is_set():  # stopping: that host sends the update, not us
                                return
                            chat.dirty = True
                            chat.cancelled[:0] = cancelled
                    except (StoreError, OSError) as exc:
                        log.warning("queue message of chat %s not updated: %s", chat_id, exc)
                chat.next_at = self._clock() + self.every_s
        finally:
            del self._chats[chat_id]
            with contextlib.suppress(StoreError, OSError):  # else the hold runs out by itself
                await self._release(chat_id, chat)

    async def _round(self, bot, chat_id: int, chat: _Chat, cancelled: list[str]) -> bool:
        """One update of the chat's message, held from the first update of a burst to its last;
        False if another host holds it."""
        start = await queue_messages.hold(self._data.store.pool, chat_id, HOLD_S, MAX_COUNTED, chat.kept)
        if start is None:
            return False
        (message_id, shown), queued, slots, taker = start
        chat.kept = start.held
        try:
            if not queued:
                message_id, shown = await self._emptied(bot, chat_id, message_id, shown, cancelled, taker)
                return True
            text = self._text(queued, slots)
            if message_id is None:
                message_id = (await send(lambda: bot.send_message(
                    chat_id, text, reply_to_message_id=queued[0].reply_to_message_id,
                    allow_sending_without_reply=True, rate_limit_args=STATUS), "queue message")).message_id
            elif text != shown:
                await send(lambda: bot.edit_message_text(text, chat_id=chat_id, message_id=message_id,
                                                         rate_limit_args=STATUS), "queue message")
            shown = text
        except ChatError as exc:  # refused, or unconfirmed: the next change posts one anew
            log.info("queue message of chat %s: %s", chat_id, exc)
            message_id = None
        finally:
            chat.kept = queue_messages.Held(message_id, shown if message_id is not None else None)
            if not queued:  # a job may take it over now: it does not wait for the next update
                await self._release(chat_id, chat)
        return True

    async def _release(self, chat_id: int, chat: _Chat) -> None:
        """Record what the chat's message is, and let it go (another host, a job, may take it)."""
        kept, chat.kept = chat.kept, None
        if kept is not None:
            pool = self._data.store.pool
            await (queue_messages.settle(pool, chat_id, *kept) if kept.message_id is not None
                   else queue_messages.drop(pool, chat_id))

    async def _emptied(self, bot, chat_id: int, message_id: int | None, shown: str | None,
                       cancelled: list[str], taker: bool) -> tuple[int | None, str | None]:
        """No job is queued in the chat: the message says what was cancelled, stays for a running job
        that takes it over (``taker``), or goes. Returns the message and text that stay (None: none)."""
        if message_id is None:
            return None, None
        if cancelled:
            text = "\n".join(dict.fromkeys(cancelled))
            await send(lambda: bot.edit_message_text(text, chat_id=chat_id, message_id=message_id,
                                                     rate_limit_args=STATUS), "queue message")
            return None, None  # it is a plain message now
        if taker:
            return message_id, shown
        try:
            await bot.delete_message(chat_id, message_id, rate_limit_args=STATUS)
        except TelegramError as exc:
            log.info("queue message %s of chat %s not deleted: %s", message_id, chat_id, exc)
        return None, None

    def _text(self, queued: list[queue_messages.QueuedJob], slots: int) -> str:
        """A line per job: its place, and when it starts (``slots``: 0 while no backend takes jobs)."""
        lines = []
        for job in queued[:MAX_LINES]:
            language = i18n.pick_language(job.language, self._data.settings.language)
            if not slots:
                lines.append(i18n.text(language, "queued", name=job.command, position=job.position))
            elif job.starts_in_s is None:
                lines.append(i18n.text(language, "queued_no_estimate", name=job.command, position=job.position))
            else:
                lines.append(i18n.text(language, "queued_eta", name=job.command, position=job.position,
                                       seconds=math.ceil(job.starts_in_s)))
        if len(queued) > MAX_LINES:
            language = i18n.pick_language(queued[0].language, self._data.settings.language)
            lines.append(i18n.text(language, "queue_more", count=len(queued) - MAX_LINES))
        return "\n".join(lines)
