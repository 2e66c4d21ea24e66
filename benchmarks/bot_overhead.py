"""The bot's own overhead per job: update received → result sent, minus ComfyUI's execution.

Runs the real bot in a process of its own (``_bot_process.py``: python-telegram-bot against the
Bot API emulator, the dispatcher, an embedded PostgreSQL) and a real ComfyUI (``COMFYUI_DIR``) with
the pack, then sends ``/demo`` N times (200 by default, so the p99 is not the slowest one or two),
one after another, each from a chat of its own. For each job:
overhead = (sendDocument reaches the Bot API: the emulator's receipt) − (user message injected)
− ComfyUI's execution time (its execution_start → execution_success stamps).
It also prints each step's median time (``bot_overhead_step_<step>_ms``, see
``_trace.py``): where the overhead goes.

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/bot_overhead.py [--jobs 200] [--budget 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _bot_process import bot_process
from _common import (
    Deadline,
    OutOfTime,
    comfyui_server,
    ended_job,
    figure,
    is_done,
    load_pack,
    load_runner,
    note,
    percentile,
)
from _trace import Trace

MIN_JOBS_FOR_P99 = 200
"""Jobs measured by default: their 99th percentile is more than the slowest one or two."""


async def measure(comfy_url: str, jobs_wanted: int, deadline: Deadline, trace: Trace) -> list[float]:
    load_pack()
    from comfyui_courier.emulator.botapi import BotApiEmulator
    from comfyui_courier.store.pool import connect

    first_user = 4242
    marks = Path(tempfile.mkdtemp(prefix="courier-bench-trace-")) / "marks.json"
    overheads = []
    async with BotApiEmulator() as emulator:
        bot = emulator.add_bot()
        async with bot_process(emulator, bot, 1, backend=comfy_url, trace_file=marks) as (_, started):
            conn = await connect(started["dsn"])
            try:
                for index in range(jobs_wanted + 1):  # the first job warms ComfyUI up and is not counted
                    if not deadline.allows(30):
                        note(f"time budget reached after {len(overheads)} jobs")
                        break
                    # a chat of its own per job: Telegram's limit per chat (about one message a second)
                    # would pace back-to-back jobs in one chat, and that is not the bot's overhead
                    try:
                        overhead = await one_job(emulator, bot, conn, first_user + index, index, trace, deadline)
                    except OutOfTime as error:
                        note(f"{error}: the figures are those of the {len(overheads)} jobs before it")
                        trace.drop()
                        break
                    if index and overhead is not None:
                        overheads.append(overhead)
                    else:
                        trace.drop()
            finally:
                await conn.close()
        trace.adopt(json.loads(marks.read_text()) if marks.exists() else [])
        load_runner().remove_tree(marks.parent)
    return overheads


async def one_job(emulator, bot, conn, user: int, index: int, trace: Trace, deadline: Deadline) -> float | None:
    """One ``/demo``, its result and "Done" awaited (one job at a time: the first of each after the
    message is the job's), then its row's end (recorded once the result went, so it may come just
    after the "Done"): its overhead (None if ComfyUI gave no execution time)."""
    trace.begin()
    started = time.perf_counter()
    bot.inject_text(user, f"/demo benchmark {index}")
    document = await bot.wait_for_call("sendDocument", timeout=120, where=lambda c: c.received_at > started)
    sent = document.received_at  # not when this task got the loop back
    trace.mark("document", at=sent)
    await emulator.wait_for(lambda: any(is_done(c) and c.received_at > started for c in bot.outbox), timeout=60)

    row = await ended_job(conn, user, f"job {index}'s row to end", deadline, timeout=30)
    assert row["status"] == "succeeded", row
    execution_ms = row["result"]["execution_ms"]
    return None if execution_ms is None else (sent - started) * 1000 - execution_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=MIN_JOBS_FOR_P99)
    parser.add_argument("--budget", type=float, default=600.0, help="seconds for the whole run")
    args = parser.parse_args()
    deadline = Deadline(args.budget)
    trace = Trace()
    with comfyui_server() as server:
        overheads = asyncio.run(measure(server.url, args.jobs, deadline, trace))
    if not overheads:
        sys.exit("no job completed")
    note(f"{len(overheads)} jobs; overhead min {min(overheads):.1f} ms, max {max(overheads):.1f} ms")
    if len(overheads) < MIN_JOBS_FOR_P99:
        note(f"fewer than {MIN_JOBS_FOR_P99} jobs: the p99 is the slowest few, not a 99th percentile")
    figure("bot_overhead_median_ms", statistics.median(overheads), "ms")
    figure("bot_overhead_p99_ms", percentile(overheads, 99), "ms")
    figure("bot_overhead_jobs", len(overheads), "jobs")
    note("median (p99) ms per step (benchmarks/_trace.py):")
    for step, what, median, p99 in trace.steps():
        note(f"  {median:8.2f} ({p99:8.2f})  to {step}: {what}")
        figure(f"bot_overhead_step_{step}_ms", median, "ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
