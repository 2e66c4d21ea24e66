"""An allowed user's ``/help`` while strangers flood the bot: its answer time, quiet and after a flood.

Runs the real bot in a process of its own (``_bot_process.py``: python-telegram-bot against the
Bot API emulator, which answers 429 past Telegram's limits as Telegram does, and an embedded
PostgreSQL; no backend: nothing here runs a job), private, with one allowed user. Each time is
from the user's message being injected to the reply reaching the Bot API (the emulator's receipt).

- ``help_reply_s_quiet``: the median of ``--rounds`` ``/help`` on an otherwise idle bot.
- ``help_reply_s_after_200_strangers``: 200 messages from 200 strangers injected at once, then the
  ``/help``; the median of ``--rounds`` floods (fresh strangers each, so each is owed a reply).
- ``help_reply_s_after_one_stranger_200``: the same with 200 messages of one stranger.
- ``help_reply_s_flood_minus_quiet``: the slower flood's median less the quiet one (goal: under 2 s).

Each stranger is told the bot is private once (``bot/refusals.py``); before it, each message had its
reply, paced by the stranger's chat limit, and the updates waiting for them kept the bot from
fetching anyone else's (``/help``: 40.8 s after one stranger's 60 messages, about 85 s after 200).

    python benchmarks/strangers.py [--rounds 3] [--budget 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from _bot_process import bot_process
from _common import Deadline, figure, load_pack, note

FRIEND = 5001
"""The one allowed user."""
FLOOD = 200
HELP_TIMEOUT_S = 120.0


async def help_reply_s(bot, deadline: Deadline) -> float:
    """Seconds from the friend's ``/help`` to its reply at the Bot API."""
    started = time.monotonic()
    bot.inject_text(FRIEND, "/help")
    reply = await bot.wait_for_call("sendMessage", timeout=min(HELP_TIMEOUT_S, deadline.remaining()),
                                    where=lambda c: c.params.get("chat_id") == FRIEND and c.received_at > started)
    return reply.received_at - started


async def measure(rounds: int, deadline: Deadline) -> dict[str, list[float]]:
    load_pack()
    from comfyui_courier.emulator.botapi import BotApiEmulator

    times: dict[str, list[float]] = {"quiet": [], "strangers": [], "one_stranger": []}
    async with BotApiEmulator() as emulator:
        bot = emulator.add_bot()
        bot.enforce_limits()
        async with bot_process(emulator, bot, 5, allowed=str(FRIEND), stop_timeout=lambda: 10.0):
            await help_reply_s(bot, deadline)  # warms up the bot's connections and the database's plans
            next_stranger = 900_000_000
            for round_ in range(rounds):
                if not deadline.allows(2 * HELP_TIMEOUT_S):
                    note(f"time budget reached after {round_} rounds")
                    break
                times["quiet"].append(await help_reply_s(bot, deadline))
                for n in range(FLOOD):
                    bot.inject_text(next_stranger + n, f"/demo let me in {n}")
                next_stranger += FLOOD
                times["strangers"].append(await help_reply_s(bot, deadline))
                for n in range(FLOOD):
                    bot.inject_text(next_stranger, f"/demo let me in {n}")
                next_stranger += 1
                times["one_stranger"].append(await help_reply_s(bot, deadline))
                note(f"round {round_ + 1}: quiet {times['quiet'][-1]:.3f} s, after 200 strangers "
                     f"{times['strangers'][-1]:.3f} s, after one stranger's 200 {times['one_stranger'][-1]:.3f} s")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the whole run")
    args = parser.parse_args()
    times = asyncio.run(measure(args.rounds, Deadline(args.budget)))
    if not times["quiet"]:
        sys.exit("no round completed")
    quiet = statistics.median(times["quiet"])
    strangers = statistics.median(times["strangers"])
    one_stranger = statistics.median(times["one_stranger"])
    figure("help_reply_s_quiet", quiet, "s")
    figure("help_reply_s_after_200_strangers", strangers, "s")
    figure("help_reply_s_after_one_stranger_200", one_stranger, "s")
    figure("help_reply_s_flood_minus_quiet", max(strangers, one_stranger) - quiet, "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
