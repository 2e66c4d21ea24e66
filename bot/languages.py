"""The user's language: ``/lang`` (an inline choice, or ``/lang de`` at once), stored in PostgreSQL.

The choice is read for every update, by the gatekeeper (``access.refusal``), so it holds across
restarts and for every handler, the error handler included; jobs carry the language they were
queued in. Without a choice, Telegram's ``language_code`` decides (``i18n``).
"""

from __future__ import annotations

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update

from ..core import i18n
from ..store import users
from .context import CHOSEN_LANGUAGE, CourierContext
from .parsing import clean_text, parse_command

BUTTON_PREFIX = "lang:"
BUTTONS_PER_ROW = 3
MAX_CODE_CHARS = 16  # of an unknown code, echoed back
CODES = ", ".join(i18n.LANGUAGES)


def language_keyboard() -> InlineKeyboardMarkup:
    """One button per catalog, each labelled in its own language."""
    buttons = [InlineKeyboardButton(i18n.text(language, "language_name"), callback_data=f"{BUTTON_PREFIX}{language}")
               for language in i18n.LANGUAGES]
    return InlineKeyboardMarkup([buttons[i:i + BUTTONS_PER_ROW] for i in range(0, len(buttons), BUTTONS_PER_ROW)])


async def choose(update: Update, context: CourierContext, language: str) -> str:
    """Store ``language`` as the user's; returns the confirmation, in that language."""
    await users.set_language(context.pool, update.effective_user.id, language)
    context.user_data[CHOSEN_LANGUAGE] = language
    return context.t(update, "lang_set")


async def lang(update: Update, context: CourierContext) -> None:
    """``/lang``: the choice as buttons; ``/lang <code>``: that language now."""
    message = update.effective_message
    request = parse_command(message.text, context.bot.username)
    code = request.args if request else ""
    if not code:
        await message.reply_text(context.t(update, "lang_choose", current=context.t(update, "language_name"),
                                           codes=CODES), reply_markup=language_keyboard())
        return
    language = i18n.language_of(code)
    if language is None:
        await message.reply_text(context.t(update, "lang_unknown", code=clean_text(code)[:MAX_CODE_CHARS],
                                           codes=CODES))
        return
    await message.reply_text(await choose(update, context, language))


async def lang_button(update: Update, context: CourierContext) -> None:
    """A press on a language button: that language for the presser (in a group, each picks their own)."""
    query = update.callback_query
    language = i18n.language_of((query.data or "").removeprefix(BUTTON_PREFIX))
    if language is None:  # not a button we sent, or one of a language no longer offered
        await query.answer(context.t(update, "button_stale"), show_alert=True)
        return
    confirmation = await choose(update, context, language)
    await query.answer(confirmation)
    if query.message is not None and query.message.chat.type == "private":
        await query.edit_message_text(confirmation)
