"""What handlers reach through ``context``: a typed CustomContext over shared services."""

from __future__ import annotations

import dataclasses

from telegram.ext import Application, CallbackContext, ExtBot

from .. import i18n
from ..config import Settings

CHOSEN_LANGUAGE = "language"
"""The ``user_data`` key of the language the user chose with /lang (None: none chosen)."""


@dataclasses.dataclass
class BotData:
    """Services shared by all handlers (PTB's bot_data, typed)."""

    settings: Settings | None = None
    store: object = None
    dispatcher: object = None


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
