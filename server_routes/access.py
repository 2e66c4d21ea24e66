"""Who may call a /courier route: declared with the route, checked in one place.

Each route of a table (``Routes``) names its access where it names its method and path
(``@routes.get("/courier/jobs", access=STATUS)``); a route without one does not import, and the
handler the router gets is always the guarded one (``Route.handler``), so no route can forget its
check. Five kinds (ComfyUI's own API has no authentication; ours must not widen that hole):

- ``ADMIN``: routes that change things. They need ``Authorization: Bearer <COURIER_ADMIN_TOKEN>``;
  with no token configured they refuse with 403 and say how to set one.
- ``STATUS``: read-only routes. Open without a token only to a browser on this machine: the
  peer is loopback, the Host header names loopback (no DNS rebinding), no proxy forwarded the
  request, and this server is not an Anyone hidden service (whose visitors arrive from
  loopback too). Anyone else needs the token.
- ``BACKEND``: what a Courier bot calls on its backends, next to ComfyUI's ``/prompt`` and
  ``/upload/image``: open to whoever may queue prompts here (this machine, or a client the hidden
  service authorized), as those are. Such a route may only touch Courier's own files.
- ``PUBLIC``: the Mini App's static files (``miniapp``): the same bytes for everyone, nothing secret
  in them, nothing changed by them.
- ``TELEGRAM``: the webhook. Only Telegram, which proves itself by the secret the bot registered
  with ``setWebhook`` (``X-Telegram-Bot-Api-Secret-Token``); there is always one (the operator's, or
  one generated and kept in PostgreSQL), and until the bot has registered it nothing is taken.

A ``STATUS`` route may declare what it answers a ``stranger`` (no token, not a local browser)
instead of refusing: ``/courier/health`` tells each service's state, without the reasons, which
name server paths.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
import ipaddress
from typing import Any

from aiohttp import web

from ..core.logs import get_logger
from ..runtime import COURIER, Courier
from ..store import StoreError
from .api import ApiError, Handler

log = get_logger("routes")

ADMIN = "admin"
STATUS = "status"
BACKEND = "backend"
TELEGRAM = "telegram"
PUBLIC = "public"
KINDS = (ADMIN, STATUS, BACKEND, TELEGRAM, PUBLIC)
WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP")
TOKEN_HELP = ("set COURIER_ADMIN_TOKEN (or admin_token in courier.toml) and send it as "
              "'Authorization: Bearer <token>'")


@dataclasses.dataclass(frozen=True, repr=False)
class Route(web.AbstractRouteDef):
    """One row of a route table: method, path, the guarded ``handler`` the router serves, its
    ``access``, the bare ``view`` it guards (what the decorator returned) and what it answers a
    ``stranger`` (``guard``)."""

    method: str
    path: str
    handler: Handler
    access: str
    view: Handler
    stranger: Handler | None
    kwargs: dict[str, Any]

    def __repr__(self) -> str:
        return f"<Route {self.method} {self.path} -> {self.view.__name__!r} ({self.access})>"

    def register(self, router: web.UrlDispatcher) -> list[web.AbstractRoute]:
        return web.RouteDef(self.method, self.path, self.handler, self.kwargs).register(router)


class Routes(web.RouteTableDef):
    """aiohttp's route table, each route with its declared access (keyword ``access``, required)."""

    def route(self, method: str, path: str, *, access: str, stranger: Handler | None = None,
              **kwargs: Any):
        def add(view: Handler) -> Handler:
            self._items.append(Route(method, path, guard(view, access, stranger), access, view, stranger, kwargs))
            return view

        return add


def guard(view: Handler, access: str, stranger: Handler | None = None) -> Handler:
    """``view`` behind ``access``: checked first, then ApiError and database failures as JSON errors.

    ``stranger`` (``STATUS`` only): what a caller without a token who is not a local browser gets
    instead of 401/403.
    """
    if access not in KINDS:
        raise ValueError(f"unknown access {access!r}")
    if stranger is not None and access != STATUS:
        raise ValueError("only a STATUS route answers strangers")

    @functools.wraps(view)
    async def guarded(request: web.Request) -> web.StreamResponse:
        courier = request.app[COURIER]
        try:
            if stranger is not None and _bearer(request) is None and not is_local_browser(request, courier):
                return await stranger(request)
            check_access(request, courier, access)
            return await view(request)
        except ApiError as exc:
            return exc.response()
        except StoreError as exc:
            log.warning("%s %s: %s", request.method, request.path, exc)
            return ApiError(503, "database_error", "the database failed; see the ComfyUI log").response()

    return guarded


def check_access(request: web.Request, courier: Courier, access: str) -> None:
    """Raise ApiError unless the request may reach a route of this ``access``."""
    if access in (BACKEND, PUBLIC):
        return
    if access == TELEGRAM:
        _check_telegram(request, courier)
        return
    settings = courier.settings
    token = settings.admin_token.reveal() if settings is not None else ""
    given = _bearer(request)
    if given is None and access == STATUS and is_local_browser(request, courier):
        return
    if not token:
        reason = ("this route changes Courier's state" if access == ADMIN
                  else "read-only routes are open without a token only to a browser on this machine")
        raise ApiError(403, "admin_token_unset", f"{reason}; {TOKEN_HELP}")
    challenge = {"WWW-Authenticate": 'Bearer realm="courier"'}
    if given is None:
        raise ApiError(401, "unauthorized", f"missing admin token; {TOKEN_HELP}", challenge)
    if not hmac.compare_digest(given.encode(), token.encode()):
        raise ApiError(401, "bad_token", "the admin token is wrong", challenge)


def _check_telegram(request: web.Request, courier: Courier) -> None:
    settings, bot = courier.settings, courier.bot
    if bot is None or not settings.webhook_url or not settings.receive_updates:
        raise ApiError(404, "webhook_off", "webhook mode is off")
    if bot.webhook_secret is None:
        raise ApiError(503, "webhook_not_ready", "the bot has not registered its webhook yet",
                       {"Retry-After": "5"})
    given = request.headers.get(WEBHOOK_SECRET_HEADER)
    if given is None:
        raise ApiError(401, "unauthorized", f"missing {WEBHOOK_SECRET_HEADER}")
    if not hmac.compare_digest(given.encode("utf-8", "replace"), bot.webhook_secret.reveal().encode()):
        raise ApiError(403, "forbidden", "bad secret token")


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise ApiError(401, "unauthorized", f"unsupported Authorization header; {TOKEN_HELP}",
                       {"WWW-Authenticate": 'Bearer realm="courier"'})
    return value.strip()


def is_local_browser(request: web.Request, courier: Courier) -> bool:
    """Whether the request surely comes from this machine (see the module docstring)."""
    if courier.settings is not None and courier.settings.anyone_enabled:
        return False
    if any(name in request.headers for name in FORWARDING_HEADERS):
        return False
    return is_loopback_host(request.remote) and is_loopback_host(host_name(request.host))


def host_name(host: str) -> str:
    """The name in a Host header: ``[::1]:8188`` -> ``::1``, ``localhost:8188`` -> ``localhost``."""
    if host.startswith("["):
        return host[1:host.find("]")]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_loopback_host(host: str | None) -> bool:
    """Whether ``host`` names this machine: ``localhost``, a loopback address, or one that reaches loopback
    although ``ipaddress`` does not call it so (``0.0.0.0`` and ``::``, which the kernel connects to this
    machine, and an IPv4-mapped loopback address such as ``::ffff:127.0.0.1``)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    address = getattr(address, "ipv4_mapped", None) or address
    return address.is_loopback or address.is_unspecified
