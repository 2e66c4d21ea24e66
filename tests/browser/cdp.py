"""Headless Chromium driven over the DevTools protocol: just what the browser tests need.

No Selenium or Playwright: Chromium is started with ``--remote-debugging-port=0`` in a fresh
profile, writes its port to ``DevToolsActivePort``, and one page is driven over a websocket
(aiohttp). ``find_chromium()`` is None when Debian's ``chromium`` is not installed.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import aiohttp

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--no-default-browser-check",
         "--disable-dev-shm-usage", "--no-proxy-server", "--window-size=1400,900",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")
START_TIMEOUT_S = 30.0


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    return None


class BrowserError(AssertionError):
    """The page did not do what the test waited for; the message says what it showed instead."""


class Chromium:
    """``async with Chromium(binary, profile_dir) as browser: page = await browser.new_page()``."""

    def __init__(self, binary: str, profile_dir: Path, *flags: str):
        """``flags``: more command-line switches, e.g. ``--host-resolver-rules=MAP evil.example 127.0.0.1``."""
        self.binary = binary
        self.profile_dir = Path(profile_dir)
        self.flags = flags
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self._http: aiohttp.ClientSession | None = None
        self._pages: list[Page] = []

    async def __aenter__(self) -> Chromium:
        self.process = self._launch()
        port_file = self.profile_dir / "DevToolsActivePort"
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.process.poll() is not None or asyncio.get_running_loop().time() > deadline:
                await self.__aexit__()
                raise BrowserError(f"Chromium did not start; see {self.profile_dir.parent / 'chromium.log'}")
            await asyncio.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        self._http = aiohttp.ClientSession(trust_env=False)
        return self

    def _launch(self) -> subprocess.Popen:
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        with open(self.profile_dir.parent / "chromium.log", "ab") as log:
            return subprocess.Popen([self.binary, *FLAGS, *self.flags, f"--user-data-dir={self.profile_dir}",
                                     "about:blank"],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)

    async def __aexit__(self, *exc: object) -> None:
        for page in self._pages:
            await page.close()
        if self._http is not None:
            await self._http.close()
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                await asyncio.to_thread(self.process.wait, 10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                await asyncio.to_thread(self.process.wait, 10)

    async def new_page(self) -> Page:
        async with self._http.put(f"http://127.0.0.1:{self.port}/json/new?about:blank") as reply:
            target = await reply.json()
        page = Page(await self._http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0))
        self._pages.append(page)
        page.start()
        for domain in ("Page", "Runtime"):
            await page.send(f"{domain}.enable")
        return page


class Page:
    """One tab: ``goto``, ``evaluate``, ``wait_for``, ``click``, ``type``, ``screenshot``; console errors kept."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.console: list[str] = []
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future] = {}
        self._events: dict[str, list[asyncio.Future]] = {}
        self._reader: asyncio.Task | None = None

    def start(self) -> None:
        self._reader = asyncio.create_task(self._read(), name="cdp-reader")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        await self.ws.close()

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data:
                future = self._replies.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
                continue
            method, params = data.get("method"), data.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning"):
                self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                self.console.append(params["exceptionDetails"].get("exception", {}).get("description", "exception"))
            for future in self._events.pop(method, []):
                if not future.done():
                    future.set_result(params)

    async def send(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        message_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._replies[message_id] = future
        await self.ws.send_json({"id": message_id, "method": method, "params": params or {}})
        reply = await asyncio.wait_for(future, timeout)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply["result"]

    async def goto(self, url: str, timeout: float = 60.0) -> None:
        loaded = asyncio.get_running_loop().create_future()
        self._events.setdefault("Page.loadEventFired", []).append(loaded)
        await self.send("Page.navigate", {"url": url})
        await asyncio.wait_for(loaded, timeout)

    async def evaluate(self, expression: str, timeout: float = 30.0):
        """The value of a JavaScript expression (promises awaited), as JSON."""
        result = await self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                      "returnByValue": True}, timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 30.0, what: str | None = None):
        """Poll until ``expression`` is truthy; returns its value."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise BrowserError(f"waited {timeout:.0f} s for {what or expression}; console: {self.console[-5:]}")
            await asyncio.sleep(0.2)

    async def click(self, selector: str) -> None:
        """A real mouse click at the middle of the element."""
        box = await self.wait_for(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return r.width && r.height ? {x: r.x + r.width / 2, y: r.y + r.height / 2} : null; })()",
            what=f"a visible {selector}")
        for kind in ("mousePressed", "mouseReleased"):
            await self.send("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"],
                                                         "button": "left", "clickCount": 1})

    async def type(self, selector: str, text: str) -> None:
        """Focus the field, clear it, and type ``text`` as keyboard input."""
        await self.click(selector)
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).select()")
        await self.send("Input.insertText", {"text": text})

    async def screenshot(self, path: Path) -> Path:
        data = await self.send("Page.captureScreenshot", {"format": "png"})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data["data"]))
        return path
