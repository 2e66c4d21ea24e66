"""``/backends``: each backend's state; ``/backends drain|undrain <id>``."""

from __future__ import annotations

from telegram import Update

from ...jobs.backends import STALE_S, shown_url
from ...store import backends as backend_table
from ..context import CourierContext
from .gate import admin_only, command_args

BACKEND_ACTIONS = {"drain": True, "undrain": False}  # /backends <action> <id> -> draining


async def backends(update: Update, context: CourierContext) -> None:
    """Each backend's state; ``/backends drain <id>`` stops its claims (it finishes what it runs),
    ``/backends undrain <id>`` resumes them."""
    if not await admin_only(update, context, "backends"):
        return
    message = update.effective_message
    words = command_args(update, context).split()
    if not words:
        listed = await backend_table.list_backends(context.pool)
        await message.reply_text("\n".join(backend_line(update, context, b) for b in listed)
                                 or context.t(update, "backends_none"))
        return
    if (len(words) != 2 or words[0].lower() not in BACKEND_ACTIONS or not words[1].isascii()
            or not words[1].isdigit() or len(words[1]) > 18):
        await message.reply_text(context.t(update, "backends_usage"))
        return
    draining = BACKEND_ACTIONS[words[0].lower()]
    changed = await backend_table.set_backend(context.pool, int(words[1]), draining=draining)
    if changed is None:
        await message.reply_text(context.t(update, "backend_unknown", id=int(words[1])))
        return
    if draining:
        (row,) = await backend_table.list_backends(context.pool, [changed.url])
        await message.reply_text(context.t(update, "backend_drained", id=row.id, running=row.running))
    else:
        await message.reply_text(context.t(update, "backend_undrained", id=changed.id))


def backend_state(update: Update, context: CourierContext, backend: backend_table.Backend) -> str:
    """Whether it takes jobs, drains, or is not reachable, in the admin's language."""
    if backend.draining:
        return context.t(update, "backend_draining")
    if backend.healthy:
        return context.t(update, "backend_ready")
    if backend.last_error == backend_table.STALE:
        return context.t(update, "backend_stale", minutes=round(STALE_S / 60))
    return context.t(update, "backend_down")


def backend_line(update: Update, context: CourierContext, backend: backend_table.Backend) -> str:
    return context.t(update, "backends_line", id=backend.id, url=shown_url(backend.url),
                     state=backend_state(update, context, backend), running=backend.running,
                     capacity=backend.capacity)
