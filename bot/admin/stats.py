"""``/stats``: jobs and failures per day, and per command with the median run time, over a week."""

from __future__ import annotations

from telegram import Update
from telegram.constants import MessageLimit

from ...store import jobs
from ..context import CourierContext
from .gate import admin_only

STATS_DAYS = 7


async def stats(update: Update, context: CourierContext) -> None:
    """``/stats``: jobs and failures per day, and per command with the median run time, over a week."""
    if not await admin_only(update, context, "stats"):
        return
    days = await jobs.jobs_per_day(context.pool, STATS_DAYS)
    if not days:
        await update.effective_message.reply_text(context.t(update, "stats_none", days=STATS_DAYS))
        return
    lines = [context.t(update, "stats_title", days=STATS_DAYS)]
    lines += [context.t(update, "stats_day", day=day.day.isoformat(), jobs=day.jobs, failed=day.failed)
              for day in days]
    lines.append(context.t(update, "stats_per_command"))
    for row in await jobs.command_stats(context.pool, STATS_DAYS):
        median = f"{row.median_s:.1f}" if row.median_s is not None else "–"
        lines.append(context.t(update, "stats_command", command=row.command, jobs=row.jobs, failed=row.failed,
                               median=median))
    await update.effective_message.reply_text("\n".join(lines)[:MessageLimit.MAX_TEXT_LENGTH])
