"""What every admin command does first: refuse anyone but an admin, and read its arguments."""

from __future__ import annotations

from telegram import Update

from ..access import is_admin
from ..context import CourierContext
from ..parsing import parse_command


def command_args(update: Update, context: CourierContext) -> str:
    """The text after the command's name ("" if none)."""
    request = parse_command(update.effective_message.text, context.bot.username)
    return request.args if request else ""


async def admin_only(update: Update, context: CourierContext, name: str) -> bool:
    """True for an admin; a refusal for anyone else."""
    if is_admin(update, context):
        return True
    await update.effective_message.reply_text(context.t(update, "admin_only", name=name))
    return False
