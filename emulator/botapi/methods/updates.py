"""Bot API methods: the updates the bot takes, by long poll (getUpdates) or webhook
(setWebhook, deleteWebhook, getWebhookInfo); the delivery itself is ``delivery``'s."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..calls import Call, Verbs
from ..delivery import Webhook
from ..params import clamp, integer
from ..wire import ApiError, bad_request

if TYPE_CHECKING:
    from ..bot import EmulatedBot

verbs = Verbs()
LONG_POLL_MAX = 50


@verbs("getUpdates")
async def _get_updates(bot: EmulatedBot, call: Call) -> list[dict[str, Any]]:
    if bot.webhook is not None:
        raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active; "
                            "use deleteWebhook to delete the webhook first")
    params = call.params
    offset = integer(params, "offset")
    limit = clamp(integer(params, "limit", 100), 1, 100)
    timeout = clamp(integer(params, "timeout"), 0, LONG_POLL_MAX)
    if isinstance(params.get("allowed_updates"), list):
        bot.allowed_updates = params["allowed_updates"]
    bot.terminate_poll("Conflict: terminated by other getUpdates request; "
                       "make sure that only one bot instance is running")
    if offset < 0:
        del bot.updates[:max(0, len(bot.updates) + offset)]
    elif offset > 0:
        bot.updates[:] = [update for update in bot.updates if update["update_id"] >= offset]
    if not bot.updates and timeout:
        await bot.long_poll(timeout)
    return bot.updates[:limit]


@verbs("setWebhook")
async def _set_webhook(bot: EmulatedBot, call: Call) -> bool:
    """Like Telegram's, but any http(s) URL on any port is accepted, since tests listen on 127.0.0.1."""
    params = call.params
    url = params.get("url") or ""
    if not url:
        return await _delete_webhook(bot, call)
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad_request("invalid webhook URL specified")
    secret = str(params.get("secret_token", ""))
    if len(secret) > 256:
        raise bad_request("secret token is too long")
    if not re.fullmatch(r"[A-Za-z0-9_-]*", secret):
        raise bad_request("secret token contains unallowed characters")
    hook = Webhook(str(url), secret, clamp(integer(params, "max_connections", 40), 1, 100))
    if isinstance(params.get("allowed_updates"), list):
        bot.allowed_updates = params["allowed_updates"]
    current = bot.webhook
    if (current and (current.url, current.secret_token, current.max_connections) == (hook.url, secret,
                                                                                     hook.max_connections)
            and not params.get("drop_pending_updates")):
        call.note = "Webhook is already set"
        return True
    if params.get("drop_pending_updates"):
        bot.updates.clear()
    bot.terminate_poll("Conflict: terminated by setWebhook request")
    bot.webhook = hook
    bot.start_delivery()
    call.note = "Webhook was set"
    return True


@verbs("deleteWebhook")
async def _delete_webhook(bot: EmulatedBot, call: Call) -> bool:
    if call.params.get("drop_pending_updates"):
        bot.updates.clear()
    call.note = "Webhook was deleted" if bot.webhook else "Webhook is already deleted"
    bot.webhook = None
    bot.emulator.changed()
    return True


@verbs("getWebhookInfo")
async def _get_webhook_info(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    hook = bot.webhook
    info: dict[str, Any] = {"url": hook.url if hook else "", "has_custom_certificate": False,
                            "pending_update_count": len(bot.updates)}
    if hook:
        if hook.last_error_date:
            info.update(last_error_date=hook.last_error_date, last_error_message=hook.last_error_message)
        info.update(max_connections=hook.max_connections, ip_address="127.0.0.1")
    if bot.allowed_updates:
        info["allowed_updates"] = bot.allowed_updates
    return info

