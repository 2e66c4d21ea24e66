"""/models: the checkpoints and LoRAs of each backend that takes jobs, a page at a time.

The lists are the backends table's (``model_kinds``: the health checks read them from each
backend's ``/object_info``; a file is a checkpoint where a node's ``ckpt_name`` offers it, a LoRA
where a ``lora_name`` does). ★ marks the checkpoint /img takes without ``--model`` (an admin's
``/settings /img --model``, else the one ``model_names.job_graph`` picks). ◀ ▶ turn the pages.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest

from ..jobs import model_graph
from ..jobs.backends import shown_url
from ..jobs.model_names import CHECKPOINTS, LORAS, job_graph
from ..jobs.options import OptionError, command_options
from ..store import backends, commands
from .access import is_admin
from .context import CourierContext
from .options import choose, split_options
from .parsing import echo

BUTTON_PREFIX = "models:"
PAGE = re.compile(r"[0-9]{1,4}")
"""A page's index in the data of a ◀ ▶ button (ASCII digits: ``str.isdigit`` takes "²", ``int`` does not)."""
PAGE_LINES = 30
MAX_NAME_CHARS = 80  # of a file name in the list: 30 lines stay well within a message's 4,096
MODEL_COMMAND = "img"
"""The command whose default checkpoint is marked."""


async def default_checkpoint(context: CourierContext, files: dict[str, set[str]]) -> str | None:
    """The checkpoint ``MODEL_COMMAND`` takes without ``--model``; None if there is no such command (or
    its admin's default means no file)."""
    command = await commands.get_command(context.pool, MODEL_COMMAND)
    if command is None:
        return None
    try:
        chosen, _ = choose([], split_options(command.defaults)[1], command_options(command.workflow))
        return model_graph.checkpoint_of(job_graph(command.workflow, chosen, files, picture=False))
    except OptionError:
        return None


def model_lines(listed: list[backends.Backend], default: str | None, say: Callable[..., str],
                show_url: bool) -> list[str]:
    """The lines of the list: per backend its name, then its checkpoints and LoRAs."""
    titles = {CHECKPOINTS: lambda number: say("models_checkpoints", number=number),
              LORAS: lambda number: say("models_loras", number=number)}
    lines = []
    for backend in listed:
        if not any(backend.model_kinds.get(kind) for kind in titles):
            continue
        lines.append(say("models_backend", id=backend.id, url=shown_url(backend.url)) if show_url
                     else say("models_backend_id", id=backend.id))
        for kind, title in titles.items():
            names = backend.model_kinds.get(kind) or []
            if names:
                lines.append(title(len(names)))
                lines += [("★ " if kind == CHECKPOINTS and name == default else "· ") + echo(name, MAX_NAME_CHARS)
                          for name in names]
    return lines


def page_of(lines: list[str], index: int, say: Callable[..., str]) -> tuple[str, InlineKeyboardMarkup | None]:
    """Page ``index`` (clamped) of ``lines``, and its ◀ ▶ buttons."""
    count = max(1, -(-len(lines) // PAGE_LINES))
    index = min(max(index, 0), count - 1)
    body = "\n".join(lines[index * PAGE_LINES:(index + 1) * PAGE_LINES])
    text = say("models_page", page=index + 1, pages=count, command=MODEL_COMMAND) + "\n\n" + body
    turns = [InlineKeyboardButton(label, callback_data=f"{BUTTON_PREFIX}{to}")
             for label, to in (("◀", index - 1), ("▶", index + 1)) if 0 <= to < count]
    return text, InlineKeyboardMarkup([turns]) if turns else None


async def _page(update: Update, context: CourierContext, index: int) -> tuple[str, InlineKeyboardMarkup | None]:
    say = functools.partial(context.t, update)
    listed = await backends.taking_jobs(context.pool)
    default = await default_checkpoint(context, backends.model_files(listed))
    lines = model_lines(listed, default, say, is_admin(update, context))
    if not lines:
        return say("models_none"), None
    return page_of(lines, index, say)


async def models(update: Update, context: CourierContext) -> None:
    """``/models``: the first page of the list."""
    text, keyboard = await _page(update, context, 0)
    await update.effective_message.reply_text(text, reply_markup=keyboard)


async def turn(update: Update, context: CourierContext) -> None:
    """A press on ◀ or ▶: that page, in place."""
    query = update.callback_query
    wanted = (query.data or "").removeprefix(BUTTON_PREFIX)
    if not PAGE.fullmatch(wanted) or getattr(query.message, "text", None) is None:  # no list of ours to turn
        await query.answer(context.t(update, "button_stale"), show_alert=True)
        return
    await query.answer()
    text, keyboard = await _page(update, context, int(wanted))
    try:
        await query.edit_message_text(text, reply_markup=keyboard)
    except BadRequest as exc:  # pressed twice: the page is shown already
        if "not modified" not in str(exc).lower():
            raise
