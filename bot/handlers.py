"""Bot handlers: check, parse, enqueue, reply. The dispatcher does the rest.

Each handler is a top-level async function; the wiring is in ``build_handlers``. Nothing is
queued that the update already shows to be wrong: only new messages from a person get past
the ``gatekeeper``, text is cleaned (``parsing``), and a command's options and picture are
checked before its job is queued (``queueing``). Result buttons and ``/history`` are in
``buttons``. Whatever a handler raises
becomes one log record and a reply naming the same incident id (``on_error``).
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import traceback

from telegram import Chat, Update
from telegram.error import TelegramError
from telegram.ext import (
    ApplicationHandlerStop,
    BaseHandler,
    CallbackQueryHandler,
    InlineQueryHandler,
    MessageHandler,
    TypeHandler,
    filters,
)

from ..core import i18n
from ..core.logs import get_logger
from ..jobs.options import WIDEST, command_options, offered
from ..store import commands, jobs
from ..store.errors import is_outage
from . import access, buttons, defaults, forget, inline, keyboards, languages, miniapp, models
from .admin import ADMIN_HANDLERS, admin_menu
from .cancelling import cancel_one, end_cancelled
from .context import CourierContext
from .options import option_lines
from .outage import defer, tell_waiting
from .parsing import clean_text, echo, parse_command
from .queueing import queue_command
from .refusals import ANONYMOUS

log = get_logger("bot")

ALLOWED_UPDATES = ("message", "callback_query", "inline_query")
"""The update kinds the bot subscribes to, by long polling and by webhook alike."""

MAX_ALBUMS = 256
"""Albums remembered (``note_album``): Telegram sends an album's items within a second or so."""


async def gatekeeper(update: Update, context: CourierContext) -> None:
    """Before any other handler: only new messages, button presses and inline queries of allowed
    people go on (``access``: the allowlist and bans).

    It fails closed: whatever the check raises goes to ``on_error`` (an incident reply, or the
    wait for the database) and the update goes no further; python-telegram-bot would otherwise
    hand it on to the next groups, allowlist and bans unchecked.
    """
    try:
        note_album(context, update.message)
        await _admit(update, context)
    except ApplicationHandlerStop:
        raise
    except Exception as exc:
        await context.application.process_error(update, exc)
        raise ApplicationHandlerStop from exc


async def _admit(update: Update, context: CourierContext) -> None:
    """Return if ``update`` may go on, else raise ApplicationHandlerStop (its sender told why, once in
    a while: ``refusals``).

    Edits, channel posts and other kinds of update are dropped (an edit never queues a job
    twice). Anonymous group admins and posts on behalf of a channel all share one sender id,
    so nobody can be trusted or capped behind it: a command from one is refused politely.
    """
    message, refusals = update.message, context.bot_data.refusals
    if message is None and update.callback_query is None and update.inline_query is None:
        raise ApplicationHandlerStop
    if message is not None and (message.sender_chat is not None or message.from_user is None):
        if not message.is_automatic_forward and parse_command(message.text or message.caption,
                                                              context.bot.username):
            refusals.tell(ANONYMOUS, message.chat_id, message, context.t(update, ANONYMOUS))
        raise ApplicationHandlerStop
    refused, user = await access.refusal(update, context), update.effective_user
    if refused is None:
        refusals.let_in(user.id)
        return
    said = context.t(update, refused, user_id=user.id)
    if update.callback_query is not None:  # each press is answered (no message: not counted by Telegram)
        await update.callback_query.answer(said)
    elif update.inline_query is not None:  # no results, and the way to the chat that says why
        await inline.refuse(update, context)
    elif refused == access.OWNER_MADE:
        await message.reply_text(said)
    else:  # once in a while, and never waited for here (``refusals``)
        refusals.tell(refused, user.id, message, said)
    raise ApplicationHandlerStop


def describe(command: commands.Command, language: str) -> str:
    """A command's description in ``language`` (a published one's as its publisher wrote it)."""
    return i18n.command_description(language, command.name, command.description, command.source == "seed")


def command_menu(listed: list[commands.Command], language: str) -> list[tuple[str, str]]:
    """(command, description) of the Telegram menu in ``language``: the command table, then the built-ins."""
    def say(key: str) -> str:
        return i18n.text(language, key)

    built_ins = {"help": say("menu_help"), "status": say("menu_status"), "cancel": say("menu_cancel"),
                 "history": say("menu_history"),
                 "quota": say("menu_quota"), "lang": say("menu_lang"), "forget": say("menu_forget"),
                 "settings": say("menu_settings"), "models": say("menu_models"), "app": say("menu_app")}
    return [(c.name, describe(c, language)[:256] or c.name) for c in listed] + list(built_ins.items())


async def _command_lines(context: CourierContext, update: Update) -> str:
    listed = await commands.list_commands(context.pool, enabled_only=True)
    return "\n".join(context.t(update, "help_line", name=c.name, description=describe(c, context.language(update)))
                     for c in listed)


