"""The hidden service's front door: a small reverse proxy that passes only what a Courier bot needs.

anon's ``HiddenServicePort`` points here (127.0.0.1, a free port), not at ComfyUI.
A request passes when its method and path are in ``ROUTES`` (also under ``/api/``,
as ComfyUI serves every route twice); anything else gets 403 and never reaches
ComfyUI -- the editor, ``/userdata``, other packs' routes such as ComfyUI-Manager's
node installation. ``expose_ui=True`` (``COURIER_ANYONE_EXPOSE_UI``) passes everything.

The path is judged as ComfyUI will see it: split on ``/``, each segment
percent-decoded; an empty, ``.`` or ``..`` segment, or one that decodes to a
slash or backslash, is refused, and the raw path is forwarded unchanged. The
target is fixed (the local ComfyUI): neither the request line nor ``Host`` can
point the proxy elsewhere. Bodies stream both ways, hop-by-hop headers are
dropped, and websocket frames (text and binary: ComfyUI's previews) pass both ways.
"""

from __future__ import annotations

import asyncio
from urllib.parse import unquote

import aiohttp
from aiohttp import WSMsgType, web
from multidict import CIMultiDict
from yarl import URL

# (method, path); "{}" stands for one path segment. Every path jobs/comfy_client.py calls.
ROUTES: tuple[tuple[str, str], ...] = (
    ("POST", "/prompt"),
    ("GET", "/ws"),
    ("GET", "/view"),
    ("POST", "/upload/image"),
    ("GET", "/history"),
    ("GET", "/history/{}"),
    ("GET", "/queue"),
    ("POST", "/queue"),
    ("POST", "/interrupt"),
    ("GET", "/object_info"),
    ("GET", "/object_info/{}"),
    ("GET", "/system_stats"),
    ("GET", "/courier/health"),
    ("POST", "/courier/files/delete"),  # /forget and retention: the bot deletes Courier's files here
)
# RFC 9110 7.6.1, plus what a proxy must never forward
HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "transfer-encoding", "upgrade"))
DENIED = "not available through the hidden service\n"

TARGET = web.AppKey("courier_gateway_target", URL)
EXPOSE_UI = web.AppKey("courier_gateway_expose_ui", bool)
SESSION = web.AppKey("courier_gateway_session", aiohttp.ClientSession)


def allowed(method: str, raw_path: str) -> bool:
    """Whether ``method raw_path`` (still percent-encoded, no query) is in ROUTES."""
    if not raw_path.startswith("/"):
        return False
    segments = [unquote(s, errors="replace") for s in raw_path[1:].split("/")]
    if any(s in ("", ".", "..") or "/" in s or "\\" in s for s in segments):
        return False
    if segments[0] == "api" and len(segments) > 1:
        segments = segments[1:]
    for route_method, pattern in ROUTES:
        parts = pattern[1:].split("/")
        if route_method == method and len(parts) == len(segments) and all(
                p == "{}" or p == s for p, s in zip(parts, segments)):
            return True
    return False


def _end_to_end(headers, *, websocket: bool = False) -> CIMultiDict:
    """``headers`` without hop-by-hop ones (and those ``Connection`` names); websocket: no handshake headers."""
    named = {h.strip().lower() for h in headers.get("Connection", "").split(",")}
    return CIMultiDict((key, value) for key, value in headers.items()
                       if key.lower() not in HOP_BY_HOP and key.lower() not in named
                       and not (websocket and key.lower().startswith("sec-websocket-")))


async def _upstream_session(app: web.Application):
    app[SESSION] = aiohttp.ClientSession(
        auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(), skip_auto_headers=("User-Agent",),
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
    yield
    await app[SESSION].close()


async def _forward(request: web.Request) -> web.StreamResponse:
    raw_path = request.rel_url.raw_path
    if not request.app[EXPOSE_UI] and not allowed(request.method, raw_path):
        return web.Response(status=403, text=DENIED)
    target = request.app[TARGET]
    url = URL.build(scheme=target.scheme, host=target.raw_host, port=target.port, path=raw_path,
                    query_string=request.rel_url.raw_query_string, encoded=True)
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return await _websocket(request, url)
    try:
        upstream = await request.app[SESSION].request(
            request.method, url, headers=_end_to_end(request.headers), allow_redirects=False,
            data=request.content if request.body_exists else None)
    except (aiohttp.ClientError, OSError):
        return web.Response(status=502, text="ComfyUI is not reachable\n")
    async with upstream:
        reply = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP:
                reply.headers.add(key, value)
        await reply.prepare(request)
        try:
            async for chunk in upstream.content.iter_any():
                await reply.write(chunk)
            await reply.write_eof()
        except ConnectionResetError:
            pass  # the client went away mid-download
    return reply


async def _websocket(request: web.Request, url: URL) -> web.StreamResponse:
    protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    try:
        upstream = await request.app[SESSION].ws_connect(
            url, headers=_end_to_end(request.headers, websocket=True), protocols=protocols,
            max_msg_size=0)  # ComfyUI may send whole images as binary frames
    except (aiohttp.ClientError, OSError):
        return web.Response(status=502, text="ComfyUI is not reachable\n")
    downstream = web.WebSocketResponse(protocols=[upstream.protocol] if upstream.protocol else ())
    try:
        await downstream.prepare(request)
        pumps = [asyncio.create_task(_pump(upstream, downstream)), asyncio.create_task(_pump(downstream, upstream))]
        _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
    finally:
        await upstream.close()
        await downstream.close()
    return downstream


async def _pump(source, sink) -> None:
    """Copy text and binary frames from ``source`` to ``sink`` until either side closes."""
    async for message in source:
        if message.type == WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type == WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            break


def gateway_app(target: str, *, expose_ui: bool = False) -> web.Application:
    """The proxy as an aiohttp app in front of ``target`` (``http://127.0.0.1:8188``)."""
    app = web.Application()
    app[TARGET] = URL(target)
    app[EXPOSE_UI] = expose_ui
    app.cleanup_ctx.append(_upstream_session)
    app.router.add_route("*", "/{path:.*}", _forward)
    return app


class Gateway:
    """``gateway_app`` served on 127.0.0.1 (a free port); ``address`` is ``127.0.0.1:PORT`` once started."""

    def __init__(self, target: str, *, expose_ui: bool = False):
        self.target = target
        self.expose_ui = expose_ui
        self.address: str | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        if self._runner is None:
            self._runner = web.AppRunner(gateway_app(self.target, expose_ui=self.expose_ui), access_log=None)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            self.address = f"127.0.0.1:{self._runner.addresses[0][1]}"
        return self.address

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
