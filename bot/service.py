"""The python-telegram-bot Application inside a host event loop (ComfyUI's or our own).

Never ``run_polling`` (it owns the loop): initialize → start → our own polling
(``polling.Poller``, which loses no command) or the webhook, reversed on stop. A bad token or an
unreachable Bot API raises ``NotConnected`` (``runtime.py`` tells the console and retries), never a
crash of the host.
"""

from __future__ import annotations

import logging

from telegram import BotCommand, BotCommandScopeChat, Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import Application, ContextTypes

from ..core import i18n
from ..core.config import Secret, Settings
from ..core.health import Health
from ..core.logs import get_logger
from ..store import access as access_store
from ..store import commands, webhook_secrets
from .access import offer_ownership
from .admin import admin_menu
from .context import BotData, CourierContext
from .fleet import FleetSlots
from .handlers import ALLOWED_UPDATES, build_handlers, command_menu, on_error
from .limiter import ResultsFirstLimiter
from .outage import finished
from .polling import Poller, UpdatesRequest

log = get_logger("bot")

# httpx logs every request URL at INFO, and a Bot API URL carries the bot token.
logging.getLogger("httpx").setLevel(logging.WARNING)


def build_application(settings: Settings, store, proxy: str | None = None,
                      updates: UpdatesRequest | None = None) -> Application:
    """The bot; ``proxy`` (socks5h://...) carries all its Bot API traffic when given; getUpdates goes
    over ``updates`` (one of its own by default)."""
    api = settings.telegram_api_url.rstrip("/")
    token = settings.telegram_bot_token.reveal()
    builder = (Application.builder()
               .token(token)
               .base_url(f"{api}/bot")
               .base_file_url(f"{api}/file/bot")
               .local_mode(settings.telegram_local_mode)  # files by path: a local server reads them from disk
               .context_types(ContextTypes(context=CourierContext, bot_data=BotData))
               .rate_limiter(ResultsFirstLimiter(max_retries=3, fleet=FleetSlots(store.pool, token)))
               .concurrent_updates(True))
    builder = builder.get_updates_request(updates or UpdatesRequest(proxy))
    if proxy:
        builder = builder.proxy(proxy)
    application = builder.updater(None).build()  # polling.Poller fetches the updates
    application.bot_data.settings = settings
    application.bot_data.store = store
    for handler, group in build_handlers():
        application.add_handler(handler, group)
    application.add_error_handler(on_error)
    return application


class NotConnected(Exception):
    """The Bot API did not take the bot: ``str()`` says what and what to check (never the token);
    ``retry`` is False when waiting cannot help (Telegram rejected the token)."""

    def __init__(self, reason: str, *, retry: bool):
        super().__init__(reason)
        self.retry = retry


