"""Bot handlers: check, parse, enqueue, reply. The dispatcher does the rest.

Each handler is a top-level async function; the wiring is in ``build_handlers``. Nothing is
queued that the update already shows to be wrong: only new messages from a person get past
the ``gatekeeper``, text is cleaned (``parsing``), and a picture is checked for its type,
file size and pixel count as far as the update states them. Whatever a handler raises
becomes one log record and a reply naming the same incident id (``on_error``).
"""

from __future__ import annotations

import contextlib
import functools
import random
import secrets
import traceback
from collections.abc import Callable

from telegram import Chat, Message, Update
from telegram.constants import FileSizeLimit
from telegram.error import TelegramError
from telegram.ext import (
    ApplicationHandlerStop,
    BaseHandler,
    CallbackQueryHandler,
    CommandHandler,
    MessageHandler,
    TypeHandler,
    filters,
)

from .. import i18n, imaging
from ..jobs.options import OptionError, command_options, plan
from ..jobs.workflow import requires_image
from ..logs import get_logger
from ..store import commands, jobs, sessions
from ..store.errors import is_outage
from ..store.user_options import get_user_options
from . import access, admin, defaults, forget, languages
from .context import CourierContext
from .options import choose, format_options, option_lines, option_message, split_options
from .outage import defer, tell_waiting
from .parsing import MAX_PROMPT_CHARS, clean_text, parse_command

log = get_logger("bot")

ALLOWED_UPDATES = ("message", "callback_query")
"""The update kinds the bot subscribes to, by long polling and by webhook alike."""

MENU_COMMANDS = ("help", "status", "cancel", "quota", "lang", "forget", "settings")
"""Built-ins shown in everyone's Telegram menu (admin commands only in the admins', ``admin.admin_menu``)."""
BUILTIN_COMMANDS = ("start", *MENU_COMMANDS, *admin.ADMIN_COMMANDS)
MAX_SEED = 2**32 - 1


class Refusal(Exception):
    """A request turned down at the edge; the message is for the user, already in their language."""


async def gatekeeper(update: Update, context: CourierContext) -> None:
    """Before any other handler: only new messages and button presses of allowed people go on
    (``access``: the allowlist and bans).

    Edits, channel posts and other kinds of update are dropped (an edit never queues a job
    twice). Anonymous group admins and posts on behalf of a channel all share one sender id,
    so nobody can be trusted or capped behind it: a command from one is refused politely.
    """
    message = update.message
    if message is None and update.callback_query is None:
        raise ApplicationHandlerStop
    if message is not None and (message.sender_chat is not None or message.from_user is None):
        if not message.is_automatic_forward and parse_command(message.text or message.caption,
                                                              context.bot.username):
            await message.reply_text(context.t(update, "anonymous_sender"))
        raise ApplicationHandlerStop
    refused = await access.refusal(update, context)
    if refused is None:
        return
    if update.effective_message is not None:
        await update.effective_message.reply_text(refused)
    elif update.callback_query is not None:
        await update.callback_query.answer(refused)
    raise ApplicationHandlerStop


def describe(command: commands.Command, language: str) -> str:
    """A command's description in ``language`` (a published one's as its publisher wrote it)."""
    return i18n.command_description(language, command.name, command.description, command.source == "seed")


def command_menu(listed: list[commands.Command], language: str) -> list[tuple[str, str]]:
    """(command, description) of the Telegram menu in ``language``: the command table, then the built-ins."""
    def say(key: str) -> str:
        return i18n.text(language, key)

    built_ins = {"help": say("menu_help"), "status": say("menu_status"), "cancel": say("menu_cancel"),
                 "quota": say("menu_quota"), "lang": say("menu_lang"), "forget": say("menu_forget"),
                 "settings": say("menu_settings")}
    return [(c.name, describe(c, language)[:256] or c.name) for c in listed] + list(built_ins.items())


async def _command_lines(context: CourierContext, update: Update) -> str:
    listed = await commands.list_commands(context.pool, enabled_only=True)
    return "\n".join(context.t(update, "help_line", name=c.name, description=describe(c, context.language(update)))
                     for c in listed)


async def start(update: Update, context: CourierContext) -> None:
    """Greet the user and list the commands."""
    await update.effective_message.reply_text(context.t(
        update, "welcome", name=clean_text(update.effective_user.first_name),
        commands=await _command_lines(context, update)))


async def help_command(update: Update, context: CourierContext) -> None:
    """List the enabled commands from the command table; ``/help <command>`` lists its options."""
    if not context.args:
        await update.effective_message.reply_text(
            context.t(update, "help", commands=await _command_lines(context, update)))
        return
    name = context.args[0].removeprefix("/").lower()
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
        await admin.cancel_one(update, context, request.args)
        return
    cancelled = await jobs.cancel_user_jobs(context.pool, update.effective_user.id)
    await admin.interrupt(context, cancelled.running)
    count = len(cancelled.queued) + len(cancelled.running)
    await update.effective_message.reply_text(context.t(update, "cancelled", count=count) if count
                                              else context.t(update, "nothing_to_cancel"))


