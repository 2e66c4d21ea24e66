"""``/forget``: delete what Courier keeps about the user, once they confirm with a button.

The button's callback data is ``forget:<token>``, a random token looked up in PostgreSQL
(``courier_pending_actions``) together with the user it was made for: a press by anyone else,
a used or an expired token does nothing. The pending confirmation lives in PostgreSQL, so it
outlives a restart of the bot.

Confirmed, it cancels the user's jobs and deletes their rows (``store.privacy``), the files their
jobs left on the backends (``retention.delete_backend_files``) and the bot's messages Telegram
still lets it delete; only what access control needs stays (a ban, the quota counters). The
reply says what could not be deleted.
"""

from __future__ import annotations

import secrets

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import TelegramError

from ..jobs import retention
from ..store import access, jobs, privacy
from .cancelling import end_cancelled
from .context import CourierContext

BUTTON_PREFIX = "forget:"
ACTION = "forget"
VALID_S = 24 * 3600


async def forget(update: Update, context: CourierContext) -> None:
    """``/forget``: what it deletes, and a button to confirm."""
    message, user = update.effective_message, update.effective_user
    token = secrets.token_urlsafe(16)
    await access.put_pending_action(context.pool, token, user_id=user.id, chat_id=message.chat_id, action=ACTION,
                                    payload={}, valid_s=VALID_S)
    button = InlineKeyboardButton(context.t(update, "forget_button"), callback_data=f"{BUTTON_PREFIX}{token}")
    await message.reply_text(context.t(update, "forget_confirm", hours=VALID_S // 3600),
                             reply_markup=InlineKeyboardMarkup([[button]]))


async def confirm(update: Update, context: CourierContext) -> None:
    """A press on the confirmation: forget the presser, if the button was made for them and is still valid."""
    query, user = update.callback_query, update.effective_user
    token = (query.data or "").removeprefix(BUTTON_PREFIX)
    pending = await access.take_pending_action(context.pool, token, user_id=user.id, action=ACTION)
    if pending is None:
        await query.answer(context.t(update, "forget_stale"))
        return
    await query.answer()
    await end_cancelled(context, await jobs.cancel_user_jobs(context.pool, user.id), forgotten=True)
    left = await privacy.forget_user(context.pool, user.id)
    files_kept, messages_kept = await delete_leftovers(context, left)
    files = sum(len(f) for f in left.files.values())
    report = context.t(update, "forget_done", jobs=left.jobs, files=files - files_kept,
                       messages=len(left.messages) - messages_kept)
    if files_kept or messages_kept:
        report += "\n" + context.t(update, "forget_not_deleted", files=files_kept, messages=messages_kept)
    report += "\n" + context.t(update, "forget_kept")
    try:  # the confirmation itself carries the report
        await query.edit_message_text(report)
    except TelegramError:
        await context.bot.send_message(pending.chat_id, report)


async def delete_leftovers(context: CourierContext, left: privacy.Leftovers) -> tuple[int, int]:
    """Delete the files deleted jobs left on the backends and the bot's messages of them; returns how
    many files and messages could not be deleted."""
    dispatcher = context.bot_data.dispatcher
    files_kept = await retention.delete_backend_files(dispatcher.clients if dispatcher is not None else [], left)
    messages_kept = 0
    for chat_id, message_id in left.messages:
        try:
            await context.bot.delete_message(chat_id, message_id)
        except TelegramError:  # too old, or already gone
            messages_kept += 1
    return files_kept, messages_kept
