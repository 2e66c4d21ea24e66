"""Warm placement against today's fair order: jobs/s and model loads per job, with two checkpoints.

Two real ComfyUIs (``COMFYUI_DIR``) with the pack, each pinned to a core of its own with one torch
thread, both with the two tiny checkpoints (``python <pack> tiny-models --second-checkpoint``),
behind one Courier (python-telegram-bot against the Bot API emulator, the dispatcher, an embedded
PostgreSQL). The same workloads run twice in one process, warm placement on
(``COURIER_WARM_WAIT_S``, its default unless ``--warm-wait``) and off (0, the fair order only):

- mixed: several users, each sending jobs that alternate between the two checkpoints (a fixed seed
  picks each user's first), all at once; jobs/s from the first job queued to the last one ended,
  and the checkpoints ComfyUI loaded ("model_type EPS" in its log, one line per load) per job;
- fairness: one heavy user's backlog, then single-job users (a fixed seed picks their checkpoints)
  once the backlog runs; each light job's wait, queued to started, its p99.

Figures: ``placement_throughput_ratio`` (on ÷ off), ``model_loads_per_job_warm`` /
``model_loads_per_job_cold``, ``fair_wait_p99_s`` (on) and ``fair_wait_p99_s_cold`` (off), and
each run's jobs/min.

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/placement.py [--jobs-per-user 6] [--rounds 1] [--budget 900]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    REPO_ROOT,
    Deadline,
    OutOfTime,
    booted_courier,
    comfyui_dir_or_exit,
    figure,
    load_pack,
    load_runner,
    note,
    percentile,
    wait_until,
)
from scaleout import pinned_comfyui

SEED = 31
USERS = (601, 602, 603, 604, 605, 606)  # the mixed workload's
HEAVY, LIGHT = 700, tuple(range(701, 709))  # the fairness workload's
HEAVY_JOBS = 12
STEPS = 4
LOADED = "model_type EPS"  # ComfyUI's line for each checkpoint it loads (comfy/sd.py)
EXECUTED = re.compile(r"Prompt executed in ([0-9.]+) seconds")  # ComfyUI's line after each prompt (main.py)


def write_models(comfyui_dir: Path, dest: Path) -> None:
    runner = load_runner()
    done = subprocess.run([runner.comfyui_python(comfyui_dir), str(REPO_ROOT), "tiny-models", "--dest", str(dest),
                           "--second-checkpoint"], capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        sys.exit(f"tiny-models failed: {done.stderr[-2000:]}")


def loads(servers) -> int:
    return sum(server.log_text().count(LOADED) for server in servers)


def prompt_times(servers, since: list[int]) -> tuple[list[float], list[float]]:
    """ComfyUI's execution time of each prompt since its log was ``since`` long: of those that loaded
    a checkpoint, and of those that did not."""
    loading, warm = [], []
    for server, start in zip(servers, since, strict=True):
        log = server.log_text()[start:]
        at = 0
        for match in EXECUTED.finditer(log):
            (loading if LOADED in log[at:match.start()] else warm).append(float(match.group(1)))
            at = match.end()
    return loading, warm


async def ended(pool, first_id: int, count: int, deadline: Deadline) -> list:
    """The ``count`` jobs from ``first_id`` once every one has ended (all succeeded, or exit)."""
    async def probe():
        rows = await pool.fetch("SELECT user_id, status, backend, created_at, started_at, finished_at"
                                " FROM courier_jobs WHERE id >= $1 ORDER BY id", first_id)
        done = len(rows) == count and all(row["status"] not in ("queued", "running", "delivering") for row in rows)
        return rows if done else None

    rows = await wait_until(probe, f"{count} jobs ended", deadline, timeout=deadline.remaining())
    if failed := [row for row in rows if row["status"] != "succeeded"]:
        sys.exit(f"{len(failed)} job(s) did not succeed")
    return rows


async def next_id(pool) -> int:
    return await pool.fetchval("SELECT coalesce(max(id), 0) + 1 FROM courier_jobs")


async def mixed(courier, bot, servers, per_user: int, deadline: Deadline) -> dict:
    pool = courier.store.pool
    first_id, loads_before = await next_id(pool), loads(servers)
    logs_before = [len(server.log_text()) for server in servers]
    chooser = random.Random(SEED)
    starts = {user: chooser.randrange(2) for user in USERS}
    for n in range(per_user):
        for user in USERS:
            bot.inject_text(user, f"/{('cka', 'ckb')[(starts[user] + n) % 2]} a lighthouse {n}")
    rows = await ended(pool, first_id, per_user * len(USERS), deadline)
    wall = (max(row["finished_at"] for row in rows) - min(row["created_at"] for row in rows)).total_seconds()
    loading, warm = prompt_times(servers, logs_before)
    return {"jobs_per_s": len(rows) / wall, "loads_per_job": (loads(servers) - loads_before) / len(rows),
            "jobs": len(rows), "wall_s": wall, "loading_s": loading, "warm_s": warm}


async def fairness(courier, bot, deadline: Deadline) -> list[float]:
    pool = courier.store.pool
    first_id = await next_id(pool)
    for n in range(HEAVY_JOBS):
        bot.inject_text(HEAVY, f"/{('cka', 'ckb')[n % 2]} heavy {n}")
    await wait_until(lambda: pool.fetchval("SELECT count(*) >= 2 FROM courier_jobs WHERE id >= $1 AND status IN"
                                           " ('running', 'succeeded')", first_id), "the backlog running", deadline)
    chooser = random.Random(SEED)
    for user in LIGHT:
        bot.inject_text(user, f"/{chooser.choice(('cka', 'ckb'))} light")
    rows = await ended(pool, first_id, HEAVY_JOBS + len(LIGHT), deadline)
    return [(row["started_at"] - row["created_at"]).total_seconds() for row in rows if row["user_id"] in LIGHT]


async def run_mode(servers, emulator, bot, data_dir: Path, wait_s: str, per_user: int, deadline: Deadline) -> dict:
    """Both workloads under a Courier with ``COURIER_WARM_WAIT_S`` ``wait_s``."""
    from comfyui_courier.store import commands
    from comfyui_courier.tests.support.graphs import tiny_sd
    from comfyui_courier.tools.tiny_models import CHECKPOINT, SECOND_CHECKPOINT

    async with booted_courier(emulator, bot, data_dir, None,
                              COURIER_ALLOWED_USERS=",".join(map(str, (*USERS, HEAVY, *LIGHT))),
                              COURIER_MAX_JOBS_PER_USER="100", COURIER_WARM_WAIT_S=wait_s,
                              COURIER_BACKENDS=",".join(server.url for server in servers)) as courier:
        for name, checkpoint in (("cka", CHECKPOINT.name), ("ckb", SECOND_CHECKPOINT.name)):
            await commands.put_command(courier.store.pool, name, workflow=tiny_sd(checkpoint, steps=STEPS))
        measured = await mixed(courier, bot, servers, per_user, deadline)
        measured["waits"] = await fairness(courier, bot, deadline)
    note(f"warm wait {wait_s} s: {measured['jobs']} mixed jobs in {measured['wall_s']:.1f} s, "
         f"{measured['loads_per_job']:.2f} loads a job, "
         f"backends busy {sum(measured['loading_s']) + sum(measured['warm_s']):.1f} s; "
         f"light users waited {sorted(measured['waits'])}")
    return measured


async def measure(servers, per_user: int, warm_wait_s: str, rounds: int, deadline: Deadline) -> dict[str, dict]:
    """``rounds`` of each mode, in the order on, off, off, on, … (a drift in the machine's load weighs
    on both alike), on one database and one emulated bot; per mode, the rounds' totals."""
    from comfyui_courier.emulator.botapi import BotApiEmulator

    waits = {"warm": warm_wait_s, "cold": "0"}  # COURIER_WARM_WAIT_S
    order = [mode for n in range(rounds) for mode in (("warm", "cold") if n % 2 == 0 else ("cold", "warm"))]
    runs = {mode: {"jobs": 0, "wall_s": 0.0, "loads": 0.0, "waits": [], "loading_s": [], "warm_s": []}
            for mode in waits}
    data_dir = Path(tempfile.mkdtemp(prefix="courier-placement-"))
    try:
        async with BotApiEmulator() as emulator:
            bot = emulator.add_bot()
            for mode in order:
                measured = await run_mode(servers, emulator, bot, data_dir, waits[mode], per_user, deadline)
                total = runs[mode]
                total["jobs"] += measured["jobs"]
                total["wall_s"] += measured["wall_s"]
                total["loads"] += measured["loads_per_job"] * measured["jobs"]
                total["waits"] += measured["waits"]
                total["loading_s"] += measured["loading_s"]
                total["warm_s"] += measured["warm_s"]
    finally:
        load_runner().remove_tree(data_dir)  # and, run as root, the database linked from it
    return {mode: {"jobs_per_s": run["jobs"] / run["wall_s"], "loads_per_job": run["loads"] / run["jobs"],
                   "busy_s_per_job": (sum(run["loading_s"]) + sum(run["warm_s"])) / run["jobs"],
                   "waits": run["waits"],
                   "loading_s": run["loading_s"], "warm_s": run["warm_s"]}
            for mode, run in runs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs-per-user", type=int, default=6)
    parser.add_argument("--warm-wait", default="", help="COURIER_WARM_WAIT_S of the warm run (default: its default)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each mode, alternating (on off off on …)")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for the whole run")
    args = parser.parse_args()
    comfyui_dir = comfyui_dir_or_exit()
    if shutil.which("taskset") is None:
        sys.exit("needs taskset (util-linux)")
    deadline = Deadline(args.budget)
    runner = load_runner()
    scratch = runner.scratch_directory()
    load_pack()
    from comfyui_courier.core.config import Settings

    warm_wait_s = args.warm_wait or str(Settings().warm_wait_s)
    from comfyui_courier.tests.fixtures.tiny_models import link_tiny_models

    write_models(comfyui_dir, scratch / "models")
    servers = [pinned_comfyui(runner, comfyui_dir, scratch / f"backend-{core}", core) for core in (0, 1)]
    started = time.monotonic()
    try:
        for server in servers:
            link_tiny_models(server, scratch / "models", second=True)
            server.start()
        note(f"two ComfyUIs up in {time.monotonic() - started:.0f} s")
        runs = asyncio.run(asyncio.wait_for(measure(servers, args.jobs_per_user, warm_wait_s, args.rounds, deadline),
                                            deadline.remaining()))
    except (OutOfTime, TimeoutError) as error:
        sys.exit(f"out of time: {error}")
    finally:
        for server in servers:
            server.stop()
        runner.remove_tree(scratch)
    warm, cold = runs["warm"], runs["cold"]
    figure("placement_throughput_ratio", warm["jobs_per_s"] / cold["jobs_per_s"], "x")
    figure("model_loads_per_job_warm", warm["loads_per_job"], "loads/job")
    figure("model_loads_per_job_cold", cold["loads_per_job"], "loads/job")
    figure("fair_wait_p99_s", percentile(warm["waits"], 99), "s")
    figure("fair_wait_p99_s_cold", percentile(cold["waits"], 99), "s")
    figure("placement_jobs_per_min_warm", warm["jobs_per_s"] * 60, "jobs/min")
    figure("placement_jobs_per_min_cold", cold["jobs_per_s"] * 60, "jobs/min")
    figure("placement_backend_busy_s_per_job_warm", warm["busy_s_per_job"], "s")  # ComfyUI's own execution time
    figure("placement_backend_busy_s_per_job_cold", cold["busy_s_per_job"], "s")
    # What a load costs where it happens: a prompt's execution with a checkpoint load against without,
    # both modes; and the most the loads saved can give, were the backends all the time there is.
    loading, cached = warm["loading_s"] + cold["loading_s"], warm["warm_s"] + cold["warm_s"]
    if not (loading and cached):
        note("no prompt that loaded a checkpoint, or none that did not: no load cost")
        return 0
    loading_s, warm_s = percentile(loading, 50), percentile(cached, 50)
    figure("placement_prompt_s_loading_median", loading_s, "s")
    figure("placement_prompt_s_warm_median", warm_s, "s")
    saved_s = (cold["loads_per_job"] - warm["loads_per_job"]) * (loading_s - warm_s)
    figure("placement_throughput_ratio_bound", cold["busy_s_per_job"] / (cold["busy_s_per_job"] - saved_s), "x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
