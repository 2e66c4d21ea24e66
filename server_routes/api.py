"""What the /courier routes share: who may call them, bounded JSON bodies, one error shape.

Five kinds of access (ComfyUI's own API has no authentication; ours must not widen that hole):

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

Errors are ``{"error": {"code", "message"}}`` with the matching HTTP status.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from ..core.logs import get_logger
from ..runtime import COURIER, Courier
from ..store import StoreError

log = get_logger("routes")

ADMIN = "admin"
STATUS = "status"
BACKEND = "backend"
TELEGRAM = "telegram"
PUBLIC = "public"
WEBHOOK_SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
MAX_BODY_BYTES = 1 * 2**20
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-IP")
TOKEN_HELP = ("set COURIER_ADMIN_TOKEN (or admin_token in courier.toml) and send it as "
              "'Authorization: Bearer <token>'")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """Ends a request with ``{"error": {"code", "message"}}`` and ``status``."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers

    def response(self) -> web.Response:
        return web.json_response({"error": {"code": self.code, "message": self.message}},
                                 status=self.status, headers=self.headers)


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """``web.json_response`` that also writes datetimes (ISO 8601)."""
    return web.json_response(data, status=status, headers=headers,
                             dumps=functools.partial(json.dumps, default=_encode))


def endpoint(access: str, *, stranger: Handler | None = None) -> Callable[[Handler], Handler]:
    """Check ``access`` first, then turn ApiError and database failures into JSON errors.

    ``stranger`` (``STATUS`` only): what a caller without a token who is not a local browser gets
    instead of 401/403.
    """
    if access not in (ADMIN, STATUS, BACKEND, TELEGRAM, PUBLIC):
        raise ValueError(f"unknown access {access!r}")
    if stranger is not None and access != STATUS:
        raise ValueError("only a STATUS route answers strangers")

    def wrap(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def guarded(request: web.Request) -> web.StreamResponse:
            courier = request.app[COURIER]
            try:
                if stranger is not None and _bearer(request) is None and not is_local_browser(request, courier):
                    return await stranger(request)
                check_access(request, courier, access)
                return await handler(request)
            except ApiError as exc:
                return exc.response()
            except StoreError as exc:
                log.warning("%s %s: %s", request.method, request.path, exc)
                return ApiError(503, "database_error", "the database failed; see the ComfyUI log").response()

        return guarded

    return wrap


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


async def read_json(request: web.Request, max_bytes: int = MAX_BODY_BYTES) -> Any:
    """The request's JSON body, at most ``max_bytes``; 415, 413 or 400 otherwise."""
    if request.content_type != "application/json":
        raise ApiError(415, "unsupported_media_type", "send the body as application/json")
    too_large = ApiError(413, "too_large", f"the body is larger than {max_bytes} bytes")
    if request.content_length is not None and request.content_length > max_bytes:
        raise too_large
    body = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > max_bytes:
            raise too_large
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ApiError(400, "bad_json", f"the body is not valid JSON ({type(exc).__name__})") from None
    todo = [value]
    while todo:  # a loop, not recursion: the body may nest as deep as json.loads allows
        item = todo.pop()
        if isinstance(item, str):
            check_text(item, "the body")
        elif isinstance(item, dict):
            todo += [*item, *item.values()]
        elif isinstance(item, list):
            todo += item
    return value


def check_text(text: str, where: str, code: str = "bad_text") -> str:
    """``text`` unless it holds what PostgreSQL cannot store (NUL, an unpaired surrogate); 400 ``code`` then."""
    try:
        text.encode("utf-8")  # json.loads joins surrogate pairs: one left alone is unpaired
    except UnicodeEncodeError:
        raise ApiError(400, code, f"{where} has an unpaired surrogate (\\ud800-\\udfff)") from None
    if "\x00" in text:
        raise ApiError(400, code, f"{where} has a NUL character (\\u0000)")
    return text


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


@dataclasses.dataclass(frozen=True)
class Field:
    """One member of a JSON body: its type(s), whether it must be there, a length limit."""

    kind: type | tuple[type, ...]
    required: bool = False
    max_length: int | None = None


def check_body(body: Any, fields: dict[str, Field]) -> dict[str, Any]:
    """``body`` if it is an object with exactly these members of these types; 400 otherwise."""
    if not isinstance(body, dict):
        raise ApiError(400, "bad_body", "the body must be a JSON object")
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise ApiError(400, "bad_body", f"unknown member(s): {', '.join(map(repr, unknown))}")
    for name, field in fields.items():
        if name not in body:
            if field.required:
                raise ApiError(400, "bad_body", f"{name!r} is required")
            continue
        value = body[name]
        kinds = field.kind if isinstance(field.kind, tuple) else (field.kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            wanted = " or ".join(_JSON_NAMES[k] for k in kinds)
            raise ApiError(400, "bad_body", f"{name!r} must be {wanted}")
        if field.max_length is not None and len(value) > field.max_length:
            raise ApiError(400, "bad_body", f"{name!r} is longer than {field.max_length}")
    return body


_JSON_NAMES = {str: "a string", bool: "true or false", int: "a whole number", dict: "an object",
               list: "an array", type(None): "null"}


def query_int(request: web.Request, name: str, *, default: int | None = None, minimum: int | None = None,
              maximum: int | None = None) -> int | None:
    """An integer query parameter within bounds; 400 otherwise."""
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, "bad_query", f"{name!r} must be a whole number") from None
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ApiError(400, "bad_query", f"{name!r} must be between {minimum} and {maximum}")
    return value


def query_text(request: web.Request, name: str, *, max_length: int) -> str | None:
    """A text query parameter of at most ``max_length`` characters that PostgreSQL can store; 400 otherwise."""
    value = request.query.get(name)
    if value is None:
        return None
    if len(value) > max_length:
        raise ApiError(400, "bad_query", f"{name!r} is longer than {max_length}")
    return check_text(value, repr(name), "bad_query")


def store_of(courier: Courier):
    """The open Store, or 503 saying why the database is not there."""
    if courier.store is None:
        reason = courier.health.report()["database"]["reason"]
        raise ApiError(503, "database_off", f"the database is not running: {reason}")
    return courier.store
