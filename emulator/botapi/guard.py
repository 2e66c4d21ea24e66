"""Who may ask the emulator anything: this machine's own programs and its own chat page.

One middleware (``same_origin``) in front of every route. The test API lists the
bots' tokens and plays the users, so any web page open in the operator's browser
would otherwise be a user too:

- ``Host`` must be a loopback name (``localhost``, ``127.0.0.1``, ``[::1]``; any
  port), so a page whose own name was rebound to 127.0.0.1 is refused (403);
- ``Origin``, when a browser sends one, must be the emulator's own (the chat page),
  so a page from another origin, another loopback port included, is refused (403);
- a write to the test API must be ``application/json`` (a file upload to a route in
  ``control.TAKES_FILES`` may be ``multipart/form-data``), else 415: a cross-site page
  can send ``text/plain`` and forms without a CORS preflight, but not JSON.

Programs (python-telegram-bot, curl) send no ``Origin``. Refusals answer in the
shape of the API asked: ``{"error"}`` under ``control.PREFIX``, the Bot API's
envelope elsewhere.
"""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from . import control
from .wire import ApiError, error_response

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@web.middleware
async def same_origin(request: web.Request, handler: Any) -> web.StreamResponse:
    if not is_loopback(host_name(request.host)):
        return _refuse(request, 403, "Forbidden: the emulator answers only to a loopback Host")
    origin = request.headers.get("Origin")
    if origin is not None and origin.lower() != f"http://{request.host}".lower():
        return _refuse(request, 403, "Forbidden: cross-origin requests are refused")
    if request.method not in SAFE_METHODS and _in_control(request) and not (
            request.content_type == "application/json" or (
                request.content_type == "multipart/form-data" and request.match_info.handler in control.TAKES_FILES)):
        return _refuse(request, 415, "Unsupported Media Type: the test API takes application/json")
    return await handler(request)


def host_name(host: str) -> str:
    """The name in a ``Host`` header, without port or IPv6 brackets; "" when it is not one."""
    try:
        return urlsplit(f"//{host}").hostname or ""
    except ValueError:
        return ""


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _in_control(request: web.Request) -> bool:
    return request.path == control.PREFIX or request.path.startswith(f"{control.PREFIX}/")


def _refuse(request: web.Request, status: int, description: str) -> web.Response:
    if _in_control(request):
        return web.json_response({"error": description}, status=status)
    return error_response(ApiError(status, description))
