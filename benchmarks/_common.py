"""Shared by the benchmarks: figures as JSON lines, a deadline, a real ComfyUI.

A figure is one line on stdout, ``{"figure": name, "value": v, "unit": u}``, with
``"partial": true`` when the part that measured it ran out of its time (``OutOfTime``)
before it measured all it meant to; everything else a benchmark says goes to stderr. ``ComfyUIProcess`` is the
runner the integration tests use (tests/fixtures/comfyui.py), imported by path
because the pack's root is not an importable package name.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Iterable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_RUNNER_PATH = REPO_ROOT / "tests" / "fixtures" / "comfyui.py"

FIGURES: list[dict] = []
WAIT_POLL_S = 0.02


class OutOfTime(Exception):
    """A part of a benchmark ran out of its time; what it measured so far is still printed, as partial."""


def figure(name: str, value, unit: str, *, partial: bool = False) -> dict:
    """Print one figure as a JSON line (and keep it for ``write_figures``)."""
    if isinstance(value, float):
        value = round(value, 3)
    line = {"figure": name, "value": value, "unit": unit} | ({"partial": True} if partial else {})
    FIGURES.append(line)
    print(json.dumps(line), flush=True)
    return line


def median_figure(name: str, values: list[float], wanted: int, unit: str) -> dict | None:
    """The median of ``values`` as figure ``name``, partial (and said) when fewer than ``wanted`` were
    measured before the budget ran out; none, and said, when there is not one."""
    if not values:
        note(f"{name}: the budget ran out before the first measurement; no figure")
        return None
    if len(values) < wanted:
        note(f"{name}: the budget ran out after {len(values)} of {wanted} measurements; the figure is partial")
    return figure(name, statistics.median(values), unit, partial=len(values) < wanted)


async def wait_until(probe, what: str, deadline: Deadline, timeout: float = 180.0):
    """``await probe()`` until it is truthy.

    :raises OutOfTime: the run's budget or ``timeout`` is spent (the caller prints what it has)
    """
    end = time.monotonic() + min(timeout, deadline.remaining())
    while not (value := await probe()):
        if time.monotonic() > end:
            raise OutOfTime(f"gave up waiting for {what}")
        await asyncio.sleep(WAIT_POLL_S)
    return value


async def ended_job(db, user: int, what: str, deadline: Deadline, timeout: float):
    """``user``'s newest job row once it has ended (neither queued nor running): its ``result`` is final
    then, whichever message said "Done" (the result's caption, or the status message's text) and when.

    :raises OutOfTime: not within ``timeout`` or the run's budget
    """
    async def ended():
        row = await db.fetchrow("SELECT status, result FROM courier_jobs WHERE user_id = $1 ORDER BY id DESC LIMIT 1",
                                user)
        return row if row is not None and row["status"] not in ("queued", "running") else None

    return await wait_until(ended, what, deadline, timeout=timeout)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


MESSAGE_METHODS = ("send", "edit", "delete", "copy", "forward")
"""What Telegram's limits count: the methods that post, change or remove a message."""


def is_message(method: str) -> bool:
    """Whether a Bot API method counts against Telegram's limits (``sendChatAction`` does not)."""
    method = method.lower()
    return method.startswith(MESSAGE_METHODS) and method != "sendchataction"


def is_done(call) -> bool:
    """Whether an emulator call is a job's last word, "Done in N s", as a message's text or a file's
    caption (English)."""
    return str(call.params.get("text") or call.params.get("caption") or "").startswith("Done in")


def max_in_window(times: Iterable[float], window: float) -> int:
    """The most of ``times`` (seconds) in any half-open span ``[t, t + window)``, sliding."""
    ordered = sorted(times)
    return max((bisect.bisect_left(ordered, start + window, lo=index) - index
                for index, start in enumerate(ordered)), default=0)


def note(message: str) -> None:
    """Progress and remarks, on stderr so stdout stays machine-readable."""
    print(message, file=sys.stderr, flush=True)


def write_figures(path) -> None:
    """Write every figure printed so far to ``path`` as one JSON list."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(FIGURES, indent=2) + "\n")


class Deadline:
    """A wall-clock budget for the whole benchmark."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def expired(self) -> bool:
        return self.remaining() <= 0

    def allows(self, seconds: float) -> bool:
        """Whether a step expected to take ``seconds`` still fits."""
        return self.remaining() >= seconds


def comfyui_dir_or_exit() -> Path:
    """$COMFYUI_DIR, or exit 2 with a message saying what is missing."""
    value = os.environ.get("COMFYUI_DIR")
    if not value:
        sys.exit("COMFYUI_DIR is not set: point it at a ComfyUI checkout "
                 "(its .venv/bin/python, or $COMFYUI_PYTHON, runs it)")
    path = Path(value)
    if not (path / "main.py").is_file():
        sys.exit(f"COMFYUI_DIR={value} has no main.py")
    return path


@contextlib.contextmanager
def comfyui_server():
    """A started ComfyUI of $COMFYUI_DIR in a scratch folder; stopped and the folder removed on exit."""
    comfyui_dir = comfyui_dir_or_exit()
    runner = load_runner()
    scratch = runner.scratch_directory()
    server = runner.ComfyUIProcess(comfyui_dir, scratch)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        runner.remove_tree(scratch)


@contextlib.asynccontextmanager
async def booted_courier(emulator, bot, data_dir: Path, backend_url: str | None, **env: str):
    """A Courier (``load_pack`` first) with its bot on ``emulator``'s ``bot`` and ``env`` as its settings
    (``COURIER_…`` names), booted; the benchmark exits if its dispatcher did not start. Stopped after."""
    from comfyui_courier.core.config import load_settings
    from comfyui_courier.runtime import Courier

    settings = load_settings(None, {"TELEGRAM_BOT_TOKEN": bot.token, "COURIER_TELEGRAM_API_URL": emulator.url, **env})
    courier = Courier(settings, data_dir, backend_url)
    await courier.start()
    try:
        await courier.booted()
        if courier.health.state("dispatcher") != "ok":
            sys.exit(f"Courier did not start: {courier.health_report()}")
        yield courier
    finally:
        await courier.stop()


def load_pack():
    """The pack as package ``comfyui_courier``, loaded by path as ComfyUI and the tests do."""
    if "comfyui_courier" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "comfyui_courier", REPO_ROOT / "__init__.py", submodule_search_locations=[str(REPO_ROOT)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["comfyui_courier"] = module
        spec.loader.exec_module(module)
    return sys.modules["comfyui_courier"]


def load_runner():
    """The module tests/fixtures/comfyui.py (``ComfyUIProcess`` and helpers)."""
    name = "courier_benchmarks_comfyui_runner"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _RUNNER_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def pss_bytes(pid: int) -> int:
    """Proportional set size (shared pages split among sharers), from smaps_rollup."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far, all threads (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def settle(server, timeout: float, components=("database",)) -> tuple[float | None, str]:
    """Wait until each of the pack's ``components`` is ok or error; (seconds since spawn, the
    worst state: error, else ok)."""
    deadline = time.monotonic() + timeout
    state = "unknown"
    while time.monotonic() < deadline:
        with contextlib.suppress(AssertionError, OSError, KeyError, ValueError):
            report = server.get_json("/courier/health", timeout=2)["components"]
            states = {report[name]["state"] for name in components}
            state = "error" if "error" in states else states.pop() if len(states) == 1 else "starting"
        if state in ("ok", "error"):
            return time.monotonic() - server.started_at, state
        time.sleep(0.05)
    return None, state
