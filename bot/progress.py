"""One status message per job, posted once if the job runs longer than a moment, edited at most once
per interval per chat.

Telegram allows roughly one message edit per second per chat before answering 429; progress frames
arrive far faster, so a text that comes within the chat's interval is dropped (a newer one follows).
A run's first text waits ``after_s`` (a moment: ``MOMENT_S`` or the progress interval if shorter)
and is then never dropped;
a job done sooner has no status message (its result's caption says "Done"), and after
``results_follow`` none is posted any more. Edits run in the background: a slow Bot API never
holds up the job itself. The final text is sent like a result (``bot/sending.py``): retried while
Telegram failed it for sure, for as long as the caller's ``patience`` says (through an outage: minutes).

Where the first text goes is decided in PostgreSQL before anything is posted (``take``; the
hand-over from the chat's queue message and its state table: ``bot/job_messages.py``): the job's own
message (an earlier run's), the chat's queue message once no job is queued there (while a host holds
that one, the decision waits for it), or a new post, which only the job's current worker may make.
So a status is posted once, on whichever host, and never raced and deleted. A message id of None is
never edited.

Live previews: Telegram cannot turn a text message into a photo (editMessageMedia refuses
a text message), so the first preview sends a photo with the status as its caption and
deletes the text, if there is one; later previews replace its photo (editMessageMedia), texts its
caption. The final text replaces the photo again (a new text message), so the job's results are
what remains of it. Each move is recorded (``moved``), for /forget.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from telegram import Bot, InputMediaPhoto
from telegram.error import BadRequest, TelegramError

from ..core.logs import get_logger
from ..jobs.ports import QUICK, ChatError, Patience
from ..store.errors import StoreError
from .limiter import STATUS
from .sending import send

log = get_logger("progress")

TakeFn = Callable[[], Awaitable[tuple[str, int | None]]]
"""Where the job's status shows, decided in PostgreSQL before posting (``store.jobs.take_status_message``)."""
AdoptFn = Callable[[int], Awaitable[int | None]]
"""Records a newly posted status message unless the job has one; returns the job's."""
MovedFn = Callable[[int], Awaitable[None]]
"""Records the message that took the place of the job's status message."""
MOMENT_S = 2.0
"""A status shows no sooner than this, or the progress interval if shorter: a job done sooner needs none."""
TAKE_POLL_S = 0.2
"""How often a status asks again while the chat's queue message is being sent (``take``: "wait")."""
TAKE_WAIT_S = 30.0
"""How long it asks at most; then it posts a message of its own."""
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
                 reply_to: int | None = None, take: TakeFn | None = None, adopt: AdoptFn | None = None,
                 moved: MovedFn | None = None, started: Callable[[], None] | None = None, after_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic):
        self.bot = bot
        self.chat_id = chat_id
        self.message_id = message_id
        self._reply_to = reply_to
        self._take = take
        self._adopt = adopt
        self._moved = moved
        self._started = started  # called at the first word: the job has left the chat's queue
        self._throttle = throttle
        self._clock = clock
        self._show_from = clock() + after_s  # the first text waits for this moment
        self._shown = ""
        self._text = ""  # the newest text, shown with the next preview
        self._image: bytes | None = None  # a preview not shown yet
        self._photo = False  # the status message is a photo (it shows a preview)
        self._pending: asyncio.Task | None = None
        self._timer: asyncio.Task | None = None  # shows the first text once the moment has passed
        self._quiet = False  # the results follow: nothing not shown yet is posted
        self._not_ours = False  # PostgreSQL said the job is no longer this worker's

    async def update(self, text: str) -> None:
        """Start showing ``text`` if the chat may be edited now, or if it is the run's first (once the
        moment has passed); otherwise drop it (a newer one follows)."""
        self._start_once()
        self._text = text
        if text == self._shown and self._image is None:
            return
        self._start()

    async def preview(self, image: bytes) -> None:
        """Show ``image`` with the newest text when the chat may be edited next (the newest image wins)."""
        self._start_once()
        self._image = image
        self._start()

    def results_follow(self) -> None:
        """No status is posted from now on unless one is shown already (it would land under the results)."""
        self._quiet = True
        if self._timer is not None:
            self._timer.cancel()

    def _start_once(self) -> None:
        if self._started is not None:
            started, self._started = self._started, None
            started()

    def _start(self) -> None:
        if (self._pending and not self._pending.done()) or self._not_ours:
            return
        if not self._shown:
            # A run's first text is never dropped: without it a job started right after another one's
            # edit in the chat would show no status at all until its result. It waits for the moment.
            if self._quiet:
                return
            wait_s = self._show_from - self._clock()
            if wait_s > 0:
                if self._timer is None:
                    self._timer = asyncio.create_task(self._after(wait_s), name=f"courier-status-{self.chat_id}")
                return
            self._throttle.try_acquire(self.chat_id)
        elif not self._throttle.try_acquire(self.chat_id):
            return
        self._pending = asyncio.create_task(self._show(), name=f"courier-progress-{self.chat_id}")

    async def _after(self, wait_s: float) -> None:
        await asyncio.sleep(wait_s)
        self._timer = None
        self._start()

    async def finish(self, text: str, *, optional: bool = False, patience: Patience = QUICK) -> None:
        """The final text, always shown, after any edit still in flight; it takes a preview's place.
        ``optional``: the chat shows it already (the result's caption): only a status message the
        job has, or takes over from the chat's queue, says it too."""
        self._start_once()
        if self._timer is not None:
            self._timer.cancel()
        if self._pending is not None:
            await self._pending
        if text == self._shown and not self._photo:
            return
        try:
            if optional and self.message_id is None:
                decision, message_id = await self._decide()
                if decision != "edit":
                    return
                self.message_id = message_id
            if self._photo:
                await send(lambda: self._replace_photo(text), f"status in chat {self.chat_id}", patience)
            else:
                await send(lambda: self._write(text), f"status in chat {self.chat_id}", patience,
                           idempotent=self.message_id is not None)  # an edit: once it landed, again shows the same
            self._shown = text
        except (ChatError, StoreError) as exc:  # e.g. the user deleted the message
            log.info("final status in chat %s not shown: %s", self.chat_id, exc)

    async def _decide(self) -> tuple[str, int | None]:
        """Where the status goes (``take``), waiting while the chat's queue message is being sent."""
        if self._take is None:
            return "post", None
        deadline = self._clock() + TAKE_WAIT_S
        while True:
            decision, message_id = await self._take()
            if decision != "wait":
                self._not_ours = decision == "none"
                return decision, message_id
            if self._clock() > deadline:
                return "post", None
            await asyncio.sleep(TAKE_POLL_S)

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
        except (TelegramError, StoreError) as exc:
            log.warning("progress edit in chat %s failed: %s", self.chat_id, exc)

    async def _show_preview(self, text: str, image: bytes) -> None:
        if self._photo:
            await self.bot.edit_message_media(InputMediaPhoto(image, caption=text or None), chat_id=self.chat_id,
                                              message_id=self.message_id, rate_limit_args=STATUS)
            return
        if self.message_id is None:
            decision, self.message_id = await self._decide()  # a text message to replace, or none
            if decision == "none":
                return
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
        """Show the first text where PostgreSQL says: an existing message (edited), or a new post."""
        decision, message_id = await self._decide()
        if decision == "none":
            return
        if decision == "edit":
            self.message_id = message_id
            await self._write(text)
            return
        sent = await self.bot.send_message(self.chat_id, text, reply_to_message_id=self._reply_to,
                                           allow_sending_without_reply=True, rate_limit_args=STATUS)
        self.message_id = sent.message_id  # the chat shows it, recorded or not: later texts edit it
        try:
            adopted = await self._adopt(sent.message_id) if self._adopt is not None else None
        except StoreError as exc:  # only /forget and a later run of the job would miss it
            log.warning("status message %s in chat %s not recorded: %s", sent.message_id, self.chat_id, exc)
            return
        if adopted is not None and adopted != sent.message_id:  # a reply announced as its status came first
            self.message_id = adopted
            with contextlib.suppress(TelegramError):
                await self.bot.delete_message(self.chat_id, sent.message_id, rate_limit_args=STATUS)
            await self.bot.edit_message_text(text, chat_id=self.chat_id, message_id=self.message_id,
                                             rate_limit_args=STATUS)
