"""Who may use the bot, and how much: the allowlist, bans, and per-user quotas (``/quota``).

``COURIER_ALLOWED_USERS`` takes ids and ``@usernames``. A username is bound in PostgreSQL to the
id it first comes with, since a Telegram username can later pass to someone else: from then on
the stored id is let in, not whoever has the name. Admins are always let in, cannot be banned
and have no quota; a banned user is turned away before any handler runs.
"""

from __future__ import annotations

from datetime import datetime

from telegram import Update

from ..jobs.submit import Quota
from ..store import access, jobs
from .context import CHOSEN_LANGUAGE, CourierContext
from .parsing import clean_text


def is_admin(update: Update, context: CourierContext) -> bool:
    user = update.effective_user
    return user is not None and user.id in context.settings.admin_users


def allowed_ids(context: CourierContext) -> list[int]:
    return [entry for entry in context.settings.allowed_users if isinstance(entry, int)]


def allowed_names(context: CourierContext) -> list[str]:
    return [entry[1:] for entry in context.settings.allowed_users if isinstance(entry, str)]


async def refusal(update: Update, context: CourierContext) -> str | None:
    """Why the user behind ``update`` may not come in, in their language; None if they may.

    On the way, the language they chose (``/lang``) is read for ``context.language``: it holds
    across restarts and for every handler, the error handler included.
    """
    user = update.effective_user
    admission = await access.admit(context.pool, user.id, (clean_text(user.username) or "").lower() or None,
                                   allowed_ids(context), allowed_names(context))
    context.user_data[CHOSEN_LANGUAGE] = admission.language
    if is_admin(update, context):
        return None
    if admission.banned:
        return context.t(update, "banned")
    if not admission.allowed:
        return context.t(update, "not_allowed", user_id=user.id)
    return None


def clock(moment: datetime | None) -> str:
    """``HH:MM`` in UTC, as the quota texts say it."""
    return moment.strftime("%H:%M") if moment is not None else "–"


def quota_of(update: Update, context: CourierContext) -> Quota | None:
    """The quota ``submit`` checks for this user's job: None for admins, or when no quota is set."""
    settings = context.settings
    if is_admin(update, context) or not (settings.quota_hour or settings.quota_day):
        return None

    async def refuse(spent: str) -> None:
        usage = await access.quota_usage(context.pool, update.effective_user.id)
        await update.effective_message.reply_text(quota_line(update, context, spent, usage))

    return Quota(settings.quota_hour, settings.quota_day, refuse)


def quota_line(update: Update, context: CourierContext, spent: str, usage: access.QuotaUsage) -> str:
    """That the ``"hour"`` or ``"day"`` quota is spent, and when its oldest job leaves the window (UTC)."""
    if spent == "hour":
        return context.t(update, "quota_hour_spent", limit=context.settings.quota_hour,
                         time=clock(usage.hour_frees_at))
    return context.t(update, "quota_day_spent", limit=context.settings.quota_day, time=clock(usage.day_frees_at))


async def quota(update: Update, context: CourierContext) -> None:
    """``/quota``: what is left of the user's hourly and daily quota, and of the concurrent cap."""
    settings, user_id = context.settings, update.effective_user.id
    active = await jobs.count_active(context.pool, user_id)
    lines = [context.t(update, "quota_active", active=active, limit=settings.max_jobs_per_user)]
    if is_admin(update, context) or not (settings.quota_hour or settings.quota_day):
        lines.append(context.t(update, "quota_unlimited"))
    else:
        usage = await access.quota_usage(context.pool, user_id)
        if settings.quota_hour:
            lines.append(quota_line(update, context, "hour", usage) if usage.hour >= settings.quota_hour
                         else context.t(update, "quota_hour_left", left=settings.quota_hour - usage.hour,
                                        limit=settings.quota_hour))
        if settings.quota_day:
            lines.append(quota_line(update, context, "day", usage) if usage.day >= settings.quota_day
                         else context.t(update, "quota_day_left", left=settings.quota_day - usage.day,
                                        limit=settings.quota_day))
    await update.effective_message.reply_text("\n".join(lines))
