"""``/bench <command> [runs] [@backend]`` and ``/compare [workflow]``: the bot's side of
benchmarking. ``/bench`` is parsed here and queued by ``jobs/queueing.py``, the use case the
``POST /courier/benchmarks/run`` route shares; here its result becomes the chat's reply."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import html
import re

from telegram import Update

from ...gpu import compare_view
from ...gpu.compare import build_table, to_text
from ...gpu.storage import load_runs
from ...jobs import bench as bench_job
from ...jobs.backends import shown_url
from ...jobs.ports import ChatError
from ...jobs.queueing import (
    BackendOff,
    Benchmark,
    BenchRefusal,
    BenchRequest,
    NotAdmin,
    UnknownBackend,
    UnknownCommand,
    plan_benchmark,
    queue_benchmark,
)
from ...jobs.submit import Queued, announcing
from ...store import commands
from ..context import CourierContext
from ..limiter import STATUS
from ..parsing import clean_text
from ..queueing import asked_by, tell_refused
from ..sink import delete_message
from .backends import backend_state
from .gate import admin_only, command_args

COMMAND_NAME = re.compile(r"^/?([A-Za-z0-9_]{1,32})$")
MAX_ROWS = 25  # table rows in a chat message
MAX_RUNS = 1000  # stored runs read for /compare, newest first
MAX_WORKFLOW_CHARS = 256
MAX_BACKEND_CHARS = 256


def parse_bench_args(args: str) -> BenchRequest | None:
    """``<command> [runs] [@backend]`` -> a BenchRequest; None if it is not that."""
    words = args.split()
    backend = None
    if len(words) > 1 and words[-1].startswith("@"):
        backend = words.pop()[1:]
        if not backend or len(backend) > MAX_BACKEND_CHARS:
            return None
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
    return BenchRequest(match.group(1).lower(), repeats, backend)


async def bench(update: Update, context: CourierContext) -> None:
    """Queue a benchmark of a stored command: warm-up + N runs with the Benchmark node, on the backend
    named after an ``@`` (``/bench f 5 @2``) or on whichever claims it."""
    if not await admin_only(update, context, "bench"):
        return
    message = update.effective_message
    request = parse_bench_args(command_args(update, context))
    if request is None:
        listed = await commands.list_commands(context.pool)
        await message.reply_text(context.t(
            update, "bench_usage", max=bench_job.MAX_REPEATS, default=bench_job.DEFAULT_REPEATS,
            commands=", ".join(f"/{c.name}" for c in listed) or "–"))
        return
    planned = await plan_benchmark(context.pool, context.settings, request, user_id=update.effective_user.id,
                                   language=context.language(update))
    if not isinstance(planned, Benchmark):
        await message.reply_text(refusal_text(update, context, request, planned))
        return
    submission = await queue_benchmark(context.pool, planned, **asked_by(update, context))
    if isinstance(submission, Queued):
        context.application.create_task(announce(update, context, submission.job_id, planned), update=update,
                                         name=f"courier-announce-{submission.job_id}")
    else:
        await tell_refused(update, context, submission)


def refusal_text(update: Update, context: CourierContext, request: BenchRequest, refusal: BenchRefusal) -> str:
    """Why ``/bench`` queued nothing, in the admin's language."""
    if isinstance(refusal, NotAdmin):  # the gate let them in: an admin no more
        return context.t(update, "admin_only", name="bench")
    if isinstance(refusal, UnknownCommand):
        return context.t(update, "unknown_command", name=refusal.name)
    if isinstance(refusal, UnknownBackend):
        return context.t(update, "bench_unknown_backend", backend=clean_text(refusal.ref),
                         backends=", ".join(f"@{b.id} ({shown_url(b.url)})" for b in refusal.listed) or "–")
    if isinstance(refusal, BackendOff):
        backend = refusal.backend
        return context.t(update, "bench_backend_off", id=backend.id, url=shown_url(backend.url),
                         state=backend_state(update, context, backend))
    return context.t(update, "failed", name=request.command, reason=refusal.reason)  # BadBenchmark


async def announce(update: Update, context: CourierContext, job_id: int, benchmark: Benchmark) -> None:
    """Reply "Queued" to the ``/bench`` of queued job ``job_id``, to become its status message
    (``submit.announcing``); in a task of its own, as it waits behind Telegram's rate limit."""
    message = update.effective_message
    async with announcing(context.pool, job_id) as reply:
        if reply.position is not None:
            reply.message_id = (await context.bot.send_message(
                message.chat_id, benchmark.queued_text(context.language(update), reply.position),
                reply_to_message_id=message.message_id, allow_sending_without_reply=True,
                rate_limit_args=STATUS)).message_id
    if reply.redundant:
        with contextlib.suppress(ChatError):
            await delete_message(context.bot, message.chat_id, reply.message_id)


async def compare(update: Update, context: CourierContext) -> None:
    """The comparison table of stored runs (two devices), then the seed's reference rows, and the chart."""
    if not await admin_only(update, context, "compare"):
        return
    message = update.effective_message
    workflow = command_args(update, context).strip().removeprefix("/")[:MAX_WORKFLOW_CHARS] or None
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
