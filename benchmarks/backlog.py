"""A backlog through the bot against the same prompts queued straight into ComfyUI; fairness.

Runs the real bot (python-telegram-bot against the Bot API emulator), the dispatcher, an
embedded PostgreSQL and a real ComfyUI (``COMFYUI_DIR``) with the pack. The jobs are a
weight-free CPU-bound graph (``tests/support/graphs.py`` ``cpu_bound``, 0.3-0.5 s a run on
an idle core).

- ``backlog_throughput_ratio``: 40 jobs from 8 users (5 each) sent at once through the bot,
  first command → last result delivered, against the same 40 prompts POSTed straight into
  ComfyUI, first POST → last ``execution_success``; jobs/s through us ÷ jobs/s of ComfyUI
  alone. Rounds alternate the two; the ratio is the median of the rounds' ratios (the two
  halves of a round are close in time, so the load of a shared machine moves them alike).
- ``backend_idle_gap_median_ms``: from ComfyUI's history stamps of the jobs through the bot,
  one prompt's ``execution_success`` to the next one's ``execution_start``
  (``backend_idle_gap_direct_median_ms``: the same between the prompts queued straight in).
  ``backlog_busy_fraction_ratio``: the share of each round ComfyUI spent running prompts,
  through the bot ÷ alone; unlike the throughput it does not move with how fast the runs are
  (on a shared machine, they vary from round to round).
- ``fairness_flooder_jobs_before_others``: one user queues 50 jobs (the per-user cap raised
  for the run); once all 50 are committed, nine users send one each; the flooder's jobs that
  finish after the nine were sent and before the last of the nine (the ones already running or
  pipelined on the backend); the flooder's rest is then cancelled.
- ``duplicate_deliveries``: result files the bot sent over the whole run beyond one per
  delivered job (each job of the graph makes one picture): a succeeded job, or one cancelled
  after its file went (a delivery row of its own); 0 is the goal.

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/backlog.py [--rounds 3] [--depth 2] [--budget 480]

``--depth`` is ``COURIER_PIPELINE_DEPTH`` (1: one prompt at a time, as before pipelining). The
notes on stderr trace each round: time to the first run, running, idle between runs and how
much of that idle time ComfyUI waited for our next ``POST /prompt``, time after the last run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from _common import (
    Deadline,
    OutOfTime,
    booted_courier,
    comfyui_server,
    figure,
    load_pack,
    load_runner,
    note,
    wait_until,
)

USERS = tuple(range(7001, 7009))  # 8 users with 5 jobs each
JOBS_PER_USER = 5
FLOODER, FLOOD = 7100, 50
OTHERS = tuple(range(7101, 7110))  # nine
GRAPH = {"size": 1024, "radius": 6}  # 0.3-0.5 s on one idle core of a 2-core machine


async def stamps(client, prompt_ids) -> list[tuple[int, int, str]]:
    """(execution_start, execution_success, prompt id) per prompt, in start order; ms of the
    backend's clock (this machine's)."""
    spans = []
    for prompt_id in prompt_ids:
        entry = await client.history(prompt_id)
        marks = {kind: data.get("timestamp") for kind, data in entry.messages}
        spans.append((marks["execution_start"], marks["execution_success"], prompt_id))
    return sorted(spans)


def ratio(through: list[float], alone: list[float]) -> float:
    """The median over rounds of through ÷ alone."""
    return statistics.median(ours / theirs for ours, theirs in zip(through, alone, strict=True))


def busy(spans, started: float, ended: float) -> float:
    """The share of ``started``..``ended`` (s) the backend spent running the prompts."""
    return sum(end - start for start, end, _ in spans) / 1000 / (ended - started)


def idle_gaps(spans) -> list[int]:
    return [start - end for (_, end, _), (start, _, _) in pairwise(spans)]


def trace(what: str, started: float, spans, ended: float, queued_at: dict[str, float] | None = None) -> None:
    """Where a round's time went: before the first run, running, idle between runs (of which,
    with ``queued_at``, idle because the next prompt was queued after the last one ended), after
    the last run."""
    runs = [end - start for start, end, _ in spans]
    gaps = idle_gaps(spans)
    late = ""
    if queued_at is not None:
        # the reply to POST /prompt comes back after ComfyUI queued it: bounded by the gap itself
        waits = [min(start - end, max(0.0, queued_at[after] - end))
                 for (_, end, _), (start, _, after) in pairwise(spans)]
        late = f", {sum(waits):.0f} ms of it waiting for our next POST /prompt ({sum(w > 0 for w in waits)} times)"
    note(f"{what}: {spans[0][0] - started * 1000:.0f} ms to the first run; runs {sum(runs)} ms (median "
         f"{statistics.median(runs)} ms); idle between runs {sum(gaps)} ms (max {max(gaps, default=0)} ms{late}); "
         f"{ended * 1000 - spans[-1][1]:.0f} ms after the last run")


def record_queueing(client) -> dict[str, float]:
    """prompt id -> when (ms, this machine's clock) ``client`` had it queued, from now on."""
    queued_at: dict[str, float] = {}
    queue_prompt = client.queue_prompt

    async def recorded(*args, **kwargs) -> str:
        prompt_id = await queue_prompt(*args, **kwargs)
        queued_at[prompt_id] = time.time() * 1000
        return prompt_id

    client.queue_prompt = recorded
    return queued_at


async def direct_round(client, workflow, tag: str, deadline: Deadline,
                       count: int = len(USERS) * JOBS_PER_USER) -> tuple[float, float, list[int]]:
    """``count`` prompts straight into ComfyUI: (jobs/s, busy fraction, idle gaps in ms)."""
    from comfyui_courier.jobs.workflow import fill_job

    started = time.time()
    prompt_ids = [await client.queue_prompt(fill_job(workflow, prompt=f"{tag} {index}", seed=index), client.client_id)
                  for index in range(count)]

    async def all_done() -> bool:  # they run in turn: the last one ends last
        return await client.history(prompt_ids[-1]) is not None

    await wait_until(all_done, "the direct prompts", deadline)
    spans = await stamps(client, prompt_ids)
    ended = spans[-1][1] / 1000
    trace(f"{tag}, ComfyUI alone", started, spans, ended)
    return count / (ended - started), busy(spans, started, ended), idle_gaps(spans)


async def bot_round(courier, bot, client, tag: str, deadline: Deadline, users=USERS,
                    jobs_per_user: int = JOBS_PER_USER) -> tuple[float, float, list[int]]:
    """``jobs_per_user`` jobs of each of ``users`` through the bot: (jobs/s, busy fraction, idle gaps in ms)."""
    pool = courier.store.pool
    async with pool.acquire() as conn:
        after = await conn.fetchval("SELECT coalesce(max(id), 0) FROM courier_jobs")
    count = len(users) * jobs_per_user
    started = time.time()
    for user in users:
        for index in range(jobs_per_user):
            bot.inject_text(user, f"/busy {tag} {user} {index}")

    async def finished():
        async with pool.acquire() as conn:
            rows = await conn.fetch("SELECT status, result->>'prompt_id' AS prompt_id, finished_at FROM courier_jobs "
                                    "WHERE id > $1 AND status NOT IN ('queued', 'running')", after)
        return rows if len(rows) == count else None

    rows = await wait_until(finished, "the jobs through the bot", deadline)
    failed = [row for row in rows if row["status"] != "succeeded"]
    if failed:
        sys.exit(f"{len(failed)} jobs did not succeed: {failed[:3]}")
    last = max(row["finished_at"] for row in rows).timestamp()
    spans = await stamps(client, [row["prompt_id"] for row in rows])
    trace(f"{tag}, through the bot", started, spans, last, courier.queued_at)
    return count / (last - started), busy(spans, started, last), idle_gaps(spans)


async def duplicate_deliveries(courier, bot) -> int:
    """Result files sent beyond one per delivered job (each job of the graph makes one picture)."""
    async with courier.store.pool.acquire() as conn:
        jobs = await conn.fetch("SELECT j.status, EXISTS (SELECT 1 FROM courier_deliveries d WHERE d.job_id = j.id) "
                                "AS delivering FROM courier_jobs j")
    sent = sum(1 for call in bot.outbox if call.method == "sendDocument" and call.ok)
    delivered = delivered_jobs([(job["status"], job["delivering"]) for job in jobs])
    note(f"{sent} result files sent for {delivered} delivered jobs")
    return sent - delivered


def delivered_jobs(jobs: list[tuple[str, bool]]) -> int:
    """Of (status, whether a delivery of its file began), the jobs whose file is expected to have
    gone once: the succeeded ones, and those cancelled once their file was on its way (a flood's
    job /cancel met as its result went out)."""
    return sum(1 for status, delivering in jobs if status == "succeeded" or (status == "cancelled" and delivering))


async def fairness(courier, bot, deadline: Deadline) -> int:
    pool = courier.store.pool

    async def rows_of(users):
        async with pool.acquire() as conn:
            return await conn.fetch("SELECT user_id, status, finished_at FROM courier_jobs "
                                    "WHERE user_id = any($1::bigint[])", list(users))

    for index in range(FLOOD):
        bot.inject_text(FLOODER, f"/busy flood {index}")

    async def flood_committed() -> bool:
        return len(await rows_of([FLOODER])) == FLOOD

    await wait_until(flood_committed, "the flood committed", deadline)
    sent = time.time()
    early = sum(row["finished_at"] is not None for row in await rows_of([FLOODER]))
    note(f"fairness: {early} of the flooder's {FLOOD} jobs had finished while the flood came in")
    for user in OTHERS:
        bot.inject_text(user, "/busy not flooding")

    async def others_done():
        rows = await rows_of(OTHERS)
        return rows if len(rows) == len(OTHERS) and all(row["finished_at"] for row in rows) else None

    last_other = max(row["finished_at"] for row in await wait_until(others_done, "the nine jobs", deadline))
    before = sum(1 for row in await rows_of([FLOODER]) if row["finished_at"] is not None
                 and sent < row["finished_at"].timestamp() and row["finished_at"] < last_other)
    bot.inject_text(FLOODER, "/cancel")

    async def flood_ended() -> bool:
        return all(row["status"] not in ("queued", "running") for row in await rows_of([FLOODER]))

    await wait_until(flood_ended, "the flood cancelled", deadline)
    return before


async def measure(comfy_url: str, rounds: int, depth: int, deadline: Deadline) -> None:
    load_pack()
    from comfyui_courier.emulator.botapi import BotApiEmulator
    from comfyui_courier.jobs.comfy.client import ComfyClient
    from comfyui_courier.store import commands
    from comfyui_courier.tests.support.graphs import cpu_bound

    workflow = cpu_bound(**GRAPH)
    data_dir = Path(tempfile.mkdtemp(prefix="courier-backlog-"))
    async with BotApiEmulator() as emulator, ComfyClient(comfy_url) as client:
        bot = emulator.add_bot()
        try:
            async with booted_courier(emulator, bot, data_dir, comfy_url,
                                      COURIER_ALLOWED_USERS=",".join(map(str, (*USERS, FLOODER, *OTHERS))),
                                      COURIER_MAX_JOBS_PER_USER=str(FLOOD),
                                      COURIER_PIPELINE_DEPTH=str(depth)) as courier:
                courier.queued_at = record_queueing(courier.dispatcher.clients[0])
                await commands.put_command(courier.store.pool, "busy", workflow=workflow, description="CPU-bound")
                note(f"pipeline depth {courier.settings.pipeline_depth}; warming up")
                await direct_round(client, workflow, "warm-up", deadline, count=3)
                await bot_round(courier, bot, client, "warm-up", deadline, users=USERS[:1], jobs_per_user=1)
                direct, through, direct_busy, through_busy, gaps, direct_gaps = [], [], [], [], [], []
                for index in range(rounds):
                    if not deadline.allows(120):
                        note(f"time budget reached after {index} rounds")
                        break
                    rate, share, round_gaps = await direct_round(client, workflow, f"direct {index}", deadline)
                    direct.append(rate)
                    direct_busy.append(share)
                    direct_gaps += round_gaps
                    rate, share, round_gaps = await bot_round(courier, bot, client, f"bot {index}", deadline)
                    through.append(rate)
                    through_busy.append(share)
                    gaps += round_gaps
                    note(f"round {index}: ComfyUI alone {direct[-1]:.2f} jobs/s, through the bot "
                         f"{through[-1]:.2f} jobs/s (ratio {through[-1] / direct[-1]:.3f}); idle gap median "
                         f"{statistics.median(round_gaps)} ms, max {max(round_gaps)} ms")
                if not through:
                    sys.exit("no round completed")
                figure("backlog_throughput_ratio", ratio(through, direct), "ratio")
                figure("backend_idle_gap_median_ms", float(statistics.median(gaps)), "ms")
                figure("backend_idle_gap_direct_median_ms", float(statistics.median(direct_gaps)), "ms")
                figure("backlog_busy_fraction_ratio", ratio(through_busy, direct_busy), "ratio")
                figure("backlog_comfyui_alone_jobs_per_s", statistics.median(direct), "jobs/s")
                if deadline.allows(60):
                    figure("fairness_flooder_jobs_before_others", await fairness(courier, bot, deadline), "jobs")
                else:
                    note("no time left for the fairness run")
                figure("duplicate_deliveries", await duplicate_deliveries(courier, bot), "files")
        finally:
            load_runner().remove_tree(data_dir)  # and, run as root, the database linked from it


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depth", type=int, default=2, help="COURIER_PIPELINE_DEPTH")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for the whole run")
    args = parser.parse_args()
    deadline = Deadline(args.budget)
    with comfyui_server() as server:
        try:
            asyncio.run(asyncio.wait_for(measure(server.url, args.rounds, args.depth, deadline), args.budget))
        except OutOfTime as error:
            sys.exit(f"{error}: the figures above are all there are")
    return 0


if __name__ == "__main__":
    sys.exit(main())
