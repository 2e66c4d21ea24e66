"""Honest estimates (issue 31): how far the queue's "starts in about N s" and the status's "about N s
left" are from what then happened, over a mixed /demo + /img workload.

The bot and the dispatcher run in this process (python-telegram-bot against the Bot API emulator, an
embedded PostgreSQL) with two fake ComfyUIs (tests/support/fake_comfyui.py), one job at a time each
(``COURIER_PIPELINE_DEPTH=1``): what they render is not the point, how long they take is, so a job
takes ``STEPS[command]`` sampler steps of ``STEP_S`` (/demo 0.8 s, /img 4 s: the ratio of the tiny
/demo to an SD 1.5 /img on a GPU). No ``COMFYUI_DIR`` is needed. The /img jobs run /demo's
weight-free workflow under /img's name (the fake has no checkpoint; the name picks the run times).

A warm-up (``WARMUP`` jobs of each command) leaves each command a history, as a bot in use has. Then
``USERS`` queue ``--jobs`` jobs, a fixed-seed mix, one every ``ARRIVAL_S``; right after each is
queued its estimate is read as the panel's queue reads it (``store.jobs.list_queue``; the chat's
queue message reads the same function). On a commit before issue 31 it has none there: the one its
queue message said is computed as that commit did (the median of the last 50 runs of all commands,
times the place over the slots).

- ``estimate_error_median_pct``, ``estimate_error_p90_pct``: |estimated start − actual start| / actual
  wait, over every job still queued when its estimate was read (actual start: its claim, started_at; a
  wait under 1 s counts as 1 s; a job told no estimate counts as 100 %). ``estimate_jobs``: how many.
- ``left_error_median_pct``, ``left_error_p90_pct``: |"about N s left" − the time from that status to
  the end of the job's rendering (its backend's execution_success stamp)| / that time (at least 1 s),
  over every such status the chats were shown while it rendered. ``left_samples``: how many.

    python benchmarks/estimates.py [--jobs 40] [--budget 300]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO_ROOT, Deadline, OutOfTime, figure, load_pack, load_runner, note, percentile, wait_until

USERS = (3101, 3102, 3103, 3104)
STEP_S = 0.5
STEPS = {"demo": 4, "img": 20}
WARMUP = 3
ARRIVAL_S = 0.4
"""One job queued every this many seconds: about twice what two backends get through, so a queue builds."""
LEFT = re.compile(r"about (\d+) s left")
STAMP_POLL_S = 0.02


def timed_fake():
    """The fake ComfyUI, a job's steps by its command (the word ``img`` in its prompt: an /img job)."""
    from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI

    class Timed(FakeComfyUI):
        async def _steps(self, prompt_id, node_id, cid, progress_state) -> None:
            self.steps = STEPS["img" if "img job" in json.dumps(self._running[2]) else "demo"]
            await super()._steps(prompt_id, node_id, cid, progress_state)

    return Timed(step_delay=STEP_S)


class Stamps:
    """When each of the bot's requests reached the emulator (polled: within ``STAMP_POLL_S``)."""

    def __init__(self, bot):
        self.bot = bot
        self.at: list[tuple[float, object]] = []
        self.task = asyncio.create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            calls = self.bot.outbox
            self.at.extend((time.time(), call) for call in calls[len(self.at):])
            await asyncio.sleep(STAMP_POLL_S)


async def told_start(pool, user: int, job_id: int) -> tuple[bool, float | None]:
    """(whether the job is still queued, in how many seconds it starts as its chat is told)."""
    from comfyui_courier.store import jobs

    job = next((job for job in await jobs.list_queue(pool, user_id=user) if job.id == job_id), None)
    if job is None or job.status != "queued":
        return False, None
    if hasattr(job, "starts_in_s"):
        return True, job.starts_in_s
    async with pool.acquire() as conn:  # a commit before issue 31: its queue message's estimate
        median_s, slots = await conn.fetchrow(
            "SELECT (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s) FROM (SELECT extract(epoch FROM"
            " finished_at - started_at) AS s FROM courier_jobs WHERE status = 'succeeded' AND started_at IS NOT NULL"
            " ORDER BY finished_at DESC LIMIT 50) r), (SELECT coalesce(sum(capacity), 0) FROM courier_backends"
            " WHERE healthy AND NOT draining)")
    return True, None if median_s is None else math.ceil(math.ceil(job.position / max(1, slots)) * median_s)


async def submit(pool, workflow: dict, user: int, command: str, n: int) -> int:
    from comfyui_courier.tests.support.jobs import enqueue

    params = {"workflow": workflow, "seed": n, "prompt": f"{command} job {n}", "language": "en"}
    return (await enqueue(pool, user_id=user, chat_id=user, command=command, params=params)).job_id


async def all_ended(pool, ids: list[int], deadline: Deadline, timeout: float) -> list:
    async def ended():
        async with pool.acquire() as conn:
            rows = await conn.fetch("SELECT id, status, started_at, chat_id, status_message_id,"
                                    " result->>'prompt_id' AS prompt_id FROM courier_jobs WHERE id = ANY($1::bigint[])",
                                    ids)
        return rows if all(row["status"] not in ("queued", "running", "delivering") for row in rows) else None

    return await wait_until(ended, f"{len(ids)} jobs to end", deadline, timeout)