class BotService:
    def __init__(self, settings: Settings, store, health: Health, proxy: str | None = None):
        self.settings = settings
        self.health = health
        self._updates = UpdatesRequest(proxy)
        self.application = build_application(settings, store, proxy, self._updates)
        self.application.bot_data.publish_admin_menu = lambda admin_id: self.publish_command_menu([admin_id])
        self._started = False
        self._poller: Poller | None = None
        self.webhook_secret: Secret | None = None
        """What Telegram sends in ``X-Telegram-Bot-Api-Secret-Token`` with each webhook update; None until
        the bot registered its webhook (no update is taken then)."""

    @property
    def dispatcher(self):
        return self.application.bot_data.dispatcher

    @dispatcher.setter
    def dispatcher(self, value) -> None:
        self.application.bot_data.dispatcher = value

    async def start(self) -> None:
        """Connect to the Bot API and start taking updates; may be called again after NotConnected.

        :raises NotConnected: getMe failed (an InvalidToken's own message names the token: not told)
        """
        self.health.set("bot", "starting", "connecting to the Bot API")
        try:
            await self.application.initialize()
        except InvalidToken:
            raise NotConnected("the Bot API rejected the bot token: check TELEGRAM_BOT_TOKEN (as @BotFather "
                               "gave it), then restart", retry=False) from None
        except TelegramError as exc:
            said = str(exc).replace(self.settings.telegram_bot_token.reveal(), "***")
            raise NotConnected(f"cannot reach the Bot API at {self.settings.telegram_api_url} "
                               f"({exc.__class__.__name__}: {said}): check the network, the proxy and "
                               f"COURIER_TELEGRAM_API_URL", retry=True) from None
        await self.application.start()
        self._started = True
        await offer_ownership(self.application.bot_data.store.pool, self.settings, self.application.bot.username)
        if not self.settings.receive_updates:  # another host on the database takes the updates
            self._connected("send-only")
            return
        if not self.settings.webhook_url:
            self._poller = Poller(self.application, self._updates, self.application.bot_data.store.pool,
                                  list(ALLOWED_UPDATES), self.process_update)
            self._poller.start()
        else:
            self.webhook_secret = self.settings.webhook_secret or Secret(
                await webhook_secrets.webhook_secret(self.application.bot_data.store.pool, self.application.bot.id))
            await self.application.bot.set_webhook(self.settings.webhook_url, secret_token=self.webhook_secret.reveal(),
                                                   allowed_updates=list(ALLOWED_UPDATES))
        await self.publish_command_menu()
        self._connected("webhook" if self.settings.webhook_url else "polling")

    def _connected(self, mode: str) -> None:
        """Health ok, and one console line on every start (the first too): the bot is there."""
        self.health.set("bot", "ok", f"@{self.application.bot.username}", mode=mode)
        log.info("bot: connected to the Bot API as @%s (%s)", self.application.bot.username, mode)

    def read_update(self, payload: dict) -> Update:
        """An update POSTed by Telegram (webhook mode); raises whatever python-telegram-bot's
        ``Update.de_json`` raises on a malformed one."""
        return Update.de_json(payload, self.application.bot)

    async def process_update(self, update: Update) -> bool:
        """Run the handlers on ``update``, returning once they are done: a job it asks for is
        committed, with the update in the inbox, so a webhook answered after this loses nothing
        if the process dies first (Telegram delivers the update again). False when the handlers
        met a database outage: handle ``update`` again later (its sender was told)."""
        application = self.application
        await application.update_processor.process_update(update, application.process_update(update))
        return finished(application.bot_data, update)

    async def publish_command_menu(self, admin_ids: list[int] | None = None) -> None:
        """Telegram's command menu = the enabled commands of the table and the built-ins (setMyCommands),
        once per catalog language and once for every other language, in ``COURIER_LANGUAGE``; the same
        plus the admin commands in each admin's chat (``BotCommandScopeChat``: those of
        ``COURIER_ADMIN_USERS`` and those made in PostgreSQL). Given ``admin_ids``: only their chats'."""
        pool = self.application.bot_data.store.pool
        listed = await commands.list_commands(pool, enabled_only=True)
        admins = admin_ids if admin_ids is not None else sorted(
            {*self.settings.admin_users, *await access_store.stored_admins(pool)})
        for language_code in ("", *i18n.LANGUAGES):
            language = i18n.pick_language(language_code, self.settings.language)
            menu = command_menu(listed, language)
            if admin_ids is None:
                await self._set_menu(menu, language_code, None)
            for admin_id in admins:
                await self._set_menu(menu + admin_menu(language), language_code, BotCommandScopeChat(admin_id))

    async def _set_menu(self, menu: list[tuple[str, str]], language_code: str, scope) -> None:
        try:
            await self.application.bot.set_my_commands([BotCommand(*entry) for entry in menu][:100], scope=scope,
                                                       language_code=language_code or None)
        except TelegramError as exc:
            log.warning("could not publish the command menu for language %r (%s): %s", language_code,
                        "everyone" if scope is None else "an admin", exc)

    async def stop(self) -> None:
        self.webhook_secret = None
        if self._started:
            if self._poller is not None:
                await self._poller.stop()
            await self.application.bot_data.queue_messages.flush()
            await self.application.bot_data.refusals.close()
            await self.application.stop()
            self._started = False
        await self.application.shutdown()
