"""``/allow``, ``/disallow``, ``/ban`` and ``/unban`` of a user named by id or ``@username``."""

from __future__ import annotations

import re

from telegram import Update

from ...core.config import EVERYONE
from ...store import access as access_store
from ...store import jobs, users
from ..cancelling import end_cancelled
from ..context import CourierContext
from .gate import admin_only, command_args

USER_REF = re.compile(r"^(?:([1-9][0-9]{0,17})|@([A-Za-z0-9_]{5,32}))$")
"""A user id (Telegram's start at 1) or a ``@username``."""


async def _target(update: Update, context: CourierContext, name: str) -> int | None:
    """The user a ``/ban``, ``/unban``, ``/allow`` or ``/disallow`` names (an id, or a ``@username`` seen
    before); None after a reply."""
    message = update.effective_message
    match = USER_REF.match(command_args(update, context))
    if match is None:
        await message.reply_text(context.t(update, "ban_usage", name=name))
        return None
    if match.group(1):
        return int(match.group(1))
    user_id = await access_store.user_by_username(context.pool, match.group(2).lower())
    if user_id is None:
        await message.reply_text(context.t(update, "ban_unknown_name", username=match.group(2)))
    return user_id


async def ban(update: Update, context: CourierContext) -> None:
    """``/ban <user id or @username>``: the user is turned away from now on (admins cannot be banned)."""
    if not await admin_only(update, context, "ban") or (user_id := await _target(update, context, "ban")) is None:
        return
    if await _is_admin_id(context, user_id):
        await update.effective_message.reply_text(context.t(update, "ban_admin", user_id=user_id))
        return
    await access_store.set_banned(context.pool, user_id, True)
    count = await end_cancelled(context, await jobs.cancel_user_jobs(context.pool, user_id))
    await update.effective_message.reply_text(context.nt(update, "ban_done", count, user_id=user_id))


async def unban(update: Update, context: CourierContext) -> None:
    """``/unban <user id or @username>``."""
    if not await admin_only(update, context, "unban") or (user_id := await _target(update, context, "unban")) is None:
        return
    if not await _is_banned(context, user_id):
        await update.effective_message.reply_text(context.t(update, "unban_not_banned", user_id=user_id))
        return
    await access_store.set_banned(context.pool, user_id, False)
    await update.effective_message.reply_text(context.t(update, "unban_done", user_id=user_id))


async def _is_banned(context: CourierContext, user_id: int) -> bool:
    user = await users.get_user(context.pool, user_id)
    return user is not None and user.banned


async def _is_admin_id(context: CourierContext, user_id: int) -> bool:
    if user_id in context.settings.admin_users:
        return True
    user = await users.get_user(context.pool, user_id)
    return user is not None and user.is_admin


async def allow(update: Update, context: CourierContext) -> None:
    """``/allow <user id or @username>``: the user may use the bot from now on; a banned one once
    unbanned (the reply says so: the ban stays)."""
    if not await admin_only(update, context, "allow") or (user_id := await _target(update, context, "allow")) is None:
        return
    await access_store.set_allowed(context.pool, user_id, True)
    if await _is_banned(context, user_id):
        await update.effective_message.reply_text(context.t(update, "allow_still_banned", user_id=user_id))
    else:
        await update.effective_message.reply_text(context.t(update, "allow_done", user_id=user_id))


async def disallow(update: Update, context: CourierContext) -> None:
    """``/disallow <user id or @username>``: what ``/allow`` let in is taken back, with the user's jobs; the
    settings' allowlist and admins stay as they are (the reply says so)."""
    if (not await admin_only(update, context, "disallow")
            or (user_id := await _target(update, context, "disallow")) is None):
        return
    message = update.effective_message
    if await _is_admin_id(context, user_id):
        await message.reply_text(context.t(update, "disallow_admin", user_id=user_id))
        return
    await access_store.set_allowed(context.pool, user_id, False)
    allowed = context.settings.allowed_users
    if EVERYONE in allowed or user_id in allowed:
        await message.reply_text(context.t(update, "disallow_by_settings", user_id=user_id))
        return
    count = await end_cancelled(context, await jobs.cancel_user_jobs(context.pool, user_id))
    await message.reply_text(context.nt(update, "disallow_done", count, user_id=user_id))
