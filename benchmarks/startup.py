"""What the pack adds to ComfyUI's start-up: time until ready, and memory.

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/startup.py [--runs 5] [--budget 480]

Starts a real ComfyUI (``--cpu``, 127.0.0.1, scratch ``--base-directory``)
alternately without and with the pack, after one unmeasured warm-up of each
(it compiles bytecode and creates the embedded PostgreSQL). Each run measures:

- ready: from the spawn until ``GET /system_stats`` answers. The pack boots its
  services in the background, so this is what the pack costs ComfyUI itself.
- CPU time (user + system) ComfyUI has used when it is ready: steadier than the
  wall clock on a busy machine, where runs of one kind land seconds apart
  (``startup_ready_spread_ms``, the larger median absolute deviation).
- the pack's import time as ComfyUI logs it (0.1 s steps).
- RSS of the ComfyUI process (VmRSS), once the pack's services have settled.
- with the pack: spawn until ``/courier/health`` shows the database and the bot settled,
  and the PSS of the helper processes it started (embedded PostgreSQL, ...). The pack runs
  with a bot token, its bot taking updates from the Bot API emulator (a process of its own,
  started once for the whole run), so the bot's start is in every figure, as in production.

The with-pack runs share one base directory, so runs 2.. are restarts with an
existing database, as in production. Figures are medians, printed as JSON lines:
``startup_added_ms`` (goal <= 300) and ``startup_added_rss_mb`` (goal <= 60).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import (
    REPO_ROOT,
    Deadline,
    comfyui_dir_or_exit,
    cpu_seconds,
    figure,
    load_runner,
    note,
    pss_bytes,
    settle,
    write_figures,
)

GOAL_ADDED_MS = 300
GOAL_ADDED_RSS_MB = 60
START_TIMEOUT_S = 90
SETTLE_TIMEOUT_S = 30
RUN_NEEDS_S = 20  # do not begin a run with less budget left than this
MB = 2**20
BOT_TOKEN = "7000000001:startup-benchmark"


@contextlib.contextmanager
def bot_api_emulator():
    """The pack's Bot API emulator in a process of its own; yields the settings that point a bot at it."""
    process = subprocess.Popen([sys.executable, str(REPO_ROOT), "emulator", "--port", "0", "--token", BOT_TOKEN],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # its access log
    try:
        first = process.stdout.readline()  # "Telegram Bot API emulator on http://127.0.0.1:PORT"
        if "http://" not in first:
            raise SystemExit(f"the Bot API emulator did not start: {first!r}")
        yield {"TELEGRAM_BOT_TOKEN": BOT_TOKEN, "COURIER_TELEGRAM_API_URL": first.split()[-1]}
    finally:
        process.terminate()
        process.wait(timeout=10)


def one_run(runner, comfyui_dir: Path, base: Path, with_pack: bool, deadline: Deadline, bot_env: dict) -> dict:
    server = runner.ComfyUIProcess(comfyui_dir, base, with_pack=with_pack, env=bot_env if with_pack else None)
    result = {"with_pack": with_pack}
    try:
        server.start(timeout=min(START_TIMEOUT_S, deadline.remaining()))
        result["ready_ms"] = server.ready_seconds * 1000
        result["cpu_ms"] = cpu_seconds(server.pid) * 1000
        if with_pack:
            result["import_ms"] = pack_import_ms(server)
            seconds, result["database"] = settle(server, min(SETTLE_TIMEOUT_S, deadline.remaining()),
                                                 components=("database", "bot"))
            result["services_ms"] = None if seconds is None else seconds * 1000
        time.sleep(0.5)  # let both kinds of run go quiet the same way before sampling memory
        result["rss_mb"] = server.rss_bytes() / MB
        helpers = [pid for pid in server.leftover_processes() if pid != server.pid]
        result["helpers_pss_mb"] = sum(_pss_or_zero(pid) for pid in helpers) / MB
    finally:
        server.stop()
        result["leftovers"] = len(server.kill_leftovers())
    return result


def pack_import_ms(server) -> float | None:
    """The pack's import time as ComfyUI logs it ("Import times for custom nodes", 0.1 s steps)."""
    pattern = rf"^\s*([\d.]+) seconds.*: .*/custom_nodes/{re.escape(server.pack_folder_name)}$"
    match = re.search(pattern, server.log_text(), re.MULTILINE)
    return float(match.group(1)) * 1000 if match else None


def _pss_or_zero(pid: int) -> int:
    try:
        return pss_bytes(pid)
    except OSError:  # gone, or not readable
        return 0


def describe(result: dict) -> str:
    text = f"ready {result['ready_ms']:.0f} ms, cpu {result['cpu_ms']:.0f} ms, rss {result['rss_mb']:.0f} MB"
    if result["with_pack"]:
        services = result.get("services_ms")
        text += (f", database {result.get('database')} at "
                 f"{'-' if services is None else f'{services:.0f}'} ms"
                 f", helpers {result['helpers_pss_mb']:.0f} MB PSS")
    if result["leftovers"]:
        text += f", {result['leftovers']} process(es) left after Ctrl-C"
    return text


def measure_runs(runner, comfyui_dir: Path, scratch: Path, count: int, deadline: Deadline, bot_env: dict,
                 runs: dict) -> None:
    """A warm-up of each kind, then ``count`` measured runs of each, alternating, into ``runs``."""
    bases = {False: scratch / "without-pack", True: scratch / "with-pack"}
    for with_pack in (False, True):
        first = one_run(runner, comfyui_dir, bases[with_pack], with_pack, deadline, bot_env)
        note(f"warm-up {'with' if with_pack else 'without'} pack: {describe(first)}")
        if with_pack:
            figure("startup_first_run_with_pack_ms", first["ready_ms"], "ms")
            if first.get("services_ms") is not None:
                figure("pack_services_first_run_ms", first["services_ms"], "ms")
    for i in range(count):
        for with_pack in ((False, True) if i % 2 == 0 else (True, False)):  # alternate the order
            if not deadline.allows(RUN_NEEDS_S):
                break
            result = one_run(runner, comfyui_dir, bases[with_pack], with_pack, deadline, bot_env)
            runs[with_pack].append(result)
            note(f"run {i + 1} {'with' if with_pack else 'without'} pack: {describe(result)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs of each kind (default 5)")
    parser.add_argument("--budget", type=float, default=480, help="total seconds allowed (default 480)")
    parser.add_argument("--out", default=str(REPO_ROOT / "artifacts" / "benchmarks" / "startup.json"),
                        help="also write the figures here as JSON")
    args = parser.parse_args()
    comfyui_dir = comfyui_dir_or_exit()
    runner = load_runner()
    deadline = Deadline(args.budget)
    runs = {False: [], True: []}

    scratch = runner.scratch_directory("comfyui-startup-")
    with contextlib.ExitStack() as stack:
        stack.callback(runner.remove_tree, scratch)
        bot_env = stack.enter_context(bot_api_emulator())
        measure_runs(runner, comfyui_dir, scratch, args.runs, deadline, bot_env, runs)

    without, with_ = runs[False], runs[True]
    if not without or not with_:
        note("the budget ran out before one measured run of each kind")
        return 1
    if len(without) < args.runs or len(with_) < args.runs:
        note(f"budget reached: {len(without)} runs without and {len(with_)} with the pack")

    def spread(results):
        """Median absolute deviation of the ready times: how far apart runs of one kind land."""
        values = [r["ready_ms"] for r in results]
        centre = statistics.median(values)
        return statistics.median(abs(v - centre) for v in values)

    def median(results, key):
        values = [r[key] for r in results if r.get(key) is not None]
        return statistics.median(values) if values else None

    ready_without, ready_with = median(without, "ready_ms"), median(with_, "ready_ms")
    rss_without, rss_with = median(without, "rss_mb"), median(with_, "rss_mb")
    figure("startup_added_ms", ready_with - ready_without, "ms")
    figure("startup_added_rss_mb", rss_with - rss_without, "MB")
    cpu_without, cpu_with = median(without, "cpu_ms"), median(with_, "cpu_ms")
    figure("startup_added_cpu_ms", cpu_with - cpu_without, "ms")
    figure("startup_ready_spread_ms", max(spread(without), spread(with_)), "ms")
    if median(with_, "import_ms") is not None:
        figure("pack_import_ms", median(with_, "import_ms"), "ms")
    figure("startup_ready_without_pack_ms", ready_without, "ms")
    figure("startup_ready_with_pack_ms", ready_with, "ms")
    figure("startup_rss_without_pack_mb", rss_without, "MB")
    figure("startup_rss_with_pack_mb", rss_with, "MB")
    if median(with_, "services_ms") is not None:
        figure("pack_services_ready_ms", median(with_, "services_ms"), "ms")
    figure("pack_helpers_pss_mb", median(with_, "helpers_pss_mb"), "MB")
    figure("pack_leftover_processes_after_ctrl_c", max(r["leftovers"] for r in with_), "processes")
    figure("startup_runs_each", min(len(without), len(with_)), "runs")
    databases = sorted({r.get("database") for r in with_})
    if databases != ["ok"]:
        note(f"the pack's database and bot were {databases} in the measured runs (expected ok)")
    note(f"goals: startup_added_ms <= {GOAL_ADDED_MS}, startup_added_rss_mb <= {GOAL_ADDED_RSS_MB}")
    if args.out:
        write_figures(args.out)
        note(f"figures written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
