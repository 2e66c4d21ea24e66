"""What handlers reach through ``context``: a typed CustomContext over shared services."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable, Callable

from telegram.ext import Application, CallbackContext, ExtBot

from ..core import i18n
from ..core.config import Settings
from ..jobs.submit import announce, submit
from .limiter import STATUS
from .parsing import profile
from .queue_message import QueueMessages
from .refusals import BUSY, Refusals
from .sink import delete_message

CHOSEN_LANGUAGE = "language"
"""The ``user_data`` key of the language the user chose with /lang (None: none chosen)."""
STORED_ADMIN = "admin"
"""The ``user_data`` key of whether the user is an admin made in PostgreSQL (read for each update)."""


@dataclasses.dataclass
class BotData:
    """Services shared by all handlers (PTB's bot_data, typed)."""

    settings: Settings | None = None
    store: object = None
    dispatcher: object = None
    queue_messages: QueueMessages = dataclasses.field(init=False)
    """The chats' queue messages, which acknowledge queued jobs (``queue_message``)."""
    albums: dict[tuple[int, str], bool] = dataclasses.field(default_factory=dict)
    """(chat id, media group id) of the latest albums, oldest first -> whether the album had its
    command or its hint (``handlers.note_album``)."""
    info_shown: dict[str, float] = dataclasses.field(default_factory=dict)
    """When each result's ℹ️ last sent its message, by button token (``buttons.info``)."""
    waiting: set[int] = dataclasses.field(default_factory=set)
    """Updates whose handlers met a database outage, to be handled again (``outage``)."""
    told_waiting: set[int] = dataclasses.field(default_factory=set)
    """Updates whose senders were told their command waits for the database."""
    owner_claims: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)
    """Held by an owner code's claim: a flood of guesses costs PostgreSQL one claim at a time."""
    refusals: Refusals = dataclasses.field(default_factory=Refusals)
    """Which refusals were told lately, and the sender of those to people the bot does not serve."""
    publish_admin_menu: Callable[[int], Awaitable[None]] | None = None
    """Publishes the admins' command menu in one more admin's chat (``BotService``)."""

    def __post_init__(self):
        self.queue_messages = QueueMessages(self)


class CourierContext(CallbackContext[ExtBot, dict, dict, BotData]):
    def __init__(self, application: Application, chat_id: int | None = None, user_id: int | None = None):
        super().__init__(application=application, chat_id=chat_id, user_id=user_id)
        self.named_command: tuple[str, object, str] | None = None
        """The command the update names, its row (None: no such command) and the sender's default
        options, as the gatekeeper read them (``access.refusal``; one context serves one update)."""

    @property
    def settings(self) -> Settings:
        return self.bot_data.settings

    @property
    def pool(self):
        return self.bot_data.store.pool

    def language(self, update) -> str:
        """The language of the user behind ``update``: their ``/lang`` choice (``CHOSEN_LANGUAGE``,
        read for each update), else their Telegram language, else ``COURIER_LANGUAGE``, else English."""
        user = update.effective_user if update is not None else None
        if user is None:
            return i18n.pick_language(None, self.settings.language)
        chosen = (self.user_data or {}).get(CHOSEN_LANGUAGE)
        return i18n.pick_language(chosen or user.language_code, self.settings.language)

    def t(self, update, key: str, **params) -> str:
        """Localized text for the user behind ``update``."""
        return i18n.text(self.language(update), key, **params)

    def nt(self, update, key: str, count: int, **params) -> str:
        """Localized plural text (``i18n.ntext``) for the user behind ``update``."""
        return i18n.ntext(self.language(update), key, count, **params)

    async def submit_job(self, update, command: str, params: dict, *, quota=None, part: int = 0,
                         announced: Callable[[int], str] | None = None) -> int | None:
        """Queue a job for the sender of ``update`` (at their cap they are told so, once for a burst
        of commands (``refusals``), and nothing is queued; so with a spent ``quota``, a
        ``jobs.submit.Quota``; a second delivery of ``update`` queues nothing and gets no reply;
        ``part`` numbers the jobs one update asks for), return its id (None: nothing queued), and
        have the chat's queue message list it (``queue_message``: in a task of its own, after a
        moment, so a job that starts at once needs none); or, with ``announced``, reply
        ``announced(position)`` to it, which becomes the job's status message
        (``jobs.submit.announce``: ``/bench``, whose reply says more than a queue line)."""
        message, user = update.effective_message, update.effective_user

        async def refuse(count: int) -> None:  # one reply for a burst of commands at the cap
            if self.bot_data.refusals.due(BUSY, user.id):
                await message.reply_text(self.nt(update, "too_many_jobs", count))

        async def post_status(position: int) -> int:
            return (await self.bot.send_message(
                message.chat_id, announced(position), reply_to_message_id=message.message_id,
                allow_sending_without_reply=True, rate_limit_args=STATUS)).message_id
        job_id = await submit(self.pool, user_id=user.id, chat_id=message.chat_id, command=command, params=params,
                              profile=profile(user), reply_to_message_id=message.message_id,
                              max_active=self.settings.max_jobs_per_user,
                              update=(self.bot.id, update.update_id, part),
                              refuse=refuse,
                              quota=quota)
        if job_id is not None and announced is not None:
            self.application.create_task(announce(self.pool, job_id, post_status,
                                                  functools.partial(delete_message, self.bot, message.chat_id)),
                                         update=update, name=f"courier-announce-{job_id}")
        elif job_id is not None:
            self.bot_data.queue_messages.refresh(self.bot, message.chat_id)
        return job_id
