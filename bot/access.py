"""Who may use the bot, and how much: the allowlist, ``/allow``, bans, the first owner, and per-user
quotas (``/quota``).

The bot is private by default: an empty ``COURIER_ALLOWED_USERS`` lets in nobody but the admins
and those an admin let in with ``/allow`` (``*`` lets in everyone). It takes ids and
``@usernames``. A username is bound in PostgreSQL to the id it first comes with, since a Telegram
username can later pass to someone else: from then on the stored id is let in, not whoever has
the name. Admins are those of ``COURIER_ADMIN_USERS`` and those made in PostgreSQL: while the bot
has none there, every host that starts it prints a one-time owner code on its console (never in
a log: ``offer_ownership``), and ``/start <code>`` makes its sender the first admin (any printed
code works once; the first used spends them all). The code has 128 random bits, so guessing is
moot; claims run one at a time per host, and a wrong code is answered as if the sender had sent
none. Admins are always let in, cannot be banned and have no quota; a banned user is turned away
before any handler runs (told so once in a while: ``refusals``).
"""

from __future__ import annotations

import re
import secrets
import sys
from datetime import datetime

from telegram import Update

from ..core.config import EVERYONE, Settings
from ..core.i18n import message_id
from ..core.logs import get_logger
from ..jobs.submit import Quota
from ..store import access, jobs
from .context import CHOSEN_LANGUAGE, STORED_ADMIN, CourierContext
from .parsing import clean_text, parse_command
from .refusals import BANNED, STRANGER

log = get_logger("bot")

OWNER_CODE = re.compile(r"^[A-Za-z0-9_-]{22}$")
"""``secrets.token_urlsafe(16)``: 128 bits, in the characters a ``t.me/<bot>?start=`` link carries."""


def is_admin(update: Update, context: CourierContext) -> bool:
    """Listed in ``COURIER_ADMIN_USERS``, or made an admin in PostgreSQL (read by the gatekeeper)."""
    user = update.effective_user
    return user is not None and (user.id in context.settings.admin_users
                                 or bool((context.user_data or {}).get(STORED_ADMIN)))


def allowed_ids(settings: Settings) -> list[int]:
    """The ids the settings let in, the admins' among them."""
    return [entry for entry in settings.allowed_users if isinstance(entry, int)] + list(settings.admin_users)


def allowed_names(settings: Settings) -> list[str]:
    return [entry[1:] for entry in settings.allowed_users if isinstance(entry, str) and entry != EVERYONE]


OWNER_MADE = message_id("owner_made")
"""``refusal``'s verdict for ``/start <owner code>`` that made its sender the first admin."""


async def refusal(update: Update, context: CourierContext) -> str | None:
    """Why the user behind ``update`` is not let in, as the catalog key of what they are told in
    place of handling it (``OWNER_MADE``, ``refusals.BANNED``, ``refusals.STRANGER``); None if they
    may come in.

    On the way, the language they chose (``/lang``) is read for ``context.language``: it holds
    across restarts and for every handler, the error handler included; so is whether they are an
    admin made in PostgreSQL (``is_admin``). It decides access only: what a handler needs beyond
    that, the handler reads.
    """
    user = update.effective_user
    username = (clean_text(user.username) or "").lower() or None
    settings = context.settings
    admission = await access.admit(context.pool, user.id, username, allowed_ids(settings), allowed_names(settings),
                                   EVERYONE in settings.allowed_users)
    context.user_data[CHOSEN_LANGUAGE] = admission.language
    context.user_data[STORED_ADMIN] = admission.admin
    if is_admin(update, context):
        return None
    if admission.owner_wanted and not context.settings.admin_users and await claim_owner(update, context):
        return OWNER_MADE
    if admission.banned:
        return BANNED
    if not admission.allowed:
        return STRANGER
    return None


async def may_receive(pool, settings: Settings, user_id: int) -> bool:
    """Whether a render sent from the graph editor may go to ``user_id``'s private chat: whoever
    ``refusal`` lets in (admins, of the settings or PostgreSQL; users the settings or ``/allow`` let
    in, unless banned). Asked at send time, without writing a row for a stranger."""
    if not 0 < user_id < 2**63:  # a group or channel, or no PostgreSQL bigint: nobody's private chat
        return False
    if user_id in settings.admin_users:
        return True
    return await access.may_receive(pool, user_id, allowed_ids(settings), allowed_names(settings),
                                    EVERYONE in settings.allowed_users)


async def claim_owner(update: Update, context: CourierContext) -> bool:
    """Whether ``update`` is ``/start <owner code>`` that made its sender the first admin."""
    message = update.message
    request = parse_command(message.text, context.bot.username) if message is not None else None
    if request is None or request.name != "start" or not OWNER_CODE.match(request.args):
        return False
    async with context.bot_data.owner_claims:
        if not await access.claim_owner(context.pool, update.effective_user.id, request.args):
            return False
    context.user_data[STORED_ADMIN] = True
    log.info("user %s is the bot's first admin (owner code)", update.effective_user.id)
    await context.bot_data.publish_admin_menu(update.effective_user.id)
    return True


async def offer_ownership(pool, settings: Settings, bot_username: str) -> None:
    """While the bot has no admin, print a fresh one-time owner code on the console (the one place it
    is shown).

    Never through ``logging``, nor ``sys.stderr``: in ComfyUI both end in the log buffer that
    ComfyUI serves to whoever reaches it (``GET /internal/logs``, the frontend's log stream), which
    would hand the bot to the first stranger who reads it. ``sys.__stderr__`` is the process's own
    stderr, under ComfyUI's interceptor: the terminal, or the service's journal.
    """
    if settings.admin_users:
        return
    console = sys.__stderr__
    if console is None:
        log.warning("the bot has no admin, and there is no console to print its owner code on: set "
                    "COURIER_ADMIN_USERS to your Telegram user id")
        return
    code = secrets.token_urlsafe(16)
    if await access.add_owner_code(pool, code):
        log.warning("the bot has no admin yet: its one-time owner code is printed on the console (stderr), "
                    "not in this log")
        console.write(f"[Courier] the bot has no admin yet: send /start {code} to @{bot_username} (or open "
                      f"https://t.me/{bot_username}?start={code}) from your Telegram account to become its owner; "
                      f"the code works once\n")
        console.flush()


def clock(moment: datetime | None) -> str:
    """``HH:MM`` in UTC, as the quota texts say it."""
    return moment.strftime("%H:%M") if moment is not None else "–"


def quota_of(update: Update, context: CourierContext) -> Quota | None:
    """The quota ``submit`` checks for this user's job: None for admins, or when no quota is set."""
    settings = context.settings
    if is_admin(update, context) or not (settings.quota_hour or settings.quota_day):
        return None
    return Quota(settings.quota_hour, settings.quota_day)


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
