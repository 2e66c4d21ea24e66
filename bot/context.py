"""What handlers reach through ``context``: a typed CustomContext over shared services."""

from __future__ import annotations

import dataclasses
import functools

from telegram.ext import Application, CallbackContext, ExtBot

from ..config import Settings
from .. import i18n
from ..jobs.submit import announce
from .sink import delete_message


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

    def t(self, update, key: str, **params) -> str:
        """Localized text for the user behind ``update``."""
        user = update.effective_user if update is not None else None
        language = i18n.pick_language(user.language_code if user else None, self.settings.language)
        return i18n.text(language, key, **params)

    def announce(self, update, job_id: int, post_status) -> None:
        """Send a committed job's "Queued" reply in a task of its own: waiting for Telegram's rate
        limit holds none of the bot's concurrent-update slots (errors reach the error handler)."""
        chat_id = update.effective_chat.id
        self.application.create_task(
            announce(self.pool, job_id, post_status, functools.partial(delete_message, self.bot, chat_id)),
            update=update, name=f"courier-queued-{job_id}")