def image_file_id(message: Message | None, say: Callable[..., str], name: str, max_bytes: int) -> str | None:
    """The file id of the picture attached to ``message`` (a photo, or an image sent as a file).

    None when nothing is attached. The size and pixel count are checked as far as the update
    states them (a document's pixels are only known once its bytes are fetched).
    :raises Refusal: the attachment is not a picture, or is too large to use.
    """
    if message is None or not message.effective_attachment:
        return None
    width = height = None
    if message.photo:
        attachment = message.photo[-1]
        width, height = attachment.width, attachment.height
    elif message.document is not None and (message.document.mime_type or "").startswith("image/"):
        attachment = message.document
    else:
        raise Refusal(say("not_an_image", name=name))
    size = attachment.file_size or 0
    if size > max_bytes:
        raise Refusal(say("bad_image", reason=_reason(say, imaging.too_big(size, max_bytes))))
    if size > FileSizeLimit.FILESIZE_DOWNLOAD:
        raise Refusal(say("bad_image", reason=say("image_too_big_for_telegram",
                                                  limit_mb=FileSizeLimit.FILESIZE_DOWNLOAD / 1e6)))
    if width and height and (refusal := imaging.too_many_pixels(width, height)):
        raise Refusal(say("bad_image", reason=_reason(say, refusal)))
    return attachment.file_id


def _reason(say: Callable[..., str], bad: imaging.BadImage) -> str:
    return say(bad.key, **bad.params)


async def run_command(update: Update, context: CourierContext) -> None:
    """Any other /command: look it up in the command table and enqueue a job."""
    message = update.message
    user = update.effective_user
    request = parse_command(message.text or message.caption, context.bot.username)
    if request is None:
        return
    command = await commands.get_command(context.pool, request.name)
    if command is None or not command.enabled:
        await message.reply_text(context.t(update, "unknown_command", name=request.name))
        return
    needs_image = requires_image(command.workflow)
    say = functools.partial(context.t, update)
    spec = command_options(command.workflow)
    prompt, typed = split_options(request.args)
    try:
        chosen, used = choose(typed, split_options(await get_user_options(context.pool, user.id))[1], spec)
        runs = plan(chosen, spec, random.randint(0, MAX_SEED))
    except OptionError as error:
        await message.reply_text(option_message(error, say, request.name, spec))
        return
    if not prompt and not needs_image:
        await message.reply_text(context.t(update, "missing_prompt", name=request.name))
        return
    if len(request.args) > MAX_PROMPT_CHARS:
        await message.reply_text(context.t(update, "prompt_too_long", length=len(request.args),
                                           limit=MAX_PROMPT_CHARS))
        return
    image = None
    if needs_image:
        max_bytes = int(context.settings.max_image_mb * 2**20)
        try:
            image = (image_file_id(message, say, request.name, max_bytes)
                     or image_file_id(message.reply_to_message, say, request.name, max_bytes))
        except Refusal as refusal:
            await message.reply_text(str(refusal))
            return
        if image is None:
            session = await sessions.get_session(context.pool, message.chat_id, user.id)
            image = next((o["file_id"] for o in reversed(session.last_outputs if session else [])
                          if o.get("kind") == "image"), None)
        if image is None:
            await message.reply_text(context.t(update, "needs_image", name=request.name))
            return
    for part, run in enumerate(runs):  # one, or --n of them where the graph takes no batch
        queued = await context.submit_job(
            update, request.name,
            {"prompt": prompt, "seed": run.seed, "options": format_options(used), "inputs": run.inputs,
             "image_file_id": image, "language": context.language(update),
             "workflow": command.workflow},  # runs as it was when queued
            lambda position: context.t(update, "queued", name=request.name, position=position),
            quota=access.quota_of(update, context), part=part)
        if queued is None:
            break


async def hint(update: Update, context: CourierContext) -> None:
    """A private message without a command (text, a photo, a sticker...): one line on what to do."""
    await update.message.reply_text(context.t(update, "hint_text") if update.message.text
                                    else context.t(update, "hint_media"))


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


MESSAGES_ONLY = filters.UpdateType.MESSAGE
"""New messages; the gatekeeper has already dropped edits and channel posts, this keeps button presses out."""
COMMAND = MESSAGES_ONLY & (filters.COMMAND | filters.CaptionRegex(r"^/"))


def build_handlers() -> list[tuple[BaseHandler, int]]:
    """(handler, group) pairs: the gatekeeper first, the user's language, then commands, then the hint
    for everything else."""
    return [
        (TypeHandler(Update, gatekeeper), -2),
        (TypeHandler(Update, languages.load_language), -1),
        (CommandHandler("start", start, MESSAGES_ONLY), 0),
        (CommandHandler("help", help_command, MESSAGES_ONLY), 0),
        (CommandHandler("status", status, MESSAGES_ONLY), 0),
        (CommandHandler("cancel", cancel, MESSAGES_ONLY), 0),
        (CommandHandler("quota", access.quota, MESSAGES_ONLY), 0),
        (CommandHandler("lang", languages.lang, MESSAGES_ONLY), 0),
        (CallbackQueryHandler(languages.lang_button, pattern=f"^{languages.BUTTON_PREFIX}"), 0),
        (CommandHandler("settings", defaults.settings, MESSAGES_ONLY), 0),
        (CommandHandler("forget", forget.forget, MESSAGES_ONLY), 0),
        (CallbackQueryHandler(forget.confirm, pattern=f"^{forget.BUTTON_PREFIX}"), 0),
        *((CommandHandler(name, handler, MESSAGES_ONLY), 0)  # admins only; before the command table's
          for name, handler in admin.ADMIN_HANDLERS.items()),
        (MessageHandler(COMMAND, run_command), 0),
        (MessageHandler(MESSAGES_ONLY & filters.ChatType.PRIVATE & ~COMMAND & (filters.TEXT | filters.ATTACHMENT),
                        hint), 0),
    ]