async def run(args, deadline: Deadline) -> dict[str, list[float]]:
    load_pack()
    from comfyui_courier.core.config import load_settings
    from comfyui_courier.emulator.botapi import BotApiEmulator
    from comfyui_courier.runtime import Courier

    workflow = json.loads((REPO_ROOT / "workflows" / "api" / "demo.json").read_text(encoding="utf-8"))
    data_dir = Path(tempfile.mkdtemp(prefix="courier-bench-estimates-"))
    errors: dict[str, list[float]] = {"start": [], "left": []}
    async with BotApiEmulator() as emulator, timed_fake() as one, timed_fake() as two:
        bot = emulator.add_bot()
        settings = load_settings(None, {
            "TELEGRAM_BOT_TOKEN": bot.token, "COURIER_TELEGRAM_API_URL": emulator.url, "COURIER_ALLOWED_USERS": "*",
            "COURIER_BACKENDS": f"{one.url},{two.url}", "COURIER_PIPELINE_DEPTH": "1",
            "COURIER_PROGRESS_INTERVAL_S": "0", "COURIER_LIVE_PREVIEWS": "false", "COURIER_MAX_JOBS_PER_USER": "1000"})
        courier = Courier(settings, data_dir, None)
        await courier.start()
        stamps = None
        try:
            await courier.booted()
            pool = courier.store.pool
            stamps = Stamps(bot)
            for user in USERS:  # each user's chat exists before results go to it
                bot.inject_text(user, "/help")
            warm = [await submit(pool, workflow, USERS[0], command, n)
                    for n, command in enumerate(["demo", "img"] * WARMUP)]
            await all_ended(pool, warm, deadline, 120)
            note("warm-up done: each command has a history")
            rng = random.Random(31)
            told: dict[int, tuple[datetime.datetime, float | None]] = {}
            ids = []
            for n in range(args.jobs):
                user, command = rng.choice(USERS), rng.choice(("demo", "img"))
                ids.append(job_id := await submit(pool, workflow, user, command, 100 + n))
                read_at = datetime.datetime.now(datetime.UTC)
                queued, seconds = await told_start(pool, user, job_id)
                if queued:
                    told[job_id] = (read_at, seconds)
                await asyncio.sleep(ARRIVAL_S)  # the workload's arrivals, not a wait for anything
            rows = {row["id"]: row for row in await all_ended(pool, ids, deadline, deadline.remaining())}
            for job_id, (read_at, seconds) in told.items():
                wait_s = (rows[job_id]["started_at"] - read_at).total_seconds()
                error = 1.0 if seconds is None else abs(seconds - wait_s) / max(wait_s, 1.0)
                errors["start"].append(100 * error)
            errors["left"] = left_errors(stamps.at, rows.values(), rendered(one, two))
        finally:
            if stamps is not None:
                stamps.task.cancel()
            await courier.stop()
            load_runner().remove_tree(data_dir)
    return errors


def rendered(*fakes) -> dict[str, float]:
    """When each prompt's rendering ended (its execution_success), by prompt id, as the backends stamped it."""
    ends = {}
    for fake in fakes:
        for prompt_id, entry in fake._history.items():
            stamps = [data["timestamp"] for event, data in entry["status"]["messages"] if event == "execution_success"]
            ends.update({prompt_id: stamps[0] / 1000} if stamps else {})
    return ends


def left_errors(stamped: list[tuple[float, object]], rows, ends: dict[str, float]) -> list[float]:
    """Per "about N s left" a job's status showed while it rendered: |N − the time to the end of its
    rendering| / that time (at least 1 s), in %."""
    ends = {(row["chat_id"], row["status_message_id"]): ends[row["prompt_id"]] for row in rows
            if row["status"] == "succeeded" and row["status_message_id"] is not None and row["prompt_id"] in ends}
    errors = []
    for at, call in stamped:
        shown = LEFT.search(call.params.get("text") or "") if call.method == "editMessageText" else None
        end = ends.get((call.params.get("chat_id"), call.params.get("message_id")))
        if shown and end is not None and end > at:
            errors.append(100 * abs(int(shown[1]) - (end - at)) / max(end - at, 1.0))
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the whole run")
    args = parser.parse_args()
    deadline = Deadline(args.budget)
    try:
        errors = asyncio.run(asyncio.wait_for(run(args, deadline), deadline.seconds))
    except (OutOfTime, asyncio.TimeoutError) as exc:
        note(f"out of time: {exc or 'the budget'}; no figures")
        return 1
    for name, values in (("estimate", errors["start"]), ("left", errors["left"])):
        if not values:
            note(f"{name}: nothing measured")
            continue
        figure(f"{name}_error_median_pct", statistics.median(values), "%")
        figure(f"{name}_error_p90_pct", percentile(values, 90), "%")
    figure("estimate_jobs", len(errors["start"]), "jobs")
    figure("left_samples", len(errors["left"]), "statuses")
    return 0


if __name__ == "__main__":
    sys.exit(main())
