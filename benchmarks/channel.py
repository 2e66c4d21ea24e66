"""The channel to Telegram: requests per job, bursts against its limits, a backlog's waits, a flood's
acknowledgements.

Runs the real bot in a process of its own (``_bot_process.py``: python-telegram-bot against the Bot
API emulator, which records every request, an embedded PostgreSQL) and, for the parts with jobs, a
real ComfyUI (``COMFYUI_DIR``) with the pack. A message request is one Telegram's limits count:
``send*``, ``edit*``, ``delete*``, ``copy*``, ``forward*``, not ``sendChatAction`` (every attempt,
answered or not). Four parts (``--parts``), each in a share of ``--budget``:

- ``jobs``: ``--jobs`` ``/demo`` jobs one at a time, each from a chat of its own (each starts at
  once), then ``--jobs`` more from as many chats at once (most of them wait in the queue).
  ``requests_per_job_mean`` and ``requests_per_job_max``: message requests in a job's chat, the
  job's "Done" included (``requests_per_job_mean_started_at_once``: the first half alone). Then
  ``--jobs`` more one at a time, each sent by the Mini App form of a chat of its own (``/app``'s
  button, put in the chat's keyboard directly: ``/app`` itself is not the job's):
  ``requests_per_miniapp_job_mean``, to equal ``requests_per_job_mean_started_at_once``.
- ``backlog``: ``--backlog`` ``/demo`` jobs from ``--backlog-users`` users at once (the per-user cap
  raised to fit). ``result_wait_p99_ms`` (and ``_median_ms``): ComfyUI's ``execution_success`` of a
  job (its history stamp) → its result file (``sendDocument``) reaching the Bot API, a chat's jobs
  paired with its files in order; ``done_lag_s``: the last result file → the last "Done".
- ``flood``: ``--commands`` ``/demo`` commands from ``--chats`` chats at once, no backend (the
  dispatcher idle; ``load.py``'s burst). ``ack_p99_s``: command injected → the first message, once
  the command's job row is committed, that replies to the command or is its chat's queue message
  listing it (posted or edited: while nothing runs, a chat's queue only grows, so a message listing
  n jobs lists its first n by id), answered by the Bot API; a command never acknowledged counts as
  acknowledged at the end of the part, so the figure is then a lower bound (the notes say how
  many). The bot stops once it went quiet (it sends the queue messages' last updates as it stops).
  ``ack_requests_per_command``: message requests in those chats ÷ commands.
  ``ingest_updates_per_s`` and ``enqueue_p99_ms`` as in ``load.py`` (update received → job committed).
- ``flood_with_jobs``: the same with a ComfyUI backend, so the flood's jobs run meanwhile (figures
  ending ``_with_jobs``; these acknowledgement figures have no goal: a running job's own messages
  share the chat, and any queue message after the commit counts, as jobs leave the queue).

A part that runs out of its share of the budget says so and prints what it measured by then, each
figure marked ``"partial": true`` (the jobs that ended, the results that came); each part's figures
are printed as it ends, so a later part cannot lose them.

Over every part: ``max_requests_in_any_second`` (message requests in any sliding 1 s),
``max_chat_requests_in_any_10s`` and ``max_chat_requests_in_any_second`` (in one chat, any sliding
10 s and 1 s).

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/channel.py [--jobs 20] [--backlog 1000]
        [--backlog-users 200] [--commands 5000] [--chats 200] [--parts jobs,backlog,flood,flood_with_jobs]
        [--budget 600]
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import re
import statistics
import sys
import time
from collections import defaultdict

from _bot_process import bot_process
from _common import (
    Deadline,
    OutOfTime,
    comfyui_server,
    figure,
    is_done,
    is_message,
    load_pack,
    max_in_window,
    note,
    percentile,
    wait_until,
)
from backlog import stamps
from load import CHAT_BASE, burst, ingest_figures

PARTS = {"jobs": 0.1, "backlog": 0.4, "flood": 0.2, "flood_with_jobs": 0.3}
"""Each part and its share of the budget (after ComfyUI's start)."""
AT_ONCE_CHAT, QUEUED_CHAT, BACKLOG_CHAT, MINIAPP_CHAT = 10_000, 20_000, 30_000, 40_000
FORM_BUTTON = {"text": "🎨 New picture", "web_app": {"url": "https://forms.example/courier/"}}
QUIET_S = 2.0
"""No message request for this long, and none in flight: a part's requests are all made."""
STOP_RESERVE_S = 15.0
"""Of the budget, kept for stopping the last bot and printing the figures over every part."""
WALL = time.time() - time.perf_counter()
"""Add to a ``time.perf_counter`` reading (the emulator's) for this machine's wall clock."""


def message_calls(bot, since: float = 0.0) -> list:
    """The message requests the emulator received from ``since`` on, in the order received."""
    return [call for call in bot.calls if is_message(call.method) and call.received_at >= since]


def replied_to(call) -> int | None:
    """The message a sent message replies to (None: none, and for an edit or a deletion, which
    answers whatever the chat's message shows by then)."""
    if not call.method.startswith("send") or not isinstance(call.result, dict):
        return None
    return call.result.get("reply_to_message", {}).get("message_id")


def by_chat(calls) -> dict[int, list]:
    chats = defaultdict(list)
    for call in calls:
        chats[call.params.get("chat_id")].append(call)
    return chats


def listed(call) -> int | None:
    """How many queued jobs a queue message (posted or edited) lists; None for any other message."""
    lines = str(call.params.get("text") or "").splitlines()
    if not lines or not all(line.startswith(("Queued /", "…and ")) for line in lines):
        return None
    more = re.fullmatch(r"…and (\d+) more\.", lines[-1])
    return sum(line.startswith("Queued /") for line in lines) + (int(more.group(1)) if more else 0)


def acknowledged(answers: list[tuple[float, int | None, int | None]], committed: float | None, message_id: int,
                 place: int | None, end: float) -> float:
    """When a command (``message_id``, its job committed at ``committed``) was acknowledged: of its
    chat's answered message requests (time, the message it replies to, the jobs it lists if it is the
    queue message), sorted, the first at or after the commit that replies to it, or a queue message
    that lists it: more jobs than ``place`` (its job's rank in the chat's queue, which only grows
    while nothing runs; None: with jobs running, any queue message after the commit counts). ``end``
    if none did."""
    if committed is None:
        return end
    start = bisect.bisect_left(answers, committed, key=lambda answer: answer[0])
    return next((at for at, reply_to, jobs in answers[start:]
                 if reply_to == message_id or (jobs is not None and (place is None or jobs > place))), end)


def places(job_ids: dict[int, int], chats: int) -> dict[int, int]:
    """Each command's job's rank (from 0) among its chat's jobs, by job id: the queue's order."""
    ranks: dict[int, int] = {}
    for chat in range(chats):
        ordered = sorted((job_id, index) for index, job_id in job_ids.items() if index % chats == chat)
        ranks.update({index: rank for rank, (_, index) in enumerate(ordered)})
    return ranks


async def quiet(emulator, bot, deadline: Deadline) -> None:
    """Until the bot has made no message request for ``QUIET_S`` and none is in flight."""
    while deadline.remaining() > 0:
        calls = message_calls(bot)
        last = max((call.received_at for call in calls), default=0.0)
        if time.perf_counter() - last > QUIET_S and all(call.status is not None for call in calls):
            return
        await asyncio.sleep(0.2)
    note("the part's time ran out before the bot went quiet")


async def finished(conn, users: list[int], count: int, deadline: Deadline, what: str) -> None:
    async def probe() -> bool:
        return await conn.fetchval("SELECT count(*) FROM courier_jobs WHERE user_id = any($1::bigint[]) "
                                   "AND status NOT IN ('queued', 'running')", users) >= count

    await wait_until(probe, what, deadline, timeout=deadline.remaining())


def report(found: list[tuple[str, float, str]], partial: bool = False) -> None:
    """Print a part's figures as soon as it ends."""
    for name, value, unit in found:
        figure(name, value, unit, partial=partial)


async def jobs_part(comfy_url: str, args, parts: list[str], part_deadline, seen: list) -> None:
    """The ``jobs`` and ``backlog`` parts of ``parts``, on one bot with ``comfy_url`` behind it."""
    load_pack()
    from comfyui_courier.emulator.botapi import BotApiEmulator
    from comfyui_courier.jobs.comfy.client import ComfyClient
    from comfyui_courier.store.pool import connect

    per_user = -(-args.backlog // args.backlog_users) if "backlog" in parts else 1
    async with BotApiEmulator() as emulator, ComfyClient(comfy_url) as client:
        bot = emulator.add_bot()
        seen.append(bot)
        async with bot_process(emulator, bot, per_user, backend=comfy_url) as (_, started):
            conn = await connect(started["dsn"])
            try:
                if "jobs" in parts:
                    report(*await _jobs(emulator, bot, conn, args.jobs, part_deadline("jobs")))
                if "backlog" in parts:
                    report(*await _backlog(emulator, bot, conn, client, args.backlog, args.backlog_users,
                                           part_deadline("backlog")))
            finally:
                await conn.close()


async def _jobs(emulator, bot, conn, jobs: int, deadline: Deadline) -> tuple[list[tuple[str, float, str]], bool]:
    """The ``jobs`` part's figures, and whether they are partial (its time ran out: the jobs that ended)."""
    at_once = [AT_ONCE_CHAT + index for index in range(jobs)]
    queued = [QUEUED_CHAT + index for index in range(jobs)]
    by_form = [MINIAPP_CHAT + index for index in range(jobs)]
    partial = False
    try:
        for index, user in enumerate(at_once):
            bot.inject_text(user, f"/demo channel {index}")
            await finished(conn, [user], 1, deadline, f"job {index}")
        for index, user in enumerate(queued):
            bot.inject_text(user, f"/demo channel queued {index}")
        await finished(conn, queued, jobs, deadline, "the jobs sent at once")
        for index, user in enumerate(by_form):
            bot.keyboards[user] = {"keyboard": [[FORM_BUTTON]]}
            bot.inject_web_app_data(user, json.dumps({"v": 1, "line": f"/demo channel form {index}"}),
                                    FORM_BUTTON["text"])
            await finished(conn, [user], 1, deadline, f"form job {index}")
    except OutOfTime as error:
        note(f"jobs: {error} (the part's time ran out): its figures count the jobs that said Done")
        partial = True
    await quiet(emulator, bot, deadline)
    chats = by_chat(message_calls(bot))
    ended = [user for user in at_once + queued if not partial or any(is_done(call) for call in chats[user])]
    if not ended:
        note("jobs: no job ended: no figures")
        return [], partial
    counts = {user: len(chats[user]) for user in ended}
    methods = defaultdict(int)
    for user in ended:
        for call in chats[user]:
            methods[call.method] += 1
    note(f"jobs: message requests by method over {len(ended)} jobs: {dict(methods)}")
    first = [counts[user] for user in at_once if user in counts]
    found = [("requests_per_job_mean", statistics.mean(counts.values()), "requests"),
             ("requests_per_job_max", max(counts.values()), "requests")]
    if first:
        found.append(("requests_per_job_mean_started_at_once", statistics.mean(first), "requests"))
    formed = [len(chats[user]) for user in by_form if any(is_done(call) for call in chats[user])]
    if formed:
        found.append(("requests_per_miniapp_job_mean", statistics.mean(formed), "requests"))
    return found, partial


async def _backlog(emulator, bot, conn, client, jobs: int, users: int, deadline: Deadline) -> tuple[list, bool]:
    """The ``backlog`` part's figures, and whether they are partial (its time ran out: the jobs that
    succeeded by then)."""
    chats = [BACKLOG_CHAT + index for index in range(users)]
    since = time.perf_counter()
    for index in range(jobs):
        bot.inject_text(chats[index % users], f"/demo backlog {index}")
    partial = False
    try:
        await finished(conn, chats, jobs, deadline, "the backlog")
    except OutOfTime as error:
        note(f"backlog: {error} (the part's time ran out): its figures are of the jobs that succeeded by then")
        partial = True
    await quiet(emulator, bot, deadline)
    rows = await conn.fetch("SELECT user_id, result->>'prompt_id' AS prompt_id FROM courier_jobs "
                            "WHERE user_id = any($1::bigint[]) AND status = 'succeeded'", chats)
    ended = {prompt_id: success for _, success, prompt_id in await stamps(client, [row["prompt_id"] for row in rows])}
    executed = defaultdict(list)
    for row in rows:
        executed[row["user_id"]].append(ended[row["prompt_id"]])
    calls = by_chat(message_calls(bot, since))
    waits, results, dones = [], [], []
    for chat in chats:
        files = [call.received_at for call in calls[chat] if call.method == "sendDocument"]
        results += files
        dones += [call.received_at for call in calls[chat] if is_done(call)]
        waits += [(WALL + sent) * 1000 - success for success, sent in zip(sorted(executed[chat]), files, strict=False)]
    note(f"backlog: {len(rows)} of {jobs} jobs succeeded, {len(results)} result files, {len(dones)} Done; "
         f"results {len(results) / (max(results) - since):.1f}/s" if results else "backlog: no result file")
    if not waits:
        note("backlog: no result reached the Bot API: no figures")
        return [], partial
    return [("result_wait_p99_ms", percentile(waits, 99), "ms"),
            ("result_wait_median_ms", statistics.median(waits), "ms"),
            ("done_lag_s", max(dones, default=max(results)) - max(results), "s")], partial


async def flood_part(chats: int, commands: int, deadline: Deadline, backend: str | None,
                     seen: list) -> list[tuple[str, float, str]]:
    suffix = "_with_jobs" if backend else ""
    result = await burst(chats, commands, deadline, backend=backend, drain_reserve_s=deadline.remaining() / 2,
                         before_stop=lambda emulator, bot: quiet(emulator, bot, deadline))
    bot, injected, committed = result["bot"], result["injected"], result["committed"]
    seen.append(bot)
    end = time.perf_counter()
    calls = by_chat(message_calls(bot, injected[0]))
    answers = {chat: [(call.received_at, replied_to(call), listed(call)) for call in chat_calls if call.ok]
               for chat, chat_calls in calls.items()}
    ranks = {} if backend else places(result["job_ids"], chats)
    acked_at = [acknowledged(answers.get(CHAT_BASE + index % chats, []), committed.get(index), message_id,
                             ranks.get(index), end)
                for index, message_id in enumerate(result["message_ids"])]
    acks = [at - sent for at, sent in zip(acked_at, injected, strict=True)]
    unacked = acked_at.count(end)
    if unacked:
        note(f"flood{suffix}: {unacked} of {commands} commands not acknowledged in time: ack_p99_s is a lower bound")
    requests = sum(len(calls.get(CHAT_BASE + chat, [])) for chat in range(chats))
    note(f"flood{suffix}: {result['rows']} jobs in {result['seconds']:.1f} s; {requests} message requests; "
         f"reply drain {result['drain_s']:.1f} s")
    return [(f"ack_p99_s{suffix}", percentile(acks, 99), "s"),
            (f"ack_median_s{suffix}", statistics.median(acks), "s"),
            (f"ack_requests_per_command{suffix}", requests / commands, "requests"),
            *ingest_figures(result, suffix)]


def counted_times(calls: list) -> list[float]:
    """When each message Telegram counts reached the emulator: an album's once per item."""
    from comfyui_courier.emulator.botapi.limits import message_count

    return [call.received_at for call in calls for _ in range(message_count(call.method, call.params))]


def limits(bots: list) -> list[tuple[str, float, str]]:
    """The most messages in any second (per bot: each part has its own), and in one chat in any 10 s and any 1 s."""
    overall = max((max_in_window(counted_times(message_calls(bot)), 1.0) for bot in bots), default=0)
    chats = [counted_times(calls) for bot in bots for calls in by_chat(message_calls(bot)).values()]
    chat = max((max_in_window(times, 10.0) for times in chats), default=0)
    chat_second = max((max_in_window(times, 1.0) for times in chats), default=0)
    return [("max_requests_in_any_second", overall, "requests"), ("max_chat_requests_in_any_10s", chat, "requests"),
            ("max_chat_requests_in_any_second", chat_second, "requests")]


async def measure(args, comfy_url: str | None, deadline: Deadline) -> None:
    parts = [part for part in PARTS if part in args.parts]
    budget, shares = deadline.remaining() - STOP_RESERVE_S, sum(PARTS[part] for part in parts)

    def part_deadline(part: str) -> Deadline:  # from when the part begins
        return Deadline(min(deadline.remaining() - STOP_RESERVE_S, budget * PARTS[part] / shares))

    seen: list = []
    if {"jobs", "backlog"} & set(parts):
        await jobs_part(comfy_url, args, parts, part_deadline, seen)
    for part, backend in (("flood", None), ("flood_with_jobs", comfy_url)):
        if part in parts:
            report(await flood_part(args.chats, args.commands, part_deadline(part), backend, seen))
    report(limits(seen))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--backlog", type=int, default=1000, help="jobs in the backlog part")
    parser.add_argument("--backlog-users", type=int, default=200)
    parser.add_argument("--commands", type=int, default=5000, help="commands in each flood")
    parser.add_argument("--chats", type=int, default=200, help="chats the flood comes from")
    parser.add_argument("--parts", type=lambda text: text.split(","), default=list(PARTS))
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run")
    args = parser.parse_args()
    if unknown := set(args.parts) - set(PARTS):
        sys.exit(f"unknown parts {sorted(unknown)}: choose from {', '.join(PARTS)}")
    deadline = Deadline(args.budget)
    needs_comfyui = bool({"jobs", "backlog", "flood_with_jobs"} & set(args.parts))
    with comfyui_server() if needs_comfyui else contextlib.nullcontext() as server:
        try:
            asyncio.run(asyncio.wait_for(measure(args, server.url if server else None, deadline),
                                         deadline.remaining()))
        except TimeoutError:
            note(f"channel: the budget of {args.budget:g} s ran out during a part; the figures printed are "
                 "those of the parts that ended")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
