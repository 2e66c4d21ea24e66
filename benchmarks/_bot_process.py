"""A Courier with no backend in a process of its own, for ``load.py``.

In production the Bot API is Telegram's, not in the bot's process; here the emulator and the
load generator run in the benchmark's process, so the bot's CPU is its own, as it would be.
Prints one JSON line once the bot is up: ``{"postgres_pid": …, "dsn": …}`` (its embedded
PostgreSQL), then runs until its stdin closes, and stops (the replies drained at Telegram's pace).

    python benchmarks/_bot_process.py <bot token> <Bot API url> <max jobs per user> <data dir>
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from _common import load_pack


async def main(token: str, api_url: str, max_jobs: str, data_dir: str) -> int:
    load_pack()
    from comfyui_courier.config import load_settings
    from comfyui_courier.runtime import Courier

    settings = load_settings(None, {"TELEGRAM_BOT_TOKEN": token, "COURIER_TELEGRAM_API_URL": api_url,
                                    "COURIER_MAX_JOBS_PER_USER": max_jobs, "COURIER_ALLOWED_USERS": "*"})
    courier = Courier(settings, Path(data_dir), None)  # no backend: the dispatcher runs nothing
    await courier.start()
    await courier.booted()
    if courier.health.state("bot") != "ok":
        print(json.dumps({"error": courier.health_report()}), flush=True)
        await courier.stop()
        return 1
    embedded = courier.store.embedded
    print(json.dumps({"postgres_pid": embedded.pid, "dsn": embedded.dsn}), flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the benchmark closes our stdin
    await courier.stop()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:])))
