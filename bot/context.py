"""What handlers reach through ``context``: a typed CustomContext over shared services."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from telegram.ext import Application, CallbackContext, ExtBot

from ..core import i18n
from ..core.config import Settings
from .queue_message import QueueMessages
from .refusals import Refusals

if TYPE_CHECKING:  # typing only: the dispatcher's module brings the ComfyUI client and the Anyone transport
    from ..jobs.dispatcher import Dispatcher
    from ..store import Store

CHOSEN_LANGUAGE = "language"
"""The ``user_data`` key of the language the user chose with /lang (None: none chosen)."""
STORED_ADMIN = "admin"
"""The ``user_data`` key of whether the user is an admin made in PostgreSQL (read for each update)."""


@dataclasses.dataclass
class BotData:
    """Services shared by all handlers (PTB's bot_data, typed)."""

    settings: Settings | None = None
    store: Store | None = None
    dispatcher: Dispatcher | None = None
    """This host's dispatcher; None until it started."""
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
