"""Two backends against one: jobs/s through the bot with two ComfyUIs ÷ jobs/s with one.

Two real ComfyUIs (``COMFYUI_DIR``) with the pack, each pinned to a core of its own with
``taskset`` and running one torch thread, behind one Courier (python-telegram-bot against the
Bot API emulator, the dispatcher, an embedded PostgreSQL). The same N jobs of a CPU-bound,
weight-free graph (a text card sharpened with a 63×63 kernel, a few seconds a job on one
thread) run first with the second backend drained, then with both. Besides the ratio it
prints what explains a shortfall: each run's ComfyUI execution time per job (its own
stamps), how much of its core each busy backend got, and the share of the machine's CPU that
went to anything but the two ComfyUIs (the bot, PostgreSQL, the emulator, and whoever else
uses this machine).

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/scaleout.py [--jobs 8] [--budget 600]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    Deadline,
    booted_courier,
    comfyui_dir_or_exit,
    cpu_seconds,
    figure,
    load_pack,
    load_runner,
    note,
)

USERS = (501, 502, 503, 504)
COMMAND = "scaleout"


def machine_busy_seconds() -> float:
    """CPU seconds all cores have spent not idle since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def pinned_comfyui(runner, comfyui_dir: Path, base: Path, core: int):
    """A ComfyUI on one core, with one torch thread."""

    class Pinned(runner.ComfyUIProcess):
        def command(self) -> list[str]:
            return ["taskset", "-c", str(core), *super().command()]

    return Pinned(comfyui_dir, base, env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                                          "COURIER_DATABASE_URL": "postgresql://127.0.0.1:1/unused"})


async def run_jobs(courier, bot, count: int, label: str, servers) -> dict:
    """Send ``count`` jobs from four users; wait for every result; what it took."""
    from comfyui_courier.tests.support.courier import replies_to
    from comfyui_courier.tests.support.polling import until

    pool = courier.store.pool
    async with pool.acquire() as conn:
        first_id = await conn.fetchval("SELECT coalesce(max(id), 0) + 1 FROM courier_jobs")
    cpu_before = sum(cpu_seconds(server.pid) for server in servers)
    busy_before = machine_busy_seconds()
    started = time.perf_counter()
    requests = [bot.inject_text(USERS[n % len(USERS)], f"/{COMMAND} {label} {n}") for n in range(count)]
    for request in requests:
        await bot.wait_for_call("sendDocument", timeout=300, where=replies_to(request))
    wall = time.perf_counter() - started
    comfyui_cpu = sum(cpu_seconds(server.pid) for server in servers) - cpu_before
    busy = machine_busy_seconds() - busy_before

    async def ended():
        async with pool.acquire() as conn:
            rows = await conn.fetch("SELECT backend, status, result FROM courier_jobs WHERE id >= $1", first_id)
        return rows if all(row["status"] not in ("queued", "running") for row in rows) else None

    rows = await until(ended, 30, "every job recorded")  # the result is sent before the row is written
    failed = [row for row in rows if row["status"] != "succeeded"]
    if failed:
        sys.exit(f"{label}: {len(failed)} job(s) did not succeed")
    executions = [row["result"]["execution_ms"] for row in rows if row["result"].get("execution_ms")]
    per_backend = {url: sum(row["backend"] == url for row in rows) for url in {row["backend"] for row in rows}}
    cores = os.cpu_count() or 1
    note(f"{label}: {count} jobs in {wall:.1f} s, per backend {sorted(per_backend.values())}, "
         f"execution median {statistics.median(executions):.0f} ms, ComfyUI CPU {comfyui_cpu:.1f} s, "
         f"machine busy {busy:.1f} of {cores * wall:.1f} core-s")
    return {"jobs_per_s": count / wall, "execution_ms": statistics.median(executions),
            "core_share": comfyui_cpu / (wall * len(per_backend)),  # of the cores the backends ran on
            "other_cpu_share": max(0.0, busy - comfyui_cpu) / (cores * wall)}


async def measure(servers, jobs: int, deadline: Deadline) -> tuple[dict, dict]:
    load_pack()
    from comfyui_courier.emulator.botapi import BotApiEmulator
    from comfyui_courier.store import backends, commands
    from comfyui_courier.tests.support.graphs import cpu_bound

    data_dir = Path(tempfile.mkdtemp(prefix="courier-scaleout-"))
    async with BotApiEmulator() as emulator:
        bot = emulator.add_bot()
        try:
            async with booted_courier(emulator, bot, data_dir, None, COURIER_ALLOWED_USERS=",".join(map(str, USERS)),
                                      COURIER_BACKENDS=",".join(server.url for server in servers)) as courier:
                pool = courier.store.pool
                await commands.put_command(pool, COMMAND, workflow=cpu_bound(1024, 31))
                second = (await backends.list_backends(pool, [servers[1].url]))[0]
                await run_jobs(courier, bot, len(servers), "warm-up", servers)  # imports, caches: one job each
                await backends.set_backend(pool, second.id, draining=True)
                one = await run_jobs(courier, bot, jobs, "one backend", servers)
                if not deadline.allows(jobs / one["jobs_per_s"] / 2 + 30):  # the second run, if it scales
                    sys.exit("no time left for the run with two backends")
                await backends.set_backend(pool, second.id, draining=False)
                two = await run_jobs(courier, bot, jobs, "two backends", servers)
        finally:
            load_runner().remove_tree(data_dir)  # and, run as root, the database linked from it
    return one, two


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run")
    args = parser.parse_args()
    comfyui_dir = comfyui_dir_or_exit()
    if shutil.which("taskset") is None or (os.cpu_count() or 1) < 2:
        sys.exit("needs taskset (util-linux) and two cores")
    deadline = Deadline(args.budget)
    runner = load_runner()
    scratch = runner.scratch_directory()
    servers = [pinned_comfyui(runner, comfyui_dir, scratch / f"backend-{core}", core) for core in (0, 1)]
    try:
        for server in servers:
            server.start()
        one, two = asyncio.run(asyncio.wait_for(measure(servers, args.jobs, deadline), deadline.remaining()))
    finally:
        for server in servers:
            server.stop()
        runner.remove_tree(scratch)
    figure("scaleout_2v1_ratio", two["jobs_per_s"] / one["jobs_per_s"], "x")
    figure("scaleout_one_backend_jobs_per_min", one["jobs_per_s"] * 60, "jobs/min")
    figure("scaleout_two_backends_jobs_per_min", two["jobs_per_s"] * 60, "jobs/min")
    figure("scaleout_execution_median_ms_one_backend", one["execution_ms"], "ms")
    figure("scaleout_execution_median_ms_two_backends", two["execution_ms"], "ms")
    figure("scaleout_backend_core_share_one_backend", one["core_share"] * 100, "%")
    figure("scaleout_backend_core_share_two_backends", two["core_share"] * 100, "%")
    figure("scaleout_other_cpu_share_two_backends", two["other_cpu_share"] * 100, "%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
