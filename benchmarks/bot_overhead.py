"""The bot's own overhead per job: update received → result sent, minus ComfyUI's execution.

Runs the real bot (python-telegram-bot against the Bot API emulator), the
dispatcher, an embedded PostgreSQL and a real ComfyUI (``COMFYUI_DIR``) with
the pack, then sends ``/demo`` N times, one after another. For each job:
overhead = (sendDocument reaches the Bot API: the emulator's receipt) − (user message injected)
− ComfyUI's execution time (its execution_start → execution_success stamps).
It also prints each step's median time (``bot_overhead_step_<step>_ms``, see
``_trace.py``): where the overhead goes.

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/bot_overhead.py [--jobs 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import Deadline, comfyui_server, figure, load_pack, load_runner, note
from _trace import Trace


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


async def measure(comfy_url: str, jobs_wanted: int, deadline: Deadline, trace: Trace) -> list[float]:
    load_pack()
    trace.install()
    from comfyui_courier.config import load_settings
    from comfyui_courier.emulator.botapi import BotApiEmulator
    from comfyui_courier.runtime import Courier
    from comfyui_courier.store import jobs

    user = 4242
    data_dir = Path(tempfile.mkdtemp(prefix="courier-bench-"))
    async with BotApiEmulator() as emulator:
        bot = emulator.add_bot()
        settings = load_settings(None, {"TELEGRAM_BOT_TOKEN": bot.token, "COURIER_TELEGRAM_API_URL": emulator.url,
                                        "COURIER_ALLOWED_USERS": str(user)})
        courier = Courier(settings, data_dir, comfy_url)
        await courier.start()
        await courier.booted()
        if courier.health.state("dispatcher") != "ok":
            sys.exit(f"Courier did not start: {courier.health_report()}")
        overheads = []
        try:
            for index in range(jobs_wanted + 1):  # the first job warms ComfyUI up and is not counted
                if not deadline.allows(30):
                    note(f"time budget reached after {len(overheads)} jobs")
                    break
                done_before = sum(c.method == "editMessageText" and c.params["text"].startswith("Done")
                                  for c in bot.outbox)
                trace.begin()
                started = time.perf_counter()
                message = bot.inject_text(user, f"/demo benchmark {index}")
                document = await bot.wait_for_call("sendDocument", timeout=120, where=lambda c, m=message: (
                    c.result.get("reply_to_message", {}).get("message_id") == m["message_id"]))
                sent = document.received_at  # not when this task got the loop back
                trace.mark("document", at=sent)
                await emulator.wait_for(lambda before=done_before: sum(
                    c.method == "editMessageText" and c.params["text"].startswith("Done")
                    for c in bot.outbox) > before, timeout=60)
                finished = await jobs.list_queue(courier.store.pool, user_id=user)
                assert not finished, finished
                async with courier.store.pool.acquire() as conn:
                    result = await conn.fetchval(
                        "SELECT result FROM courier_jobs WHERE user_id = $1 ORDER BY id DESC LIMIT 1", user)
                execution_ms = result["execution_ms"]
                if index and execution_ms is not None:
                    overheads.append((sent - started) * 1000 - execution_ms)
                else:
                    trace.drop()
        finally:
            await courier.stop()
            load_runner().remove_tree(data_dir)  # and, run as root, the database linked from it
    return overheads


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run")
    args = parser.parse_args()
    deadline = Deadline(args.budget)
    trace = Trace()
    with comfyui_server() as server:
        overheads = asyncio.run(measure(server.url, args.jobs, deadline, trace))
    if not overheads:
        sys.exit("no job completed")
    note(f"{len(overheads)} jobs; overhead min {min(overheads):.1f} ms, max {max(overheads):.1f} ms")
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
