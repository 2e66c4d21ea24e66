"""Supervise one ``anon`` process: start in the background, report bootstrap, restart, stop.

We drive ``anon`` with stem directly rather than through anyone-protocol-sdk: the
SDK resolves its binary at import (``~/.anyone_protocol_sdk/bin/anon``, so the
import fails with our installed binary), its launcher blocks until bootstrap
and prints to stdout, and its ``Control`` lacks what we use (hidden services,
reload). stem is synchronous, so every call goes through ``asyncio.to_thread``.

anon never outlives its owner: it gets ``__OwningControllerProcess <our pid>``
and stem then sends ``TAKEOWNERSHIP`` on our control connection, so anon exits
as soon as that connection closes -- including when ComfyUI is killed by a
signal that skips atexit and cleanup. It runs in its own session so a Ctrl-C
in ComfyUI's terminal reaches ComfyUI (which then drops the connection), not anon.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import logging
import os
import re
import signal
import socket
import time
from pathlib import Path

import stem
import stem.control

from ..core.logs import get_logger
from .errors import AnonStartError

Options = list[tuple[str, str]]  # torrc lines; keys may repeat

log = get_logger("anyone")
# stem logs every control message at DEBUG/TRACE on a logger set to TRACE, which
# propagates into ComfyUI's console; keep only its warnings.
logging.getLogger("stem").setLevel(logging.WARNING)

BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 60.0
STABLE_RUN_S = 60.0  # a run this long resets the restart back-off
CONTROL_PORT_TIMEOUT_S = 30.0

_PHASE = re.compile(r'(\w+)=("[^"]*"|\S+)')


def render_torrc(options: Options) -> str:
    return "".join(f"{key} {value}".rstrip() + "\n" for key, value in options)


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 right now (all held open together, so distinct)."""
    held = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def parse_bootstrap_phase(reply: str) -> tuple[int, str]:
    """``GETINFO status/bootstrap-phase`` -> (percent, summary).

    e.g. ``NOTICE BOOTSTRAP PROGRESS=85 TAG=ap_conn_done SUMMARY="Connected to a relay"``.
    """
    fields = {k: v.strip('"') for k, v in _PHASE.findall(reply)}
    return int(fields.get("PROGRESS", 0)), fields.get("SUMMARY", "")


def parse_control_port_file(text: str) -> int:
    """``ControlPortWriteToFile`` content (``PORT=127.0.0.1:9051``) -> the port."""
    for line in text.splitlines():
        if line.startswith("PORT="):
            return int(line.rsplit(":", 1)[1])
    raise ValueError(f"no PORT= line in control port file: {text!r}")


def exit_reason(returncode: int, lines) -> str:
    """Why anon exited: the signal, else its last ``[err]`` line, else its last line."""
    if returncode < 0:
        return f"anon was killed by signal {signal.Signals(-returncode).name}"
    errors = [line for line in lines if "[err]" in line]
    last = (errors or list(lines) or ["no output"])[-1]
    return f"anon exited with rc {returncode}: {last.split('] ', 1)[-1].strip()}"


