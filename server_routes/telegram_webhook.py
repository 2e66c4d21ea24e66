"""POST /courier/telegram/webhook: updates from Telegram when COURIER_WEBHOOK_URL is set (``access.TELEGRAM``)."""

from __future__ import annotations

import json

from aiohttp import web

from ..core.logs import get_logger
from ..runtime import COURIER
from .access import TELEGRAM, Routes

log = get_logger("routes")
routes = Routes()

MAX_UPDATE_BYTES = 1 * 2**20  # Telegram's updates are a few KB; files come by file_id


@routes.post("/courier/telegram/webhook", access=TELEGRAM)
async def telegram_webhook(request: web.Request) -> web.Response:
    bot = request.app[COURIER].bot
    body = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > MAX_UPDATE_BYTES:
            return web.json_response({"error": {"code": "too_large", "message": "update too large"}}, status=413)
    not_an_update = web.json_response({"error": {"code": "bad_update", "message": "body is not a Telegram update"}},
                                      status=400)
    try:
        payload = json.loads(body)
        if not isinstance(payload, dict) or type(payload.get("update_id")) is not int:
            raise ValueError("not an update")
    except (ValueError, RecursionError):
        return not_an_update
    try:
        update = bot.read_update(payload)
    except Exception as exc:  # python-telegram-bot's Update.de_json raises whatever a missing part makes it
        log.warning("webhook: an update python-telegram-bot cannot read (%s)", type(exc).__name__)
        return not_an_update
    if not await bot.process_update(update):  # answered once handled: else Telegram delivers it again
        return web.json_response({"error": {"code": "database_down", "message": "try again later"}}, status=503)
    return web.json_response({"ok": True})
