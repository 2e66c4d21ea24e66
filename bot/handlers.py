"""Bot handlers: parse, check, enqueue, reply. The dispatcher does the rest.

Each handler is a top-level async function; the wiring is in ``build_handlers``.
"""

from __future__ import annotations

import random

from telegram import Message, Update
from telegram.ext import ApplicationHandlerStop, BaseHandler, CommandHandler, MessageHandler, TypeHandler, filters

from ..jobs.workflow import requires_image
from ..store import commands, jobs, sessions, users
from . import admin
from .context import CourierContext
from .parsing import MAX_PROMPT_CHARS, parse_command

MENU_COMMANDS = {"help": "List the commands", "status": "Your jobs in the queue", "cancel": "Cancel your jobs"}
"""Built-ins shown in everyone's Telegram menu (admin commands are not)."""
BUILTIN_COMMANDS = ("start", *MENU_COMMANDS, *admin.ADMIN_COMMANDS)
MAX_SEED = 2**32 - 1


async def gatekeeper(update: Update, context: CourierContext) -> None:
    """Refuse users outside the allowlist, politely, before any other handler runs."""
    allowed = context.settings.allowed_users
    user = update.effective_user
    if not allowed or user is None or user.id in allowed:
        return
    if update.effective_message is not None:
        await update.effective_message.reply_text(context.t(update, "not_allowed", user_id=user.id))
    elif update.callback_query is not None:
        await update.callback_query.answer(context.t(update, "not_allowed", user_id=user.id))
    raise ApplicationHandlerStop


async def _command_lines(context: CourierContext, update: Update) -> str:
    listed = await commands.list_commands(context.pool, enabled_only=True)
    return "\n".join(context.t(update, "help_line", name=c.name, description=c.description)
                     for c in listed)


async def start(update: Update, context: CourierContext) -> None:
    """Greet the user and list the commands."""
    await update.effective_message.reply_text(context.t(
        update, "welcome", name=update.effective_user.first_name,
        commands=await _command_lines(context, update)))


async def help_command(update: Update, context: CourierContext) -> None:
    """List the enabled commands from the command table."""
    await update.effective_message.reply_text(
        context.t(update, "help", commands=await _command_lines(context, update)))


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
    """Cancel the user's queued jobs and interrupt the running ones."""
    cancelled = await jobs.cancel_user_jobs(context.pool, update.effective_user.id)
    dispatcher = context.bot_data.dispatcher
    for job in cancelled.running:
        if dispatcher is not None:
            await dispatcher.interrupt(job.id)
    count = len(cancelled.queued) + len(cancelled.running)
    key = "cancelled" if count else "nothing_to_cancel"
    await update.effective_message.reply_text(context.t(update, key, count=count))


def image_file_id(message: Message | None) -> str | None:
    """The file id of a picture in the message: a photo, or an image sent as a file."""
    if message is None:
        return None
    if message.photo:
        return message.photo[-1].file_id
    document = message.document
    if document is not None and (document.mime_type or "").startswith("image/"):
        return document.file_id
    return None


async def run_command(update: Update, context: CourierContext) -> None:
    """Any other /command: look it up in the command table and enqueue a job."""
    message = update.effective_message
    user = update.effective_user
    request = parse_command(message.text or message.caption, context.bot.username)
    if request is None:
        return
    command = await commands.get_command(context.pool, request.name)
    if command is None or not command.enabled:
        await message.reply_text(context.t(update, "unknown_command", name=request.name))
        return
    needs_image = requires_image(command.workflow)
    if not request.args and not needs_image:
        await message.reply_text(context.t(update, "missing_prompt", name=request.name))
        return
    if len(request.args) > MAX_PROMPT_CHARS:
        await message.reply_text(context.t(update, "prompt_too_long", length=len(request.args),
                                           limit=MAX_PROMPT_CHARS))
        return
    image = None
    if needs_image:
        image = image_file_id(message) or image_file_id(message.reply_to_message)
        if image is None:
            session = await sessions.get_session(context.pool, message.chat_id, user.id)
            image = next((o["file_id"] for o in reversed(session.last_outputs if session else [])
                          if o.get("kind") == "image"), None)
        if image is None:
            await message.reply_text(context.t(update, "needs_image", name=request.name))
            return
    # One transaction around the checks and the reply. Upserting the user locks their row, so one
    # user's commands are queued one at a time (the cap holds under a flood); the job becomes
    # visible (and dispatchers are notified) only once the user has its status message, and no
    # later UPDATE races a dispatcher's SKIP LOCKED claim.
    async with context.pool.acquire() as conn, conn.transaction():
        await users.upsert_user(conn, user.id, user.username, user.first_name, user.language_code)
        pending = await jobs.count_active(conn, user.id)
        if pending >= context.settings.max_jobs_per_user:
            await message.reply_text(context.t(update, "too_many_jobs", count=pending))
            return
        queued = await jobs.enqueue(conn, user_id=user.id, chat_id=message.chat_id, command=request.name,
                                    params={"prompt": request.args, "seed": random.randint(0, MAX_SEED),
                                            "image_file_id": image, "language": user.language_code,
                                            "workflow": command.workflow},  # runs as it was when queued
                                    reply_to_message_id=message.message_id)
        status_message = await message.reply_text(
            context.t(update, "queued", name=request.name, position=queued.position))
        await jobs.set_status_message(conn, queued.job_id, status_message.message_id)


def build_handlers() -> list[tuple[BaseHandler, int]]:
    """(handler, group) pairs: the gatekeeper first, then commands."""
    return [
        (TypeHandler(Update, gatekeeper), -1),
        (CommandHandler("start", start), 0),
        (CommandHandler("help", help_command), 0),
        (CommandHandler("status", status), 0),
        (CommandHandler("cancel", cancel), 0),
        (CommandHandler("bench", admin.bench), 0),  # admins only; before the command table's handler
        (CommandHandler("compare", admin.compare), 0),
        (MessageHandler(filters.COMMAND | filters.CaptionRegex(r"^/"), run_command), 0),
    ]
