"""Reading what a request to the gateway carries, to a limit: its body whole, as JSON, or as
ComfyUI's upload form; otherwise the refusal the gateway answers.

A body a rule checks is read to its end (Content-Length or chunked: anon hands it over in
small cells), 413 past the rule's limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import aiohttp
from aiohttp import MultipartReader, StreamReader, web
from aiohttp.base_protocol import BaseProtocol

DENIED = "not available through the hidden service\n"


def refuse(reason: str, status: int = 403) -> web.Response:
    return web.Response(status=status, text=f"{DENIED.strip()}: {reason}\n")


async def read_body(request: web.Request, limit: int) -> bytes | web.Response:
    """The whole body (``content.read(n)`` gives only what has arrived: read to its end), or a 413 past
    ``limit`` bytes."""
    if request.content_length is not None and request.content_length > limit:
        return refuse(f"body over {limit} bytes", 413)
    body = bytearray()
    while chunk := await request.content.read(limit + 1 - len(body)):
        body += chunk
        if len(body) > limit:
            return refuse(f"body over {limit} bytes", 413)
    return bytes(body)


async def read_json(request: web.Request, limit: int) -> tuple[bytes, object] | web.Response:
    """(the body, what it says), or a refusal: over ``limit`` (413), not JSON (400)."""
    body = await read_body(request, limit)
    if isinstance(body, web.Response):
        return body
    try:
        return body, json.loads(body)
    except ValueError:
        return refuse("the body is not JSON", 400)


@dataclasses.dataclass(frozen=True)
class UploadForm:
    """A ``/upload/image`` form: each field's values (the ``image`` field's: its filenames) and the image."""

    fields: dict[str, list[str]]
    image: bytes = b""
    content_type: str = "application/octet-stream"  # the image part's


def _stream(data: bytes) -> StreamReader:
    """``data`` as a read stream (its limit above the data's size: a full buffer would pause a protocol
    that has no transport)."""
    stream = StreamReader(BaseProtocol(asyncio.get_running_loop()), max(2**16, len(data)),
                          loop=asyncio.get_running_loop())
    stream.feed_data(data)
    stream.feed_eof()
    return stream


async def read_upload(request: web.Request, limit: int) -> UploadForm | web.Response:
    """The multipart form of an upload (read whole: its fields may come after the file), or a refusal:
    over ``limit`` (413), not a form (400)."""
    body = await read_body(request, limit)
    if isinstance(body, web.Response):
        return body
    fields: dict[str, list[str]] = {}
    image, content_type = b"", UploadForm.content_type
    try:
        reader = MultipartReader(request.headers, _stream(body))
        while (part := await reader.next()) is not None:
            name = part.name or ""
            if name == "image":
                image, value = await part.read(), part.filename
                content_type = part.headers.get("Content-Type", "application/octet-stream")
            else:
                value = await part.text()
            await part.release()
            fields.setdefault(name, []).append(value)
    except (AssertionError, ValueError, TypeError, LookupError, aiohttp.ClientError):
        return refuse("not a form upload", 400)
    return UploadForm(fields, image, content_type)
