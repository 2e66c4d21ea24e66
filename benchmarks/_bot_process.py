"""A Courier in a process of its own, for the benchmarks (``bot_process`` starts one).

In production the Bot API is Telegram's, not in the bot's process; here the emulator and the
load generator run in the benchmark's process, so the bot's CPU is its own, as it would be.
Prints one JSON line once the bot is up: ``{"postgres_pid": …, "dsn": …}`` (its embedded
PostgreSQL), then runs until its stdin closes, and stops (the replies drained at Telegram's pace).
With no ComfyUI url the dispatcher runs nothing: the figures are the bot's alone. With
``$COURIER_BENCH_TRACE`` set, the bot's ``_trace.py`` marks are written to that file as it stops.

    python benchmarks/_bot_process.py <bot token> <Bot API url> <max jobs per user> <data dir> [<ComfyUI url>]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

from _common import load_pack, load_runner
from _trace import Recorder

START_TIMEOUT_S = 120
TRACE_FILE = "COURIER_BENCH_TRACE"
ALLOWED = "COURIER_BENCH_ALLOWED_USERS"
"""The bot's ``COURIER_ALLOWED_USERS`` (everyone, ``*``, unless a benchmark needs strangers)."""


async def main(token: str, api_url: str, max_jobs: str, data_dir: str, backend: str | None = None) -> int:
    load_pack()
    recorder = Recorder() if os.environ.get(TRACE_FILE) else None
    if recorder:
        recorder.install()
    from comfyui_courier.core.config import load_settings
    from comfyui_courier.runtime import Courier

    settings = load_settings(None, {"TELEGRAM_BOT_TOKEN": token, "COURIER_TELEGRAM_API_URL": api_url,
                                    "COURIER_MAX_JOBS_PER_USER": max_jobs,
                                    "COURIER_ALLOWED_USERS": os.environ.get(ALLOWED, "*")})
    courier = Courier(settings, Path(data_dir), backend)
    await courier.start()
    await courier.booted()
    if courier.health.state("dispatcher" if backend else "bot") != "ok":
        print(json.dumps({"error": courier.health_report()}), flush=True)
        await courier.stop()
        return 1
    embedded = courier.store.embedded
    print(json.dumps({"postgres_pid": embedded.pid, "dsn": embedded.dsn}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the benchmark closes our stdin
    await courier.stop()
    if recorder:
        recorder.save(os.environ[TRACE_FILE])
    return 0


@contextlib.asynccontextmanager
async def bot_process(emulator, bot, max_jobs: int, *, backend: str | None = None, stop_timeout=lambda: 60.0,
                      trace_file: Path | None = None, allowed: str = "*"):
    """Run this script for ``bot`` of ``emulator``; yields (the process, its start-up line as a dict).
    On exit its stdin closes and it gets ``stop_timeout()`` seconds to drain its replies and stop
    (then, with ``trace_file``, its trace marks are there). ``allowed``: who the bot lets in."""
    data_dir = Path(tempfile.mkdtemp(prefix="courier-bench-bot-"))
    env = {**os.environ, ALLOWED: allowed, **({TRACE_FILE: str(trace_file)} if trace_file else {})}
    process = await asyncio.create_subprocess_exec(
        sys.executable, __file__, bot.token, emulator.url, str(max_jobs), str(data_dir),
        *([backend] if backend else []), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env)
    try:
        started = json.loads(await asyncio.wait_for(process.stdout.readline(), START_TIMEOUT_S) or "{}")
        if "dsn" not in started:
            sys.exit(f"Courier did not start: {started.get('error', 'it exited')}")
        yield process, started
    finally:
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), max(10.0, stop_timeout()))
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
        load_runner().remove_tree(data_dir)  # and, run as root, the database linked from it


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:])))
