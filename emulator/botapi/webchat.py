"""The web chat at the emulator's root: a Telegram-like chat with a bot, in plain HTML/JS/CSS.

``/`` is ``web/index.html``; ``/web/`` its script and style. The page only reads and
writes the test API (``control``): it plays the users, follows a chat's server-sent
events and shows what the bot did. ``/?bot=<token>&user=<id>`` picks a bot and a
user; without them, the first bot and the first user (made up when there is none).
Typing ``@<bot> words`` asks the bot in inline mode and lists its answer (``web/inline.js``).
The chat's reply keyboard shows under the field; a ``web_app`` button opens its Mini App in an
overlay, which may be a loopback ``http://`` page (``try``'s), where Telegram takes HTTPS only
(``web/miniapp.js``, ``keyboards``).
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

WEB_DIR = Path(__file__).with_name("web")


def add_routes(app: web.Application) -> None:
    """Before the emulator's catch-all route, so it gives way at ``/`` and ``/web/``."""
    app.router.add_get("/", _index)
    app.router.add_static("/web/", WEB_DIR)


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(WEB_DIR / "index.html", headers={"Cache-Control": "no-cache"})
