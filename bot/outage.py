"""A command that arrives while PostgreSQL is down is not lost: it waits (at Telegram, or in the
polling inbox, or in Telegram's webhook retries) and is handled once the database is back. Its
sender is told so, once per update, in their Telegram language (their /lang choice is in the
database)."""

from __future__ import annotations

import contextlib

from telegram import Update
from telegram.error import TelegramError

from ..core import i18n
from ..core.logs import get_logger

log = get_logger("bot")


async def tell_waiting(bot, bot_data, update: Update) -> None:
    """Tell the sender of ``update`` that it waits for the database, unless they were told before."""
    if update.update_id in bot_data.told_waiting:
        return
    bot_data.told_waiting.add(update.update_id)
    chat, user = update.effective_chat, update.effective_user
    if chat is None or user is None or update.effective_message is None:
        return
    language = i18n.pick_language(user.language_code, bot_data.settings.language)
    log.warning("update %s waits: PostgreSQL is unreachable", update.update_id)
    with contextlib.suppress(TelegramError):
        await bot.send_message(chat.id, i18n.text(language, "database_down"))


def defer(bot_data, update: Update) -> None:
    """``update``'s handlers met a database outage: handle it again later."""
    bot_data.waiting.add(update.update_id)


def finished(bot_data, update: Update) -> bool:
    """Whether ``update``'s handlers ran to their end (it is handled); else it waits for the database."""
    if update.update_id in bot_data.waiting:
        bot_data.waiting.discard(update.update_id)
        return False
    bot_data.told_waiting.discard(update.update_id)
    return True
