"""The anon supervisor with a real anon kept off the network (DisableNetwork 1): fast, no privnet."""

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import stem.control

from comfyui_courier.anyone.process import AnonProcess

OFFLINE = [("DisableNetwork", "1")]
PACK_ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """True while pid runs (a zombie nobody reaped yet counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


async def until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def anon(anon_binary, tmp_path):
    process = AnonProcess(anon_binary, tmp_path / "anon", options=OFFLINE)
    yield process
    await process.stop()


async def test_start_returns_at_once_and_reports_progress(anon):
    began = time.monotonic()
    await anon.start()
    assert time.monotonic() - began < 0.5
    await until(lambda: anon.controller is not None, 30, "control connection")
    await until(lambda: anon.reason.startswith("bootstrapping"), 5, "bootstrap report")
    assert anon.health() == {"state": "starting", "reason": anon.reason, "bootstrap": 0, "restarts": 0}
    await anon.reload()  # SIGNAL RELOAD is accepted and anon keeps running
    assert anon.controller is not None and anon.pid is not None


async def test_killed_anon_is_detected_and_restarted(anon):
    await anon.start()
    await until(lambda: anon.controller is not None, 30, "control connection")
    first = anon.pid
    os.kill(first, signal.SIGKILL)
    await until(lambda: anon.state == "error", 5, "death noticed")
    assert "SIGKILL" in anon.reason and "restarting" in anon.reason
    await until(lambda: anon.controller is not None and anon.pid not in (None, first), 30, "restart")
    assert anon.restarts == 1 and not alive(first)
    socks_port = anon.socks_port
    pid = anon.pid
    await anon.stop()
    assert anon.state == "off" and not alive(pid) and anon.socks_port == socks_port


async def test_anon_dies_with_its_owner_even_on_sigterm(anon_binary, tmp_path):
    """ComfyUI skips atexit on SIGTERM: the owning control connection still ends anon."""
    script = f"""
import asyncio, importlib.util, sys
spec = importlib.util.spec_from_file_location("comfyui_courier", {str(PACK_ROOT / '__init__.py')!r},
                                              submodule_search_locations=[{str(PACK_ROOT)!r}])
sys.modules["comfyui_courier"] = module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from comfyui_courier.anyone.process import AnonProcess

async def main():
    process = AnonProcess({str(anon_binary)!r}, {str(tmp_path / 'anon')!r}, options=[("DisableNetwork", "1")])
    await process.start()
    while process.controller is None:
        await asyncio.sleep(0.05)
    print(process.pid, flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""
    owner = await asyncio.create_subprocess_exec(sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE)
    try:
        pid = int(await asyncio.wait_for(owner.stdout.readline(), 30))
        assert alive(pid)
        owner.send_signal(signal.SIGTERM)
        await asyncio.wait_for(owner.wait(), 10)
        await until(lambda: not alive(pid), 10, "anon to follow its owner")
    finally:
        if owner.returncode is None:
            owner.kill()
            await owner.wait()


async def test_a_stop_right_after_a_reload_returns(anon_binary, tmp_path, monkeypatch):
    """stem's close() holds its send lock while it joins its event thread, which takes that lock for a
    RELOAD event after clearing stem's cache: subscribed to events, a stop while a reload's event was
    still being handled hung for good (seen in CI). Here clearing the cache takes a while, so that the
    stop always comes in that window."""
    clear_cache = stem.control.Controller.clear_cache
    handling = threading.Event()

    def slow_clear_cache(controller):
        if threading.current_thread().name == "Event notifier":  # stem's thread for anon's events
            handling.set()
            time.sleep(1.0)
        clear_cache(controller)

    monkeypatch.setattr(stem.control.Controller, "clear_cache", slow_clear_cache)
    process = AnonProcess(anon_binary, tmp_path / "anon", options=OFFLINE)
    await process.start()
    try:
        await until(lambda: process.controller is not None, 30, "control connection")
        await process.reload()
        with contextlib.suppress(AssertionError):  # subscribed to no event, anon sends none
            await until(handling.is_set, 2, "the reload's event handled")
    finally:
        await asyncio.wait_for(process.stop(), 20)
    assert process.state == "off"