async def _help_lines(context: CourierContext, update: Update) -> str:
    """``/help``'s list: the model commands, then the built-ins the user may use, then (for an admin) theirs."""
    language = context.language(update)

    def lines(listed: list[tuple[str, str]]) -> str:
        return "\n".join(context.t(update, "help_line", name=name, description=description)
                         for name, description in listed)

    groups = [await _command_lines(context, update),
              context.t(update, "help_builtins") + "\n" + lines(command_menu([], language)[1:])]  # but /help
    if access.is_admin(update, context):
        groups.append(context.t(update, "help_admins") + "\n" + lines(admin_menu(language)))
    return "\n\n".join(group for group in groups if group)


async def start(update: Update, context: CourierContext) -> None:
    """Greet the user and list the commands (with the form's button, where there is one: ``miniapp``)."""
    await update.effective_message.reply_text(context.t(
        update, "welcome", name=clean_text(update.effective_user.first_name),
        commands=await _command_lines(context, update)), reply_markup=await miniapp.keyboard(update, context))


def builtin_help(name: str, language: str) -> str:
    """``/help <built-in>``: what it does (its menu line); for /settings also the options it keeps."""
    def say(key: str, **params) -> str:
        return i18n.text(language, key, **params)

    described = dict(command_menu([], language) + admin_menu(language), start=say("help_start"))
    if name == "settings":
        return say("help_settings", description=described[name],
                   options=", ".join(f"--{option}" for option in offered(WIDEST)))
    return say("help_line", name=name, description=described[name])


async def help_command(update: Update, context: CourierContext) -> None:
    """List the enabled commands from the command table; ``/help <command>`` lists its options, and
    ``/help <built-in>`` says what that one does."""
    request = parse_command(update.effective_message.text, context.bot.username)
    words = request.args.split() if request is not None else []
    if not words:
        await update.effective_message.reply_text(
            context.t(update, "help", commands=await _help_lines(context, update)),
            reply_markup=await miniapp.keyboard(update, context))
        return
    name = echo(words[0].removeprefix("/").lower())
    if name in BUILTIN_COMMANDS:
        await update.effective_message.reply_text(builtin_help(name, context.language(update)))
        return
    command = await commands.get_command(context.pool, name)
    if command is None or not command.enabled:
        await update.effective_message.reply_text(context.t(update, "unknown_command", name=name))
        return
    say = functools.partial(context.t, update)
    await update.effective_message.reply_text(say(
        "help_command", name=name, description=describe(command, context.language(update)),
        options="\n".join(option_lines(command_options(command.workflow), say))))


async def status(update: Update, context: CourierContext) -> None:
    """Show the user's queued and running jobs."""
    mine = await jobs.list_queue(context.pool, user_id=update.effective_user.id)
    if not mine:
        await update.effective_message.reply_text(context.t(update, "status_none"))
        return
    lines = []
    for job in mine:
        state = (context.t(update, "state_running") if job.status == "running"
                 else context.t(update, "state_queued", position=job.position))
        lines.append(context.t(update, "status_line", id=job.id, command=job.command, state=state))
    await update.effective_message.reply_text("\n".join(lines))


async def cancel(update: Update, context: CourierContext) -> None:
    """``/cancel``: the user's queued jobs and running ones (interrupted); ``/cancel <job id>``: that one
    job, if it is theirs (an admin's: anyone's)."""
    request = parse_command(update.effective_message.text, context.bot.username)
    if request is not None and request.args:
        await cancel_one(update, context, request.args)
        return
    count = await end_cancelled(context, await jobs.cancel_user_jobs(context.pool, update.effective_user.id))
    replies = [context.t(update, "edit_cancelled")] if await buttons.cancel_edit(update, context) else []
    if count or not replies:
        replies.append(context.nt(update, "cancelled", count) if count else context.t(update, "nothing_to_cancel"))
    await update.effective_message.reply_text("\n".join(replies))


async def run_command(update: Update, context: CourierContext) -> None:
    """Every /command: a built-in one (typed as text, not as a caption), else one of the command
    table, whose job is queued. One handler for all: python-telegram-bot would try a
    ``CommandHandler`` per built-in on every update."""
    message = update.message
    request = parse_command(message.text or message.caption, context.bot.username)
    if request is None:
        return
    built_in = BUILT_IN_HANDLERS.get(request.name) if message.text else None
    if built_in is not None:
        await built_in(update, context)
    else:
        await queue_command(update, context, request.name, request.args)


async def web_app_answer(update: Update, context: CourierContext) -> None:
    """The Mini App's answer: its command line, run as if the user had typed it (``miniapp``); a
    built-in's name is not one the form offers, and is answered as an unknown command."""
    request = parse_command(miniapp.sent_line(update.message), context.bot.username)
    if request is None:
        await update.message.reply_text(context.t(update, "miniapp_bad"))
    elif request.name in BUILT_IN_HANDLERS:
        await update.message.reply_text(context.t(update, "unknown_command", name=request.name))
    else:
        await queue_command(update, context, request.name, request.args)


async def text_message(update: Update, context: CourierContext) -> None:
    """A message without a command: the instruction of an edit that waits for one, else (in a private
    chat) a hint."""
    if update.message.text and await buttons.edit_instruction(update, context):
        return
    if update.effective_chat.type == Chat.PRIVATE:
        await hint(update, context)


