"""The Courier services and their order: database, then bot + dispatcher, Anyone beside.

Used inside ComfyUI (host.py) and by the standalone bot (``python <pack> bot``).
``start()`` returns at once and boots in a background task, so ComfyUI's
readiness never waits for PostgreSQL, Telegram or the Anyone network.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from aiohttp import web

from .core._version import __version__
from .core.config import CONFIG_FILE_NAME, Settings, SettingsError, load_settings
from .core.health import Health
from .core.logs import get_logger
from .jobs.editor_proof import EditorGate

log = get_logger("runtime")

COMPONENTS = ("database", "bot", "dispatcher", "anyone")
ANYONE_READY_TIMEOUT_S = 300.0
BOT_RETRY_FIRST_S = 2.0
BOT_RETRY_MAX_S = 60.0


class Courier:
    def __init__(self, settings: Settings | None, data_dir: Path, local_backend: str | None,
                 settings_error: str | None = None, listen: str | None = None):
        self.settings = settings
        self.data_dir = data_dir
        self.local_backend = local_backend
        self.listen = listen
        self.health = Health(*COMPONENTS)
        self.store = None
        self.bot = None
        self.sink = None  # jobs.ports.ChatSink over the bot: how jobs reach their chats
        self.dispatcher = None
        self.retention = None
        self.anyone = None
        self.editor_gate = EditorGate(settings.admin_token.reveal() if settings is not None else "")
        self._boot_task: asyncio.Task | None = None
        self._bot_retry: asyncio.Task | None = None
        if settings_error:
            for name in COMPONENTS:
                self.health.set(name, "error", settings_error)

    @classmethod
    def for_comfyui(cls, user_dir: Path, local_backend: str, listen: str) -> Courier:
        """Settings from the environment over <user_dir>/courier.toml; a bad file is a health error."""
        try:
            settings = load_settings(user_dir / CONFIG_FILE_NAME)
        except SettingsError as exc:
            log.error("off: %s", exc)
            return cls(None, user_dir / "courier", local_backend, settings_error=str(exc))
        data_dir = Path(settings.data_dir) if settings.data_dir else user_dir / "courier"
        return cls(settings, data_dir, local_backend, listen=listen)

    def backends(self) -> list[str]:
        return list(self.settings.backends) or ([self.local_backend] if self.local_backend else [])

    async def start(self) -> None:
        if self.settings is None or self._boot_task is not None:
            return
        self._boot_task = asyncio.create_task(self._boot(), name="courier-boot")

    async def booted(self) -> None:
        """Wait until the boot task has finished (whatever each service's outcome)."""
        if self._boot_task is not None:
            await asyncio.shield(self._boot_task)

    async def _boot(self) -> None:
        from .store import Store, StoreError

        settings = self.settings
        if settings.anyone_enabled:
            await self._start_anyone()
        else:
            self.health.set("anyone", "off", "COURIER_ANYONE is not enabled")
        self.health.set("database", "starting", "opening PostgreSQL")
        try:
            self.store = await Store.open(settings, self.data_dir)
        except StoreError as exc:
            log.error("database: %s", exc)
            self.health.set("database", "error", str(exc))
            return
        self.store.supervise(lambda state, reason: self.health.set("database", state, reason))
        embedded = self.store.embedded
        self.health.set("database", "ok", f"embedded PostgreSQL in {embedded.pgdata}" if embedded is not None
                        else "external PostgreSQL")
        from .jobs.seed import seed_commands

        await seed_commands(self.store)
        if not settings.telegram_bot_token:
            self.health.set("bot", "off", "TELEGRAM_BOT_TOKEN is not set")
            self.health.set("dispatcher", "off", "no bot")
            return
        await self._start_bot()

    async def _start_bot(self) -> None:
        """The bot, then the dispatcher. When the Bot API (or Anyone, when it carries the bot's traffic)
        is not there yet, the console is told once and a task of its own tries again, every
        ``BOT_RETRY_FIRST_S`` doubling up to ``BOT_RETRY_MAX_S``, until it is. A rejected token is
        not tried again: the token is read at start, so only a restart can bring a good one."""
        from .bot.service import NotConnected

        try:
            await self._connect_bot()
        except NotConnected as exc:
            log.error("bot: %s%s", exc, f" (trying again, every {BOT_RETRY_FIRST_S:g} to {BOT_RETRY_MAX_S:g} s)"
                      if exc.retry else " (not tried again)")
            self._bot_waits(exc, BOT_RETRY_FIRST_S, attempts=1)
            if exc.retry:
                self._bot_retry = asyncio.create_task(self._retry_bot(str(exc)), name="courier-bot-retry")
            return
        await self._start_dispatcher()

    async def _retry_bot(self, told: str) -> None:
        from .bot.service import NotConnected

        delay = BOT_RETRY_FIRST_S
        for attempt in itertools.count(2):
            await asyncio.sleep(delay)
            delay = min(delay * 2, BOT_RETRY_MAX_S)
            try:
                await self._connect_bot()
            except NotConnected as exc:
                if str(exc) != told:  # one line per reason, not one per try
                    told = str(exc)
                    log.error("bot: %s%s", exc, " (still trying)" if exc.retry else " (not tried again)")
                self._bot_waits(exc, delay, attempts=attempt)
                if not exc.retry:
                    return
                continue
            try:
                await self._start_dispatcher()
            except Exception:
                log.exception("starting the dispatcher failed")
                self.health.set("dispatcher", "error", "failed to start; see the console")
            return

    def _bot_waits(self, exc, delay: float, attempts: int) -> None:
        if exc.retry:
            self.health.set("bot", "error", f"{exc}; trying again in {delay:g} s", attempts=attempts)
        else:
            self.health.set("bot", "error", str(exc), attempts=attempts)
        self.health.set("dispatcher", "off", "waiting for the bot")

    async def _connect_bot(self) -> None:
        """:raises NotConnected: the Bot API, or Anyone before it, is not there (yet)"""
        from .bot.service import BotService
        from .bot.sink import TelegramSink

        if self.bot is None:
            self.bot = BotService(self.settings, self.store, self.health, proxy=await self._telegram_proxy())
            self.sink = TelegramSink(self.bot.application.bot, self.settings.progress_interval_s,
                                     self.bot.application.bot_data.queue_messages)
        await self.bot.start()

    async def _telegram_proxy(self) -> str | None:
        """The bot's proxy when its traffic must go through Anyone (never a direct connection instead).

        :raises NotConnected: our own anon has not bootstrapped (retried), or no proxy can be used
        """
        if not self.settings.proxy_telegram:
            return None
        from .anyone.errors import AnyoneError
        from .anyone.transport import telegram_proxy_url
        from .bot.service import NotConnected

        if self.anyone is not None and not self.settings.anyone_socks_url:
            self.health.set("bot", "starting", "waiting for Anyone to bootstrap: Telegram traffic goes through it")
            try:
                await self.anyone.wait_ready(ANYONE_READY_TIMEOUT_S)
            except (AnyoneError, asyncio.TimeoutError) as exc:
                raise NotConnected(f"Telegram traffic must go through Anyone, which is not ready yet: "
                                   f"{exc or 'no bootstrap in time'}", retry=True) from None
        try:
            return telegram_proxy_url(self.settings, self.anyone.socks_url if self.anyone else None)
        except AnyoneError as exc:
            raise NotConnected(f"Telegram traffic must go through Anyone: {exc}", retry=False) from None

    async def _start_dispatcher(self) -> None:
        from .anyone.hidden_service import CREDENTIALS, bot_credentials
        from .jobs.dispatcher import Dispatcher

        self.dispatcher = Dispatcher(self.settings, self.store, self.sink, self.backends(), self.health,
                                     anyone=self.anyone,
                                     credentials=bot_credentials(self.data_dir / "anyone" / CREDENTIALS))
        self.bot.dispatcher = self.dispatcher
        await self.dispatcher.start()
        from .jobs.retention import Retention

        self.retention = Retention(self.store.pool, self.dispatcher.clients, self.settings.retention_days)
        self.retention.start()

    async def _start_anyone(self) -> None:
        from .anyone import AnyoneService
        from .jobs.file_inputs import refusal
        from .jobs.seed import sendable_node_types

        async def node_types():  # this host's stored commands, once the database is open
            return await sendable_node_types(self.store.pool if self.store is not None else None)

        self.anyone = AnyoneService(self.settings, self.data_dir, self.local_backend, self.health,
                                    listen=self.listen, node_types=node_types, graph_check=refusal)
        await self.anyone.start()

    async def stop(self) -> None:
        for task in (self._boot_task, self._bot_retry):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        stops = [s.stop for s in (self.retention, self.dispatcher, self.bot, self.anyone) if s is not None]
        for stop in stops + ([self.store.close] if self.store is not None else []):
            try:
                await stop()
            except Exception:  # teardown goes on with the other services
                log.exception("stopping %s failed", stop.__self__.__class__.__name__)

    def health_report(self) -> dict:
        return {"version": __version__, "components": self.health.report()}

    def bot_reason(self) -> str | None:
        """Why the bot is not running, or None when it is."""
        return None if self.bot is not None else self.health.report()["bot"]["reason"]

    async def send_from_editor(self, approval, paths: list[str]) -> str | None:
        """Send the files of an editor's approved Telegram Output (``editor_gate``'s ``Approval``) to its
        chat; None when sent, else why nothing was. Runs on the loop the bot and the database live on."""
        from .bot.editor_sends import send_approved

        return await send_approved(self.bot.application.bot, self.store.pool, self.settings, approval, paths)

    def takes_files_of(self, prompt_id: str) -> bool:
        """Whether a job of this host follows ``prompt_id`` and takes its files in memory (``hand_over``)."""
        return self.dispatcher is not None and self.dispatcher.handoff.expects(prompt_id)

    def hand_over(self, prompt_id: str, node_id: str, files: list[bytes]) -> bool:
        """Give the files a node of ``prompt_id`` saved to the job that follows it; False if none took them."""
        return self.dispatcher is not None and self.dispatcher.handoff.hand_over(prompt_id, node_id, files)


COURIER = web.AppKey("courier", Courier)
