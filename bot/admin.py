"""Admin commands: ``/bench <command> [runs]``, ``/compare [workflow]`` and ``/backends``.

Only the users in ``COURIER_ADMIN_USERS`` may run them; everyone else gets a refusal in their
language. ``/bench`` queues a job of kind ``benchmark`` (``jobs/bench.py`` runs it on the
backend that claims it); ``/compare`` answers from the stored runs at once; ``/backends``
lists the backends table and drains or undrains one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import re

from telegram import Update

from ..gpu import compare_view
from ..gpu.compare import build_table, to_text
from ..gpu.storage import load_runs
from ..jobs import bench as bench_job
from ..jobs.backends import shown_url
from ..jobs.submit import submit
from ..jobs.workflow import WorkflowError
from ..store import backends as backend_table
from ..store import commands
from .context import CourierContext
from .parsing import parse_command, profile

ADMIN_COMMANDS = ("bench", "compare", "backends")
BACKEND_ACTIONS = {"drain": True, "undrain": False}  # /backends <action> <id> -> draining
COMMAND_NAME = re.compile(r"^/?([A-Za-z0-9_]{1,32})$")
MAX_ROWS = 25  # table rows in a chat message
MAX_RUNS = 1000  # stored runs read for /compare, newest first
MAX_WORKFLOW_CHARS = 256


def is_admin(update: Update, context: CourierContext) -> bool:
    user = update.effective_user
    return user is not None and user.id in context.settings.admin_users


async def _admin_only(update: Update, context: CourierContext, name: str) -> bool:
    """True for an admin; a refusal for anyone else."""
    if is_admin(update, context):
        return True
    await update.effective_message.reply_text(context.t(update, "admin_only", name=name))
    return False


def parse_bench_args(args: str) -> tuple[str, int] | None:
    """``<command> [runs]`` -> (command name, runs); None if it is not that."""
    words = args.split()
    if not 1 <= len(words) <= 2:
        return None
    match = COMMAND_NAME.match(words[0])
    if match is None:
        return None
    repeats = bench_job.DEFAULT_REPEATS
    if len(words) == 2:
        if not words[1].isascii() or not words[1].isdigit() or len(words[1]) > 3:
            return None
        repeats = int(words[1])
        if not 1 <= repeats <= bench_job.MAX_REPEATS:
            return None
    return match.group(1).lower(), repeats


async def bench(update: Update, context: CourierContext) -> None:
    """Queue a benchmark of a stored command: warm-up + N runs with the Benchmark node."""
    if not await _admin_only(update, context, "bench"):
        return
    message, user = update.effective_message, update.effective_user
    request = parse_command(message.text, context.bot.username)
    parsed = parse_bench_args(request.args if request else "")
    if parsed is None:
        listed = await commands.list_commands(context.pool)
        await message.reply_text(context.t(
            update, "bench_usage", max=bench_job.MAX_REPEATS, default=bench_job.DEFAULT_REPEATS,
            commands=", ".join(f"/{c.name}" for c in listed) or "–"))
        return
    name, repeats = parsed
    command = await commands.get_command(context.pool, name)
    if command is None:
        await message.reply_text(context.t(update, "unknown_command", name=name))
        return
    try:  # refuse a workflow that cannot run as a job now, not on the backend later
        bench_job.benchmark_prompt(command.workflow, name=name, repeats=repeats)
    except WorkflowError as exc:
        await message.reply_text(context.t(update, "failed", name=name, reason=str(exc)))
        return
    params = bench_job.job_params(name, command.workflow, repeats, context.language(update))

    async def post_status(position: int) -> int:
        return (await message.reply_text(context.t(update, "bench_queued", name=name, warmup=params["warmup"],
                                                   repeats=repeats, position=position))).message_id

    await submit(context.pool, user_id=user.id, chat_id=message.chat_id, command="bench", params=params,
                 post_status=post_status, profile=profile(user),
                 reply_to_message_id=message.message_id, max_active=context.settings.max_jobs_per_user,
                 refuse=lambda count: message.reply_text(context.t(update, "too_many_jobs", count=count)))


async def compare(update: Update, context: CourierContext) -> None:
    """The comparison table of stored runs (two devices), then the seed's reference rows, and the chart."""
    if not await _admin_only(update, context, "compare"):
        return
    message = update.effective_message
    request = parse_command(message.text, context.bot.username)
    workflow = (request.args if request else "").strip().removeprefix("/")[:MAX_WORKFLOW_CHARS] or None
    runs = await load_runs(context.pool, workflow=workflow, limit=MAX_RUNS)
    text, table, reference = comparison_message(update, context, runs, workflow)
    await message.reply_text(text, parse_mode="HTML")
    if table is not None or reference is not None:
        png = await asyncio.to_thread(compare_view.chart_png, table, reference)
        await message.reply_document(png, filename="compare.png", disable_content_type_detection=True)


def comparison_message(update: Update, context: CourierContext, runs: list, workflow: str | None):
    """(HTML text, stored table or None, reference table or None) for ``/compare``."""
    suffix = context.t(update, "compare_for", workflow=workflow) if workflow else ""
    parts = []
    table = None
    sides = compare_view.pick_sides(runs)
    if sides is not None:
        table = build_table(runs, *sides)
        table = dataclasses.replace(table, rows=table.rows[:MAX_ROWS])
        parts.append(_titled(context.t(update, "compare_stored"), to_text(table)))
        others = [side["label"] for side in compare_view.sides_of(runs)
                  if side["label"] not in (sides[0].label, sides[1].label)]
        if others:
            parts.append(html.escape(context.t(update, "compare_more", sides="; ".join(others[:5]))))
    elif runs:
        parts.append(html.escape(context.t(update, "compare_one_side", suffix=suffix,
                                           side=compare_view.sides_of(runs)[0]["label"])))
    else:
        parts.append(html.escape(context.t(update, "compare_none", suffix=suffix)))
    reference = compare_view.reference_table(workflow)
    if reference is not None:
        parts.append(_titled(context.t(update, "compare_reference"), to_text(reference)))
    return "\n\n".join(parts), table, reference


def _titled(title: str, table_text: str) -> str:
    return f"<b>{html.escape(title)}</b>\n<pre>{html.escape(table_text)}</pre>"


async def backends(update: Update, context: CourierContext) -> None:
    """Each backend's state; ``/backends drain <id>`` stops its claims (it finishes what it runs),
    ``/backends undrain <id>`` resumes them."""
    if not await _admin_only(update, context, "backends"):
        return
    message = update.effective_message
    request = parse_command(message.text, context.bot.username)
    words = (request.args if request else "").split()
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


def backend_line(update: Update, context: CourierContext, backend: backend_table.Backend) -> str:
    if backend.draining:
        state = context.t(update, "backend_draining")
    elif backend.healthy:
        state = context.t(update, "backend_ready")
    else:
        state = context.t(update, "backend_down")
    return context.t(update, "backends_line", id=backend.id, url=shown_url(backend.url), state=state,
                     running=backend.running, capacity=backend.capacity)