async def hint(update: Update, context: CourierContext) -> None:
    """A private message without a command (text, a photo, a sticker...): one line on what to do; an
    album gets one, and none if it carries a command (``album_answered``)."""
    if album_answered(context, update.message) or update.message.via_bot is not None:
        return  # a result posted through inline mode (``inline``) asks for nothing
    await update.message.reply_text(context.t(update, "hint_text") if update.message.text
                                    else context.t(update, "hint_media"))


def note_album(context: CourierContext, message) -> None:
    """Remember the album ``message`` is an item of (Telegram sends each as a message of its own,
    with one ``media_group_id``) and whether it is the one with the command (``BotData.albums``).

    Called before any await: an album's updates come in one batch and start in order, so the
    command's item is noted before any captionless item of its album could get a hint.
    """
    if message is None or message.media_group_id is None:
        return
    albums, album = context.bot_data.albums, (message.chat_id, message.media_group_id)
    if parse_command(message.caption, context.bot.username) is not None:
        albums[album] = True
    else:
        albums.setdefault(album, False)
    while len(albums) > MAX_ALBUMS:
        del albums[next(iter(albums))]


def album_answered(context: CourierContext, message) -> bool:
    """Whether ``message``'s album has had its command or its hint; if not, it has it now (the hint)."""
    if message.media_group_id is None:
        return False
    album = (message.chat_id, message.media_group_id)
    if context.bot_data.albums.get(album):
        return True
    context.bot_data.albums[album] = True
    return False


async def stale_button(update: Update, context: CourierContext) -> None:
    """A press no other handler took (the data of an older deployment, or made up): answered, so the
    client's spinner stops."""
    await update.callback_query.answer(context.t(update, "button_stale"), show_alert=True)


async def on_error(update: object, context: CourierContext) -> None:
    """The error handler: one log record and, where there is a chat, a reply, both naming one incident id;
    a database outage instead defers the update (``outage``).

    The reply says no more than that (no exception, no path); the log has the traceback, with
    the bot token blanked out should any message carry it. It is written first: a chat that
    cannot be told (blocked, gone) changes nothing in it.
    """
    if isinstance(update, Update) and is_outage(context.error):
        defer(context.bot_data, update)
        await tell_waiting(context.bot, context.bot_data, update)
        raise ApplicationHandlerStop  # its other handlers would meet the outage too
    incident = secrets.token_hex(4)
    update = update if isinstance(update, Update) else None
    chat = update.effective_chat if update is not None else None
    if chat is not None and chat.type == Chat.CHANNEL:
        chat = None  # a channel's readers did not ask for anything
    trace = "".join(traceback.format_exception(context.error)).replace(context.bot.token, "<bot token>")
    log.error("incident %s: a handler failed on update %s (%s)\n%s", incident,
              update.update_id if update is not None else "-",
              f"telling chat {chat.id}" if chat is not None else "no chat to tell", trace.rstrip())
    if chat is not None:
        with contextlib.suppress(TelegramError):
            await context.bot.send_message(chat.id, context.t(update, "incident", incident=incident))


BUILT_IN_HANDLERS = {"start": start, "help": help_command, "status": status, "cancel": cancel,
                     "quota": access.quota, "lang": languages.lang, "settings": defaults.settings,
                     "models": models.models, "forget": forget.forget, "history": buttons.history, "app": miniapp.app,
                     **ADMIN_HANDLERS}  # admins only (each checks): before the command table's
"""The built-in commands' handlers by name; a command table's command of the same name is never reached."""
BUILTIN_COMMANDS = tuple(BUILT_IN_HANDLERS)

MESSAGES_ONLY = filters.UpdateType.MESSAGE
"""New messages; the gatekeeper has already dropped edits and channel posts, this keeps button presses out."""
COMMAND = MESSAGES_ONLY & (filters.COMMAND | filters.CaptionRegex(r"^/"))


def build_handlers() -> list[tuple[BaseHandler, int]]:
    """(handler, group) pairs: the gatekeeper first (it also reads the user's language), then
    commands, then the hint for everything else, and the answer to a button nobody knows."""
    return [
        (TypeHandler(Update, gatekeeper), -2),
        (MessageHandler(COMMAND, run_command), 0),
        (MessageHandler(MESSAGES_ONLY & filters.StatusUpdate.WEB_APP_DATA, web_app_answer), 0),
        (CallbackQueryHandler(languages.lang_button, pattern=f"^{languages.BUTTON_PREFIX}"), 0),
        (CallbackQueryHandler(models.turn, pattern=f"^{models.BUTTON_PREFIX}"), 0),
        (CallbackQueryHandler(forget.confirm, pattern=f"^{forget.BUTTON_PREFIX}"), 0),
        (CallbackQueryHandler(buttons.press, pattern=f"^{keyboards.PREFIX}"), 0),
        (MessageHandler(MESSAGES_ONLY & ~COMMAND & (filters.TEXT | filters.ATTACHMENT), text_message), 0),
        (CallbackQueryHandler(stale_button), 0),  # last: every press is answered
        (InlineQueryHandler(inline.answer), 0),
    ]
