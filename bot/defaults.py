"""/settings: a user's default options, applied under the options typed in a command.

``/settings`` shows them, ``/settings --ar 16:9 --steps 4`` sets those two (keeping the others),
``/settings reset`` clears them all. They are checked against the widest range any graph can
take; each command then uses those it offers and can take (``options.choose``).

An admin sets a command's own defaults for everyone the same way, ``/settings /img --model sdxl``
(``/settings /img`` shows them, ``/settings /img reset`` clears them): checked against what the
command takes, model names against the backends' files; a user's own defaults and what they type win.

A control character (NUL...) in the text is refused, not dropped as in a command's prompt
(``parsing.clean_text``): what is saved is what the user typed, or nothing.
"""

from __future__ import annotations

import functools

from telegram import Update

from ..jobs.model_names import job_graph
from ..jobs.options import WIDEST, OptionError, command_options
from ..store import backends, commands
from ..store.user_options import get_user_options, set_user_options
from .access import is_admin
from .context import CourierContext
from .options import choose, format_options, option_message, split_options
from .parsing import MAX_PROMPT_CHARS, clean_text, echo, parse_command

RESET = "reset"


async def settings(update: Update, context: CourierContext) -> None:
    """Show, set or reset the user's default options."""
    message, user = update.effective_message, update.effective_user
    say = functools.partial(context.t, update)
    if clean_text(message.text) != message.text:  # saved as typed or not at all: never with a character dropped
        await message.reply_text(say("settings_control_chars"))
        return
    request = parse_command(message.text, context.bot.username)
    text = request.args if request is not None else ""
    if text.startswith("/"):
        await command_settings(update, context, text[1:])
        return
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


async def command_settings(update: Update, context: CourierContext, text: str) -> None:
    """``/settings /<name> [options | reset]``: show, set or clear command ``name``'s defaults; admins only."""
    message = update.effective_message
    say = functools.partial(context.t, update)
    name, _, rest = text.partition(" ")
    name, rest = name.lower(), rest.strip()
    if not is_admin(update, context):
        await message.reply_text(say("admin_only", name="settings /" + echo(name)))
        return
    command = await commands.get_command(context.pool, name)
    if command is None:  # a built-in command (/start), or none at all
        await message.reply_text(say("command_settings_no_command", name=echo(name)))
        return
    if not rest:
        await message.reply_text(say("command_settings_show", name=name, options=command.defaults)
                                 if command.defaults else say("command_settings_none", name=name))
        return
    if rest.lower() == RESET:
        await commands.set_command_defaults(context.pool, name, "")
        await message.reply_text(say("command_settings_cleared", name=name))
        return
    if len(rest) > MAX_PROMPT_CHARS:
        await message.reply_text(say("prompt_too_long", length=len(rest), limit=MAX_PROMPT_CHARS))
        return
    stray, typed = split_options(rest)
    if stray:
        await message.reply_text(say("command_settings_usage", name=name))
        return
    spec = command_options(command.workflow)
    try:
        chosen, used = choose(typed, split_options(command.defaults)[1], spec)
        if spec.offers("model"):  # the names must mean files now, not at every user's command
            job_graph(command.workflow, chosen, await backends.model_choices(context.pool), picture=False)
    except OptionError as error:
        await message.reply_text(option_message(error, say, name, spec))
        return
    saved = format_options(used)
    await commands.set_command_defaults(context.pool, name, saved)
    await message.reply_text(say("command_settings_saved", name=name, options=saved))
