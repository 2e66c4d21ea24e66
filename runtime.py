"""The Courier services and their order: database, then bot + dispatcher, Anyone beside.

Used inside ComfyUI (host.py) and by the standalone bot (``python <pack> bot``).
``start()`` returns at once and boots in a background task, so ComfyUI's
readiness never waits for PostgreSQL, Telegram or the Anyone network.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from ._version import __version__
from .config import CONFIG_FILE_NAME, Settings, SettingsError, load_settings
from .health import Health
from .logs import get_logger

log = get_logger("runtime")

COMPONENTS = ("database", "bot", "dispatcher", "anyone")
ANYONE_READY_TIMEOUT_S = 300.0


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
        self._boot_task: asyncio.Task | None = None
        if settings_error:
            for name in COMPONENTS:
                self.health.set(name, "error", settings_error)

    @classmethod
    def for_comfyui(cls, user_dir: Path, local_backend: str, listen: str) -> "Courier":
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
        from .bot.service import BotService
        from .bot.sink import TelegramSink
        from .jobs.dispatcher import Dispatcher

        proxy = None
        if self.settings.proxy_telegram:
            from .anyone.errors import AnyoneError
            from .anyone.transport import telegram_proxy_url

            try:
                if self.anyone is not None and not self.settings.anyone_socks_url:
                    await self.anyone.wait_ready(ANYONE_READY_TIMEOUT_S)
                proxy = telegram_proxy_url(self.settings, self.anyone.socks_url if self.anyone else None)
            except (AnyoneError, asyncio.TimeoutError) as exc:  # never fall back to a direct connection
                self.health.set("bot", "error", f"Telegram traffic must go through Anyone, which is not ready: "
                                                f"{exc or 'no bootstrap in time'}")
                return
        self.bot = BotService(self.settings, self.store, self.health, proxy=proxy)
        self.sink = TelegramSink(self.bot.application.bot, self.settings.progress_interval_s,
                                 self.bot.application.bot_data.queued_replies)
        if not await self.bot.start():
            return
        from .anyone.hidden_service import CREDENTIALS, bot_credentials

        self.dispatcher = Dispatcher(self.settings, self.store, self.sink, self.backends(), self.health,
                                     anyone=self.anyone,
                                     credentials=bot_credentials(self.data_dir / "anyone" / CREDENTIALS))
        self.bot.dispatcher = self.dispatcher
        await self.dispatcher.start()
        from .retention import Retention

        self.retention = Retention(self.store.pool, self.dispatcher.clients, self.settings.retention_days)
        self.retention.start()

    async def _start_anyone(self) -> None:
        from .anyone import AnyoneService
        from .jobs.seed import sendable_node_types

        async def node_types():  # this host's stored commands, once the database is open
            return await sendable_node_types(self.store.pool if self.store is not None else None)

        self.anyone = AnyoneService(self.settings, self.data_dir, self.local_backend, self.health,
                                    listen=self.listen, node_types=node_types)
        await self.anyone.start()

    async def stop(self) -> None:
        if self._boot_task is not None and not self._boot_task.done():
            self._boot_task.cancel()
            await asyncio.gather(self._boot_task, return_exceptions=True)
        stops = [s.stop for s in (self.retention, self.dispatcher, self.bot, self.anyone) if s is not None]
        for stop in stops + ([self.store.close] if self.store is not None else []):
            try:
                await stop()
            except Exception:  # teardown goes on with the other services
                log.exception("stopping %s failed", stop.__self__.__class__.__name__)

    def health_report(self) -> dict:
        return {"version": __version__, "components": self.health.report()}


COURIER = web.AppKey("courier", Courier)
