"""The emulator's HTTP server, its registry of bots and users, and its change notifications."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import secrets
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from . import control, guard, webchat
from .bot import EmulatedBot
from .state import StoredFile
from .wire import LOCAL_MAX_UPLOAD, MAX_UPLOAD, ApiError, error_response, ok_response, read_request

T = TypeVar("T")

_TOKEN = re.compile(r"[1-9][0-9]*:[A-Za-z0-9_-]+")
"""A well-formed token: Telegram answers 401 for an unknown one, 404 for anything else."""


class BotApiEmulator:
    """A local Telegram Bot API server for tests and demos (see the package docstring)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_upload: int | None = None,
                 local: bool = False):
        self.host = host
        self.port = port
        """The port asked for; the one picked once started."""
        self.local = local
        """As ``telegram-bot-api --local``: uploads up to 2000 MB, a file also by its path or ``file://``
        URI on this machine, and ``getFile`` gives the file's absolute path here (no 20 MB limit) for
        the bot to read from disk, not a path to download (python-telegram-bot's ``local_mode``)."""
        self.max_upload = max_upload if max_upload is not None else LOCAL_MAX_UPLOAD if local else MAX_UPLOAD
        """The largest file a bot may upload (Telegram's 50 MB, 2000 MB in local mode; lower it to test
        what is beyond)."""
        self.working_dir: Path | None = None
        """Local mode: where ``getFile`` puts the files it gives paths of (as the server's ``--dir``)."""
        self.users: dict[int, dict[str, Any]] = {}
        self.closing = False
        self._bots: dict[str, EmulatedBot] = {}
        self._bot_ids = itertools.count(7_000_000_001)
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        if self._runner is None:
            raise RuntimeError("the emulator is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """For ``Bot(base_url=...)`` and ``ApplicationBuilder().base_url(...)``."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        """For ``Bot(base_file_url=...)`` and ``ApplicationBuilder().base_file_url(...)``."""
        return f"{self.url}/file/bot"

    async def start(self) -> BotApiEmulator:
        if self._runner is not None:
            raise RuntimeError("the emulator is already started")
        app = web.Application(client_max_size=max(self.max_upload, MAX_UPLOAD) + 1024 * 1024,
                              middlewares=[guard.same_origin])
        app.router.add_route("*", "/bot{token}/{method}", self._bot_api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        app.add_subapp(control.PREFIX, control.make_app(self))
        webchat.add_routes(app)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # handler_cancellation: a client that gives up (timeout) ends its long poll or hung call here too.
        runner = web.AppRunner(app, handle_signals=False, handler_cancellation=True, shutdown_timeout=5)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        self.closing = False
        if self.local:
            self.working_dir = Path(tempfile.mkdtemp(prefix="botapi-local-"))
        return self

    async def stop(self) -> None:
        """Answers waiting long polls, drops hung calls, stops webhook delivery, closes the server."""
        if self._runner is None:
            return
        self.closing = True
        self.changed()
        for bot in self._bots.values():
            await bot.stop_delivery()
        runner, self._runner = self._runner, None
        await runner.cleanup()
        if self.working_dir is not None:
            shutil.rmtree(self.working_dir, ignore_errors=True)
            self.working_dir = None

    def local_path(self, bot: EmulatedBot, stored: StoredFile) -> str:
        """Local mode: the absolute path of ``stored`` on this machine, written there on first ask."""
        path = self.working_dir / bot.token / stored.file_path
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(stored.data)
        return str(path)

    async def __aenter__(self) -> BotApiEmulator:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    # --- registry -----------------------------------------------------------

    def add_bot(self, token: str | None = None, *, username: str | None = None,
                first_name: str = "Courier Test Bot") -> EmulatedBot:
        """Registers a bot; without ``token`` a well-formed one is made up (``bot.token``)."""
        if token is None:
            token = f"{next(self._bot_ids)}:{secrets.token_urlsafe(27)[:35]}"
        if not _TOKEN.fullmatch(token):
            raise ValueError(f"not a bot token (digits:letters): {token!r}")
        if token in self._bots:
            raise ValueError("a bot with this token exists")
        bot_id = int(token.partition(":")[0])
        user = {"id": bot_id, "is_bot": True, "first_name": first_name, "username": username or f"courier{bot_id}_bot",
                "can_join_groups": True, "can_read_all_group_messages": False, "supports_inline_queries": True,
                "can_connect_to_business": False, "has_main_web_app": False}
        bot = self._bots[token] = EmulatedBot(self, token, user)
        return bot

    def bot(self, token: str) -> EmulatedBot:
        return self._bots[token]

    @property
    def bots(self) -> list[EmulatedBot]:
        return list(self._bots.values())

    def add_user(self, user_id: int, first_name: str | None = None, *, last_name: str | None = None,
                 username: str | None = None, language_code: str | None = "en") -> dict[str, Any]:
        """Registers (or replaces) a Telegram user; users are shared by all bots, as in Telegram."""
        user = {"id": user_id, "is_bot": False, "first_name": first_name or f"User{user_id}",
                "last_name": last_name, "username": username, "language_code": language_code}
        self.users[user_id] = {key: value for key, value in user.items() if value is not None}
        return self.users[user_id]

    def user(self, user_id: int) -> dict[str, Any]:
        """The user with this id, registered with default names on first use."""
        return self.users.get(user_id) or self.add_user(user_id)

    # --- change notification ------------------------------------------------

    def changed(self) -> None:
        """Wakes every ``wait_for``; called whenever a call, update, message or webhook changes."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], T], timeout: float | None = 5.0) -> T:
        """Waits until ``predicate()`` is truthy and returns its value.

        The predicate is re-evaluated on every change, never by polling.
        :raises TimeoutError: when ``timeout`` seconds pass first (None waits for ever).
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not (result := predicate()):
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"condition not met within {timeout} s")
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except asyncio.TimeoutError:
                raise TimeoutError(f"condition not met within {timeout} s") from None
        return result

    # --- HTTP ---------------------------------------------------------------

    async def _bot_api(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        bot = self._bots.get(token)
        if bot is None:
            return error_response(ApiError(401, "Unauthorized") if _TOKEN.fullmatch(token)
                                  else ApiError(404, "Not Found"))
        try:
            args, files = await read_request(request)
        except ApiError as error:
            return error_response(error)
        call = await bot.handle(request.match_info["method"], args, files)
        return error_response(call.failure) if call.failure else ok_response(call.result, call.note)

    async def _download(self, request: web.Request) -> web.Response:
        bot = self._bots.get(request.match_info["token"])
        stored = bot.file_at(request.match_info["path"]) if bot else None
        if stored is None:
            return await self._not_found(request)
        return web.Response(body=stored.data, content_type="application/octet-stream")

    @staticmethod
    async def _not_found(request: web.Request) -> web.Response:
        return error_response(ApiError(404, "Not Found"))


def main(argv: list[str] | None = None) -> int:
    """Runs the emulator in the foreground until interrupted (Ctrl-C)."""
    parser = argparse.ArgumentParser(prog="botapi-emulator",
                                     description="Local Telegram Bot API emulator for tests and demos.")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8081, help="port to listen on; 0 picks one (default 8081)")
    parser.add_argument("--token", action="append", default=[],
                        help="bot token to accept (repeatable); one is made up when none is given")
    parser.add_argument("--local", action="store_true",
                        help="as telegram-bot-api --local: uploads up to 2000 MB, getFile gives a path here")
    args = parser.parse_args(argv)
    if not guard.is_loopback(args.host):
        parser.error(f"--host {args.host} is not a loopback address: the test API lists the bots' tokens, "
                     "so the emulator serves this machine only (reach it from elsewhere over ssh -L or -R)")
    asyncio.run(_serve(args.host, args.port, args.token, args.local))
    return 0


async def _serve(host: str, port: int, tokens: list[str], local: bool) -> None:
    async with BotApiEmulator(host, port, local=local) as emulator:
        bots = [emulator.add_bot(token) for token in tokens] or [emulator.add_bot()]
        print(f"Telegram Bot API emulator on {emulator.url}", flush=True)
        for bot in bots:
            print(f"  bot @{bot.user['username']}  token {bot.token}", flush=True)
        print(f"  web chat {emulator.url}/", flush=True)
        print(f"  Bot API {emulator.base_url}<token>/<method>, files {emulator.base_file_url}<token>/<path>\n"
              f"  test API {emulator.url}{control.PREFIX}/ (bots, users, messages, callback_queries, outbox, ...)",
              flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):  # also when started with SIGINT ignored (background jobs)
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await stop.wait()
