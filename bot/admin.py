"""Admin commands: ``/queue``, ``/cancel <job id>`` of anyone's job, ``/allow`` and ``/disallow``,
``/ban`` and ``/unban``, ``/stats``, ``/bench <command> [runs] [@backend]``, ``/compare [workflow]``
and ``/backends``.

Only admins (``COURIER_ADMIN_USERS``, and the owner made with the console's code) may run them;
everyone else gets a refusal in their
language, and only admins see them in their Telegram menu (``admin_menu``, published for each
admin's chat). ``/bench`` queues a job of kind ``benchmark`` (``jobs/bench.py`` runs it on the
backend that claims it); ``/backends`` lists the backends table and drains or undrains one; the
others answer from PostgreSQL at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import html
import re

from telegram import Update
from telegram.constants import MessageLimit
from telegram.error import TelegramError

from ..core import i18n
from ..core.config import EVERYONE
from ..gpu import compare_view
from ..gpu.compare import build_table, to_text
from ..gpu.storage import load_runs
from ..jobs import bench as bench_job
from ..jobs.backends import STALE_S, shown_url
from ..jobs.workflow import WorkflowError
from ..store import access as access_store
from ..store import backends as backend_table
from ..store import commands, jobs, users
from .access import is_admin
from .context import CourierContext
from .parsing import clean_text, parse_command

BACKEND_ACTIONS = {"drain": True, "undrain": False}  # /backends <action> <id> -> draining
COMMAND_NAME = re.compile(r"^/?([A-Za-z0-9_]{1,32})$")
JOB_ID = re.compile(r"^#?([0-9]{1,18})$")
USER_REF = re.compile(r"^(?:([1-9][0-9]{0,17})|@([A-Za-z0-9_]{5,32}))$")
"""A user id (Telegram's start at 1) or a ``@username``."""
MAX_ROWS = 25  # table rows in a chat message
MAX_RUNS = 1000  # stored runs read for /compare, newest first
MAX_WORKFLOW_CHARS = 256
MAX_BACKEND_CHARS = 256
MAX_QUEUE_LINES = 40
STATS_DAYS = 7


def _args(update: Update, context: CourierContext) -> str:
    request = parse_command(update.effective_message.text, context.bot.username)
    return request.args if request else ""


async def _admin_only(update: Update, context: CourierContext, name: str) -> bool:
    """True for an admin; a refusal for anyone else."""
    if is_admin(update, context):
        return True
    await update.effective_message.reply_text(context.t(update, "admin_only", name=name))
    return False


@dataclasses.dataclass(frozen=True)
class BenchRequest:
    command: str
    repeats: int
    backend: str | None  # as typed after the ``@``; None: whichever backend claims the job


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


def find_backend(listed: list[backend_table.Backend], ref: str) -> backend_table.Backend | None:
    """The backend ``ref`` names: its id (``2`` or ``#2``), or its URL as ``/backends`` shows it, with or
    without the scheme (``127.0.0.1:8188``)."""
    wanted = ref.removeprefix("#").lower().rstrip("/")
    for backend in listed:
        shown = shown_url(backend.url).lower().rstrip("/")
        if wanted in (str(backend.id), shown, shown.split("://", 1)[-1]):
            return backend
    return None


async def bench(update: Update, context: CourierContext) -> None:
    """Queue a benchmark of a stored command: warm-up + N runs with the Benchmark node, on the backend
    named after an ``@`` (``/bench f 5 @2``) or on whichever claims it."""
    if not await _admin_only(update, context, "bench"):
        return
    message = update.effective_message
    request = parse_command(message.text, context.bot.username)
    parsed = parse_bench_args(request.args if request else "")
    if parsed is None:
        listed = await commands.list_commands(context.pool)
        await message.reply_text(context.t(
            update, "bench_usage", max=bench_job.MAX_REPEATS, default=bench_job.DEFAULT_REPEATS,
            commands=", ".join(f"/{c.name}" for c in listed) or "–"))
        return
    name, repeats = parsed.command, parsed.repeats
    command = await commands.get_command(context.pool, name)
    if command is None:
        await message.reply_text(context.t(update, "unknown_command", name=name))
        return
    backend = None
    if parsed.backend is not None:
        listed = await backend_table.list_backends(context.pool)
        backend = find_backend(listed, parsed.backend)
        if backend is None:
            await message.reply_text(context.t(
                update, "bench_unknown_backend", backend=clean_text(parsed.backend),
                backends=", ".join(f"@{b.id} ({shown_url(b.url)})" for b in listed) or "–"))
            return
        if backend.draining or not backend.healthy:  # its job would wait until an admin or the backend acts
            await message.reply_text(context.t(update, "bench_backend_off", id=backend.id, url=shown_url(backend.url),
                                               state=backend_state(update, context, backend)))
            return
    try:  # refuse a workflow that cannot run as a job now, not on the backend later
        bench_job.benchmark_prompt(command.workflow, name=name, repeats=repeats)
    except WorkflowError as exc:
        await message.reply_text(context.t(update, "failed", name=name, reason=str(exc)))
        return
    params = bench_job.job_params(name, command.workflow, repeats, context.language(update),
                                  backend=backend.url if backend else None)

    def queued(position: int) -> str:
        text = context.t(update, "bench_queued", name=name, warmup=params["warmup"], repeats=repeats,
                         position=position)
        if backend is not None:
            text += "\n" + context.t(update, "bench_on_backend", id=backend.id, url=shown_url(backend.url))
        return text

    await context.submit_job(update, "bench", params, announced=queued)


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


async def interrupt(context: CourierContext, running: list[jobs.Job]) -> None:
    """Stop the prompts of cancelled jobs that were running (on this process's backends); their
    workers then say "cancelled" in their status messages."""
    dispatcher = context.bot_data.dispatcher
    for job in running:
        if dispatcher is not None:
            await dispatcher.interrupt(job.id)


async def end_cancelled(context: CourierContext, cancelled: jobs.Cancelled, *, forgotten: bool = False) -> int:
    """After a cancel: the running jobs interrupted, the queued ones' status messages saying
    "cancelled" (``forgotten``: /forget deletes their messages, the queue message of the user's
    private chat too: only a group's is brought up to date); returns how many jobs were cancelled."""
    await interrupt(context, cancelled.running)
    for job in cancelled.queued:
        if forgotten:
            if job.chat_id != job.user_id:
                context.bot_data.queue_messages.refresh(context.bot, job.chat_id)
        else:
            await show_cancelled(context, job)
    return len(cancelled.queued) + len(cancelled.running)


async def show_cancelled(context: CourierContext, job: jobs.Job) -> None:
    """A cancelled queued job leaves its chat's queue message (which says it was cancelled if no job
    is left there); one with a status message of its own (an earlier run's, a /bench reply) says so there."""
    language = i18n.pick_language(job.params.get("language"), context.settings.language)
    said = i18n.text(language, "job_cancelled", name=job.command)
    if job.status_message_id is None:
        context.bot_data.queue_messages.refresh(context.bot, job.chat_id, [said])
        return
    with contextlib.suppress(TelegramError):  # deleted by the user, say: the /cancel reply says it
        await context.bot.edit_message_text(said, job.chat_id, job.status_message_id)


async def cancel_one(update: Update, context: CourierContext, args: str) -> None:
    """``/cancel <job id>``: the user's own job, or anyone's for an admin."""
    message = update.effective_message
    match = JOB_ID.match(args)
    if match is None:
        await message.reply_text(context.t(update, "cancel_usage"))
        return
    job_id = int(match.group(1))
    owner = None if is_admin(update, context) else update.effective_user.id
    job, previous = await jobs.cancel_one_job(context.pool, job_id, user_id=owner)
    if job is None:
        await message.reply_text(context.t(update, "cancel_job_none", id=job_id))
        return
    if previous == "running":
        await interrupt(context, [job])
    else:
        await show_cancelled(context, job)
    await message.reply_text(context.t(update, "cancel_job_done", id=job_id))


async def queue(update: Update, context: CourierContext) -> None:
    """``/queue``: every user's running and queued jobs, in the order they will be claimed."""
    if not await _admin_only(update, context, "queue"):
        return
    listed = await jobs.list_queue(context.pool)
    if not listed:
        await update.effective_message.reply_text(context.t(update, "queue_empty"))
        return
    lines = []
    for job in listed[:MAX_QUEUE_LINES]:
        state = (context.t(update, "state_running") if job.status == "running"
                 else context.t(update, "state_queued", position=job.position))
        lines.append(context.t(update, "queue_line", id=job.id, command=job.command, user_id=job.user_id,
                               state=state))
    if len(listed) > MAX_QUEUE_LINES:
        lines.append(context.t(update, "queue_more", count=len(listed) - MAX_QUEUE_LINES))
    await update.effective_message.reply_text("\n".join(lines)[:MessageLimit.MAX_TEXT_LENGTH])


async def _target(update: Update, context: CourierContext, name: str) -> int | None:
    """The user a ``/ban``, ``/unban``, ``/allow`` or ``/disallow`` names (an id, or a ``@username`` seen
    before); None after a reply."""
    message = update.effective_message
    match = USER_REF.match(_args(update, context))
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
    if not await _admin_only(update, context, "ban") or (user_id := await _target(update, context, "ban")) is None:
        return
    if await _is_admin_id(context, user_id):
        await update.effective_message.reply_text(context.t(update, "ban_admin", user_id=user_id))
        return
    await access_store.set_banned(context.pool, user_id, True)
    count = await end_cancelled(context, await jobs.cancel_user_jobs(context.pool, user_id))
    await update.effective_message.reply_text(context.nt(update, "ban_done", count, user_id=user_id))


async def unban(update: Update, context: CourierContext) -> None:
    """``/unban <user id or @username>``."""
    if not await _admin_only(update, context, "unban") or (user_id := await _target(update, context, "unban")) is None:
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
    if not await _admin_only(update, context, "allow") or (user_id := await _target(update, context, "allow")) is None:
        return
    await access_store.set_allowed(context.pool, user_id, True)
    if await _is_banned(context, user_id):
        await update.effective_message.reply_text(context.t(update, "allow_still_banned", user_id=user_id))
    else:
        await update.effective_message.reply_text(context.t(update, "allow_done", user_id=user_id))


async def disallow(update: Update, context: CourierContext) -> None:
    """``/disallow <user id or @username>``: what ``/allow`` let in is taken back, with the user's jobs; the
    settings' allowlist and admins stay as they are (the reply says so)."""
    if (not await _admin_only(update, context, "disallow")
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


async def stats(update: Update, context: CourierContext) -> None:
    """``/stats``: jobs and failures per day, and per command with the median run time, over a week."""
    if not await _admin_only(update, context, "stats"):
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


ADMIN_HANDLERS = {"queue": queue, "allow": allow, "disallow": disallow, "ban": ban, "unban": unban, "stats": stats,
                  "bench": bench, "compare": compare, "backends": backends}


def admin_menu(language: str) -> list[tuple[str, str]]:
    """(command, description) that admins see in their menu after everyone's."""
    def say(key: str) -> str:
        return i18n.text(language, key)

    return [("queue", say("menu_queue")), ("allow", say("menu_allow")), ("disallow", say("menu_disallow")),
            ("ban", say("menu_ban")), ("unban", say("menu_unban")),
            ("stats", say("menu_stats")), ("bench", say("menu_bench")), ("compare", say("menu_compare")),
            ("backends", say("menu_backends"))]
