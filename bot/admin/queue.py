"""``/queue``: every user's running and queued jobs, in the order they will be claimed."""

from __future__ import annotations

from telegram import Update
from telegram.constants import MessageLimit

from ...store import jobs
from ..context import CourierContext
from .gate import admin_only

MAX_QUEUE_LINES = 40


async def queue(update: Update, context: CourierContext) -> None:
    """``/queue``: every user's running and queued jobs, in the order they will be claimed."""
    if not await admin_only(update, context, "queue"):
        return
    listed = await jobs.list_queue(context.pool)
    if not listed:
        await update.effective_message.reply_text(context.t(update, "queue_empty"))
        return
    lines = []
    for job in listed[:MAX_QUEUE_LINES]:
        state = (context.t(update, "state_running") if job.status == "running"
                 else context.t(update, "state_queued", position=job.position))
        lines.append(context.t(update, "queue_line", id=job.id, command=job.command, user_id=job.user_id,
                               state=state))
    if len(listed) > MAX_QUEUE_LINES:
        lines.append(context.t(update, "queue_more", count=len(listed) - MAX_QUEUE_LINES))
    await update.effective_message.reply_text("\n".join(lines)[:MessageLimit.MAX_TEXT_LENGTH])