class AnonProcess:
    """One supervised ``anon``; ``start()`` returns at once, ``health()`` tells how it goes.

    ``options`` are extra torrc lines (hidden service, private network). The SOCKS
    port is chosen once and kept across restarts so connectors stay valid.
    """

    def __init__(self, binary: Path, data_dir: Path, *, options: Options = (), socks_port: int = 0,
                 on_change=None):
        self.binary = Path(binary)
        self.data_dir = Path(data_dir)
        self.options = list(options)
        self.socks_port = socks_port
        self.on_change = on_change
        self.state, self.reason, self.bootstrap = "off", "not started", 0
        self.restarts = 0
        self.controller: stem.control.Controller | None = None
        self.output: collections.deque[str] = collections.deque(maxlen=50)
        self._proc: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task | None = None
        self._bootstrapped = asyncio.Event()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc and self._proc.returncode is None else None

    def health(self) -> dict:
        return {"state": self.state, "reason": self.reason, "bootstrap": self.bootstrap,
                "restarts": self.restarts}

    async def start(self) -> None:
        """Launch and supervise anon in a background task; never waits for it."""
        if self._task is not None:
            return
        if not self.socks_port:
            self.socks_port = free_ports(1)[0]
        self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.data_dir.chmod(0o700)
        atexit.register(self._kill_now)
        self._task = asyncio.create_task(self._supervise(), name="courier-anon")

    async def stop(self) -> None:
        """Stop supervising and end anon (SIGTERM, then SIGKILL after 5 s)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        atexit.unregister(self._kill_now)
        self._set("off", "stopped", 0)

    async def wait_bootstrapped(self, timeout: float) -> None:
        """Wait until anon reports 100 %; raises TimeoutError with anon's last problem."""
        try:
            await asyncio.wait_for(self._bootstrapped.wait(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"anon not bootstrapped after {timeout:.0f} s "
                               f"({self.bootstrap}%, {self.reason})") from None

    async def reload(self) -> None:
        """Make anon re-read its keys (e.g. new authorized clients); no-op if not running."""
        if self.controller is not None:
            await asyncio.to_thread(self.controller.signal, stem.Signal.RELOAD)

    def torrc(self) -> str:
        return render_torrc([
            ("AgreeToTerms", "1"),  # AnyoneService starts us only when the setting says so
            ("DataDirectory", str(self.data_dir)),
            ("SocksPort", f"127.0.0.1:{self.socks_port} ExtendedErrors"),
            ("ControlPort", "auto"),
            ("ControlPortWriteToFile", str(self.data_dir / "control-port")),
            ("CookieAuthentication", "1"),
            ("__OwningControllerProcess", str(os.getpid())),
            ("Log", "notice stdout"),
            *self.options,
        ])

    def _set(self, state: str, reason: str, bootstrap: int | None = None) -> None:
        if bootstrap is not None:
            self.bootstrap = bootstrap
        if (state, reason) != (self.state, self.reason):
            self.state, self.reason = state, reason
            if self.on_change is not None:
                self.on_change(self.health())

    async def _supervise(self) -> None:
        delay = BACKOFF_MIN_S
        while True:
            began = time.monotonic()
            try:
                reason = await self._run_once()
            except (AnonStartError, OSError, stem.ControllerError) as exc:
                reason = str(exc)
            except Exception as exc:  # the supervisor itself must survive surprises
                log.exception("anon supervisor")
                reason = f"supervisor error: {exc!r}"
            if time.monotonic() - began >= STABLE_RUN_S:
                delay = BACKOFF_MIN_S
            log.warning("anon: %s; restarting in %.0f s", reason, delay)
            self._set("error", f"{reason}; restarting in {delay:.0f} s", 0)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
            self.restarts += 1

    async def _run_once(self) -> str:
        """Run anon until it exits; returns why it exited."""
        self._bootstrapped.clear()
        self._set("starting", "launching anon", 0)
        (self.data_dir / "torrc").write_text(self.torrc())
        port_file = self.data_dir / "control-port"
        port_file.unlink(missing_ok=True)
        self.output.clear()
        proc = self._proc = await asyncio.create_subprocess_exec(
            str(self.binary), "-f", str(self.data_dir / "torrc"),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        reader = asyncio.create_task(self._read_output(proc.stdout))
        exited = asyncio.create_task(proc.wait())
        try:
            self.controller = await self._connect(port_file, exited)
            while self.controller is not None and not exited.done():
                if self.bootstrap < 100:
                    reply = await asyncio.to_thread(self.controller.get_info, "status/bootstrap-phase")
                    percent, summary = parse_bootstrap_phase(reply)
                    if percent >= 100:
                        self._bootstrapped.set()
                        self._set("ok", "bootstrapped", 100)
                    else:
                        self._set("starting", f"bootstrapping: {summary}", percent)
                await asyncio.wait([exited], timeout=0.5 if self.bootstrap < 100 else None)
        except stem.SocketClosed:
            pass  # anon went away under us; its exit code tells why
        finally:
            await self._end(proc, exited)
            await reader
        return exit_reason(proc.returncode, self.output)

    async def _connect(self, port_file: Path, exited: asyncio.Task) -> stem.control.Controller | None:
        """A controller on anon's control port, or None if anon exited first."""
        deadline = time.monotonic() + CONTROL_PORT_TIMEOUT_S
        while not port_file.exists():
            if exited.done():
                return None
            if time.monotonic() > deadline:
                raise AnonStartError(f"anon opened no control port in {CONTROL_PORT_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.05)
        port = parse_control_port_file(port_file.read_text())

        def connect() -> stem.control.Controller:
            controller = stem.control.Controller.from_port("127.0.0.1", port)
            try:
                controller.authenticate()  # cookie; stem then sends TAKEOWNERSHIP
                # No events: stem subscribes to SIGNAL to reset its cache on a reload, and its close()
                # holds the send lock while it joins the thread that handles that event, which takes
                # the lock too: a stop while a reload's event was handled hung for good. Nothing here
                # reads an event (bootstrap is polled) nor relies on stem's cache.
                controller.set_caching(False)
                reply = controller.msg("SETEVENTS")
                if not reply.is_ok():
                    raise stem.ControllerError(f"anon refused to send no events: {reply}")
            except Exception:
                controller.close()
                raise
            return controller

        return await asyncio.to_thread(connect)

    async def _end(self, proc: asyncio.subprocess.Process, exited: asyncio.Task) -> None:
        controller, self.controller = self.controller, None
        if controller is not None:
            await asyncio.to_thread(controller.close)  # anon owned by this connection exits now
        if proc.returncode is None:
            proc.terminate()
            done, _ = await asyncio.wait([exited], timeout=5)
            if not done:
                proc.kill()
        await exited

    async def _read_output(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            line = raw.decode(errors="replace").rstrip()
            self.output.append(line)
            if "[err]" in line or "[warn]" in line:
                log.warning("anon: %s", line.split("] ", 1)[-1])
            else:
                log.debug("anon: %s", line)

    def _kill_now(self) -> None:
        """atexit: the loop may be gone, so signal the PID directly."""
        pid = self.pid
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
