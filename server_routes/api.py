"""What the /courier routes share: bounded JSON bodies and query values, one error shape.

Errors are ``{"error": {"code", "message"}}`` with the matching HTTP status. Who may call a route
is its table's business (``access``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from aiohttp import web

from ..runtime import Courier

MAX_BODY_BYTES = 1 * 2**20

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
