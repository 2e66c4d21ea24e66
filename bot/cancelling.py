"""After a cancel (``/cancel``, ``/cancel <job id>``, ``/forget``, an admin's ``/ban`` or
``/disallow``): running jobs interrupted, queued ones' messages saying "cancelled"."""

from __future__ import annotations

import contextlib
import re

from telegram import Update
from telegram.error import TelegramError

from ..core import i18n
from ..store import jobs
from .access import is_admin
from .context import CourierContext

JOB_ID = re.compile(r"^#?([0-9]{1,18})$")


async def interrupt(context: CourierContext, running: list[jobs.Job]) -> None:
    """Stop the prompts of cancelled jobs that were running (on this process's backends); their
    workers then say "cancelled" in their status messages."""
    dispatcher = context.bot_data.dispatcher
    for job in running:
        if dispatcher is not None:
            await dispatcher.interrupt(job.id)


async def end_cancelled(context: CourierContext, cancelled: jobs.Cancelled, *, forgotten: bool = False) -> int:
    """After a cancel: the running jobs interrupted, the queued ones' status messages saying
    "cancelled" (``forgotten``: /forget deletes their messages, the queue message of the user's
    private chat too: only a group's is brought up to date); returns how many jobs were cancelled."""
    await interrupt(context, cancelled.running)
    for job in cancelled.queued:
        if forgotten:
            if job.chat_id != job.user_id:
                context.bot_data.queue_messages.refresh(context.bot, job.chat_id)
        else:
            await show_cancelled(context, job)
    return len(cancelled.queued) + len(cancelled.running)


async def show_cancelled(context: CourierContext, job: jobs.Job) -> None:
    """A cancelled queued job leaves its chat's queue message (which says it was cancelled if no job
    is left there); one with a status message of its own (an earlier run's, a /bench reply) says so there."""
    language = i18n.pick_language(job.params.get("language"), context.settings.language)
    said = i18n.text(language, "job_cancelled", name=job.command)
    if job.status_message_id is None:
        context.bot_data.queue_messages.refresh(context.bot, job.chat_id, [said])
        return
    with contextlib.suppress(TelegramError):  # deleted by the user, say: the /cancel reply says it
        await context.bot.edit_message_text(said, job.chat_id, job.status_message_id)


async def cancel_one(update: Update, context: CourierContext, args: str) -> None:
    """``/cancel <job id>``: the user's own job, or anyone's for an admin."""
    message = update.effective_message
    match = JOB_ID.match(args)
    if match is None:
        await message.reply_text(context.t(update, "cancel_usage"))
        return
    job_id = int(match.group(1))
    owner = None if is_admin(update, context) else update.effective_user.id
    job, previous = await jobs.cancel_one_job(context.pool, job_id, user_id=owner)
    if job is None:
        await message.reply_text(context.t(update, "cancel_job_none", id=job_id))
        return
    if previous == "running":
        await interrupt(context, [job])
    else:
        await show_cancelled(context, job)
    await message.reply_text(context.t(update, "cancel_job_done", id=job_id))
