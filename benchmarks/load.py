"""Ingest under load: Telegram updates → job rows committed, with the replies left to drain.

Runs the real bot (python-telegram-bot against the Bot API emulator) on an embedded
PostgreSQL with no ComfyUI backend configured, so the dispatcher claims nothing and the
figures are ingest alone. ``--chats`` simulated chats send ``--commands`` ``/demo``
commands in one burst (the per-user cap raised for the run), after a warm-up of ``WARM_UP``
commands from other chats, committed before the burst and not counted. A job row counts as
committed when its NOTIFY (sent at commit) reaches a listener of ours.

- ``ingest_updates_per_s``: job rows committed ÷ (last commit − first command injected)
- ``enqueue_p99_ms``: update received by the bot (the emulator answers the getUpdates that
  carries it) → its job row committed, p99
- ``injected_to_commit_p99_ms``: command injected → job row committed, p99: with the whole
  burst injected at once this is the time to drain the burst, waiting in getUpdates included
- ``lost_jobs``: commands without a job row
- ``reply_drain_s``: the last job row committed → the bot's last message request (its replies
  drain at Telegram's pace after ingest: the bot stops only once they are out), and
  ``replies_per_command``: the bot's message requests over the burst ÷ commands
- where the time goes, per command over the ingest window: ``ingest_bot_cpu_ms`` (the bot's
  process), ``ingest_cpu_wait_ms`` (the bot runnable but waiting for a CPU: the machine's other
  load), ``ingest_postgres_cpu_ms`` (the embedded server's processes) and
  ``ingest_emulator_cpu_ms`` (this process: the Bot API emulator and the load generator), from /proc

The bot runs in a process of its own (``_bot_process.py``), as in production, where the Bot API
is Telegram's: the emulator's and the load generator's work is not the bot's.

Each part of the load run is one function returning its figures (``ingest`` here; the backlog,
fairness and scale-out runs join it the same way).

    python benchmarks/load.py [--chats 1000] [--commands 5000] [--budget 900]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

from _bot_process import bot_process
from _common import Deadline, figure, is_message, load_pack, note, percentile

INGEST_RATE_GUESS = 200.0
"""Commands per second assumed when sizing a run to the budget (under today's 700-1,000, pessimistic)."""
DRAIN_RATE = 30.0
"""Replies per second once ingest is done: AIORateLimiter's overall limit, paid on the way out."""
WARM_UP = 20
"""Commands sent and committed before the measured burst, each from a chat of its own."""
CHAT_BASE, WARM_UP_CHAT = 1_000_000, 900_000


class CpuMeter:
    """CPU seconds since it was made (Linux /proc): the bot process's, its wait for a CPU,
    PostgreSQL's, and this process's (the emulator and the load generator)."""

    def __init__(self, bot_pid: int, postgres_pid: int):
        self.bot_pid = bot_pid
        self.postgres_pid = postgres_pid
        self.start = self.read()

    def read(self) -> tuple[float, float, float, float]:
        with open(f"/proc/{self.bot_pid}/schedstat") as stat:
            waited = int(stat.read().split()[1]) / 1e9
        bot = sum(self._ticks(self.bot_pid)[:2]) / os.sysconf("SC_CLK_TCK")
        return bot, waited, self._postgres(), time.process_time()

    def since_start(self) -> dict[str, float]:
        now = self.read()
        return dict(zip(("bot", "wait", "postgres", "emulator"),
                        (b - a for a, b in zip(self.start, now, strict=True)), strict=True))

    @staticmethod
    def _ticks(pid: int | str) -> tuple[int, int, int]:
        """(utime, stime, parent pid) of ``pid``."""
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return int(fields[11]), int(fields[12]), int(fields[1])

    def _postgres(self) -> float:
        """The postmaster's and its children's CPU seconds (children that exited are not counted)."""
        ticks = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                user, system, parent = self._ticks(pid)
            except OSError:
                continue
            if int(pid) == self.postgres_pid or parent == self.postgres_pid:
                ticks += user + system
        return ticks / os.sysconf("SC_CLK_TCK")


async def ingest(chats: int, commands: int, deadline: Deadline) -> list[tuple[str, float, str]]:
    """The ingest figures: ``commands`` /demo commands from ``chats`` chats in one burst."""
    result = await burst(chats, commands, deadline)
    note(f"{chats} chats, {commands} commands: {result['rows']} job rows in {result['seconds']:.1f} s; "
         f"{len(result['latencies'])} with their getUpdates delivery seen")
    cpu = result["cpu"]
    return [*ingest_figures(result),
            ("lost_jobs", result["lost"], "jobs"),
            ("load_commands", commands, "commands"),
            ("reply_drain_s", result["drain_s"], "s"),
            ("replies_per_command", result["replies"] / commands, "requests"),
            *((f"ingest_{name}_ms", seconds * 1000 / commands, "ms/command")
              for name, seconds in (("bot_cpu", cpu["bot"]), ("cpu_wait", cpu["wait"]),
                                    ("postgres_cpu", cpu["postgres"]), ("emulator_cpu", cpu["emulator"])))]


def ingest_figures(result: dict, suffix: str = "") -> list[tuple[str, float, str]]:
    """The rate and the commit latencies of a ``burst``."""
    latencies = result["latencies"]
    if not latencies:
        note(f"ingest{suffix}: no job row committed: no ingest figures")
        return []
    return [(f"ingest_updates_per_s{suffix}", result["rows"] / result["seconds"], "jobs/s"),
            (f"enqueue_p99_ms{suffix}", percentile(latencies, 99), "ms"),
            (f"enqueue_median_ms{suffix}", statistics.median(latencies), "ms"),
            (f"injected_to_commit_p99_ms{suffix}", percentile(result["from_injection"], 99), "ms")]


async def burst(chats: int, commands: int, deadline: Deadline, *, backend: str | None = None,
                drain_reserve_s: float | None = None, before_stop=None) -> dict:
    """``commands`` /demo commands from ``chats`` chats at once, to a bot of its own (with ``backend``,
    the jobs run there meanwhile), after a warm-up of ``WARM_UP`` commands from other chats. Returns
    the job rows committed, per command its injection, message id, job id, getUpdates delivery and commit times, the CPU
    used over the burst, and the emulated bot (``calls``: every request, the drain included). The
    commits are waited for until ``drain_reserve_s`` of ``deadline`` is left (by default the time
    the replies take at Telegram's overall limit), the bot's drain for the rest (``before_stop(emulator,
    bot)``, if given, is awaited before the bot is told to stop)."""
    load_pack()
    from comfyui_courier.emulator.botapi import BotApiEmulator
    from comfyui_courier.store.jobs import CHANNEL
    from comfyui_courier.store.pool import connect

    per_chat = -(-commands // chats)
    async with BotApiEmulator() as emulator:
        bot = emulator.add_bot()
        committed: dict[int, float] = {}
        async with bot_process(emulator, bot, max(per_chat, WARM_UP), backend=backend,
                               stop_timeout=deadline.remaining) as (process, started):
            listener = await connect(started["dsn"])
            try:
                await listener.add_listener(
                    CHANNEL, lambda _c, _p, _ch, payload: committed.setdefault(int(payload), time.perf_counter()))
                await warm_up(emulator, bot, committed, deadline)
                warm = len(committed)
                injected: list[float] = []
                message_ids: list[int] = []
                received = watch_deliveries(emulator, bot)
                meter = CpuMeter(process.pid, started["postgres_pid"])
                for index in range(commands):
                    injected.append(time.perf_counter())
                    message_ids.append(bot.inject_text(CHAT_BASE + index % chats, f"/demo load {index}")["message_id"])
                    if index % 100 == 99:
                        await asyncio.sleep(0)  # let the bot poll meanwhile, as a real burst would
                reserve = commands / DRAIN_RATE + 30 if drain_reserve_s is None else drain_reserve_s
                with_time = max(5.0, deadline.remaining() - reserve)
                try:
                    await emulator.wait_for(lambda: len(committed) >= warm + commands, timeout=with_time)
                except TimeoutError:
                    note(f"only {len(committed) - warm} of {commands} jobs committed in time")
                cpu = meter.since_start()
                rows = await listener.fetch("SELECT id, params->>'prompt' AS prompt FROM courier_jobs "
                                            "WHERE params->>'prompt' LIKE 'load %'")
                if before_stop is not None:
                    await before_stop(emulator, bot)
            finally:
                await listener.close()
            note("ingest measured; stopping (after the replies drain at Telegram's pace)")
    job_ids = {int(row["prompt"].split()[-1]): row["id"] for row in rows}
    indexed = {index: committed[job_id] for index, job_id in job_ids.items() if job_id in committed}
    first, last = injected[0], max(indexed.values(), default=injected[0])
    replies = [call.received_at for call in bot.calls if is_message(call.method) and call.received_at >= first]
    return {"rows": len(rows), "seconds": last - first, "injected": injected, "message_ids": message_ids,
            "committed": indexed, "job_ids": job_ids,
            "latencies": [(at - received[index]) * 1000 for index, at in indexed.items() if index in received],
            "from_injection": [(at - injected[index]) * 1000 for index, at in indexed.items()],
            "lost": commands - len({row["prompt"] for row in rows}), "cpu": cpu, "bot": bot,
            "replies": len(replies), "drain_s": max(replies, default=last) - last}


async def warm_up(emulator, bot, committed: dict, deadline: Deadline) -> None:
    """``WARM_UP`` commands from chats of their own, until their jobs are committed: the first
    commands pay for the bot's and PostgreSQL's caches, not what a burst costs."""
    for index in range(WARM_UP):
        bot.inject_text(WARM_UP_CHAT + index, f"/demo warm {index}")
    try:
        await emulator.wait_for(lambda: len(committed) >= WARM_UP, timeout=min(60.0, deadline.remaining()))
    except TimeoutError:
        note(f"only {len(committed)} of {WARM_UP} warm-up jobs committed")


def watch_deliveries(emulator, bot) -> dict[int, float]:
    """When each command reached the bot: the emulator's answer to the getUpdates carrying it.

    Hooks the emulator's change notification (called as every call starts and ends).
    """
    received: dict[int, float] = {}
    seen, polls, changed = 0, [], emulator.changed

    def on_change() -> None:
        nonlocal seen
        changed()
        polls.extend(c for c in bot.calls[seen:] if c.method == "getUpdates")
        seen = len(bot.calls)
        for call in [c for c in polls if c.status is not None]:
            polls.remove(call)
            now = time.perf_counter()
            for update in call.result or []:
                text = update.get("message", {}).get("text", "")
                if text.startswith("/demo load "):
                    received.setdefault(int(text.split()[-1]), now)

    emulator.changed = on_change
    return received


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chats", type=int, default=1000)
    parser.add_argument("--commands", type=int, default=5000)
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for the whole run")
    args = parser.parse_args()
    deadline = Deadline(args.budget)
    chats, commands = args.chats, args.commands
    fits = int((args.budget - 60) / (1 / INGEST_RATE_GUESS + 1 / DRAIN_RATE))
    if commands > fits:
        scale = max(fits, 10) / commands
        chats, commands = max(1, int(chats * scale)), max(10, int(commands * scale))
        note(f"scaled down to {chats} chats and {commands} commands to fit --budget {args.budget:.0f} s")
    for name, value, unit in asyncio.run(ingest(chats, commands, deadline)):
        figure(name, value, unit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
