"""/settings: a user's default options, applied under the options typed in a command.

``/settings`` shows them, ``/settings --ar 16:9 --steps 4`` sets those two (keeping the others),
``/settings reset`` clears them all. They are checked against the widest range any graph can
take; each command then uses those it offers and can take (``options.choose``).
"""

from __future__ import annotations

import functools

from telegram import Update

from ..jobs.options import WIDEST, OptionError
from ..store.user_options import get_user_options, set_user_options
from .context import CourierContext
from .options import choose, format_options, option_message, split_options
from .parsing import MAX_PROMPT_CHARS, parse_command

RESET = "reset"


async def settings(update: Update, context: CourierContext) -> None:
    """Show, set or reset the user's default options."""
    message, user = update.effective_message, update.effective_user
    say = functools.partial(context.t, update)
    request = parse_command(message.text, context.bot.username)
    text = request.args if request is not None else ""
    current = await get_user_options(context.pool, user.id)
    if not text:
        await message.reply_text(say("settings_show", options=current) if current else say("settings_none"))
        return
    if text.lower() == RESET:
        await set_user_options(context.pool, user.id, "")
        await message.reply_text(say("settings_cleared"))
        return
    if len(text) > MAX_PROMPT_CHARS:
        await message.reply_text(say("prompt_too_long", length=len(text), limit=MAX_PROMPT_CHARS))
        return
    stray, typed = split_options(text)
    if stray:
        await message.reply_text(say("settings_usage"))
        return
    try:
        _, used = choose(typed, split_options(current)[1], WIDEST)
    except OptionError as error:
        await message.reply_text(option_message(error, say, "settings", WIDEST))
        return
    saved = format_options(used)
    await set_user_options(context.pool, user.id, saved)
    await message.reply_text(say("settings_saved", options=saved))
