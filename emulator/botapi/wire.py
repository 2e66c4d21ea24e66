"""The Bot API's wire format: request parameters in, ``{"ok": ...}`` envelopes out.

Every transport (query string, urlencoded form, multipart form, JSON body) is
read into one ``dict[str, str]`` as Telegram's own server does: a JSON body's
non-string values are re-encoded as JSON text, so a parameter looks the same
whichever way the client sent it. ``decode_params`` then types the parameters
whose type the Bot API documents as Integer, Boolean or a JSON-serialized
object; anything that does not parse stays a string for the method to reject.
JSON is read by ``loads``, whose nesting is bounded (``MAX_JSON_DEPTH``).
"""

from __future__ import annotations

import dataclasses
import json
from http import HTTPStatus
from typing import Any

from aiohttp import web

MAX_UPLOAD = 50 * 1024 * 1024
"""api.telegram.org refuses a larger multipart request with 413 before reading it."""
LOCAL_MAX_UPLOAD = 2000 * 1024 * 1024
"""A local Bot API server (``telegram-bot-api --local``) takes uploads up to 2000 MB."""
MAX_JSON_DEPTH = 400
"""Deeper JSON is refused as unparsable: ``json`` recurses, and 100,000 ``[`` raised RecursionError (a 500)."""

INT_PARAMS = frozenset({
    "chat_id", "message_id", "reply_to_message_id", "offset", "limit", "timeout", "width", "height",
    "duration", "cache_time", "message_thread_id", "max_connections", "user_id",
})
BOOL_PARAMS = frozenset({
    "disable_notification", "protect_content", "allow_sending_without_reply", "show_alert", "has_spoiler",
    "supports_streaming", "drop_pending_updates", "disable_content_type_detection",
    "show_caption_above_media", "disable_web_page_preview", "allow_paid_broadcast", "is_personal",
})
JSON_PARAMS = frozenset({
    "reply_markup", "reply_parameters", "entities", "caption_entities", "media", "commands", "scope",
    "allowed_updates", "link_preview_options", "results", "button",
})


class ApiError(Exception):
    """A Bot API failure: the HTTP status doubles as ``error_code``."""

    def __init__(self, status: int, description: str, *, retry_after: int | None = None):
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


def loads(text: str | bytes) -> Any:
    """``json.loads``, but a ValueError for nesting deeper than ``MAX_JSON_DEPTH``."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH}") from None
    stack = [(value, 1)]
    while stack:  # a loop: json's own recursion is what is bounded here
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH}")
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return value


def bad_request(what: str) -> ApiError:
    return ApiError(400, f"Bad Request: {what}")


@dataclasses.dataclass(frozen=True)
class Upload:
    """A file sent as a multipart part."""

    filename: str
    content_type: str
    data: bytes


async def read_request(request: web.Request) -> tuple[dict[str, str], dict[str, Upload]]:
    """Returns the request's parameters and uploaded files, whatever the transport."""
    args: dict[str, str] = dict(request.query)
    files: dict[str, Upload] = {}
    if not request.body_exists:
        return args, files
    try:
        if request.content_type == "application/json":
            try:
                body = loads(await request.read())
            except ValueError:
                raise bad_request("can't parse JSON object") from None
            if not isinstance(body, dict):
                raise bad_request("can't parse JSON object")
            args.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items() if v is not None})
        elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
            for name, value in (await request.post()).items():
                if isinstance(value, web.FileField):
                    files[name] = Upload(value.filename, value.content_type, value.file.read())
                else:
                    args[name] = value if isinstance(value, str) else bytes(value).decode()
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, "Request Entity Too Large") from None
    return args, files


def decode_params(args: dict[str, str]) -> dict[str, Any]:
    return {name: _decode(name, value) for name, value in args.items()}


def _decode(name: str, value: str) -> Any:
    try:
        if name in JSON_PARAMS:
            return loads(value)
        if name in INT_PARAMS:
            return int(value)
    except ValueError:
        return value
    if name in BOOL_PARAMS:
        return value.strip().lower() in ("true", "yes", "1")
    return value


def ok_response(result: Any, description: str | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": True, "result": result}
    if description:
        body["description"] = description
    return web.json_response(body)


def error_response(error: ApiError) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": error.status, "description": error.description}
    headers = {}
    if error.retry_after is not None:
        body["parameters"] = {"retry_after": error.retry_after}
        headers["Retry-After"] = str(error.retry_after)
    return web.json_response(body, status=error.status, headers=headers)


def fault_error(status: int, retry_after: int | None, description: str | None) -> ApiError:
    """The error a fault injection answers, worded as Telegram words it."""
    if status == 429:
        retry_after = 1 if retry_after is None else retry_after
        return ApiError(429, description or f"Too Many Requests: retry after {retry_after}", retry_after=retry_after)
    return ApiError(status, description or HTTPStatus(status).phrase, retry_after=retry_after)
