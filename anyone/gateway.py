"""The hidden service's front door: a small reverse proxy that passes only what a Courier bot needs.

anon's ``HiddenServicePort`` points here (127.0.0.1, a free port), not at ComfyUI.
What may pass is the access policy's to say (gateway_policy.py: a bot-host
credential, then the route's rule); anything else gets 403 and never reaches
ComfyUI. ``expose_ui=True`` (``COURIER_ANYONE_EXPOSE_UI``) passes everything, unchecked.

The raw path is forwarded unchanged. The target is fixed (the local ComfyUI) and so
is the ``Host`` it is sent (the target's ``127.0.0.1:PORT``, so ComfyUI's own Host
checks see a loopback request; with ``expose_ui`` the client's ``.anon`` Host, which
the editor's Origin matches). A body a rule read goes in its place; bodies that need
no check stream both ways, hop-by-hop headers are dropped, and websocket frames
(text and binary: ComfyUI's previews) pass both ways.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable

import aiohttp
from aiohttp import WSMsgType, web
from multidict import CIMultiDict
from yarl import URL

from .gateway_bodies import DENIED
from .gateway_policy import CREDENTIAL_HEADER, MAX_UPLOAD_BYTES, SESSION, TARGET, Forward, Policy, route

# RFC 9110 7.6.1, plus what a proxy must never forward
HOP_BY_HOP = frozenset(("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                        "te", "trailer", "transfer-encoding", "upgrade"))
EXPOSE_UI = web.AppKey("courier_gateway_expose_ui", bool)
POLICY = web.AppKey("courier_gateway_policy", Policy)


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
    forward = Forward()
    caller = None
    if not request.app[EXPOSE_UI]:
        rule = route(request.method, raw_path)
        policy = request.app[POLICY]
        caller = policy.caller(request)
        if rule is None or caller is None:
            return web.Response(status=403, text=DENIED)
        decided = await rule(request, caller, policy)
        if isinstance(decided, web.Response):
            return decided
        forward = decided
    try:
        return await _proxy(request, forward, caller)
    finally:
        if forward.release is not None:
            forward.release()


async def _proxy(request: web.Request, forward: Forward, caller: str | None) -> web.StreamResponse:
    """Send the request on to ComfyUI (``forward.body`` in place of the client's, when a rule read it)."""
    raw_path = request.rel_url.raw_path
    target = request.app[TARGET]
    url = URL.build(scheme=target.scheme, host=target.raw_host, port=target.port, path=raw_path,
                    query_string=request.rel_url.raw_query_string, encoded=True)
    headers = _end_to_end(request.headers, websocket=request.headers.get("Upgrade", "").lower() == "websocket")
    headers.popall(CREDENTIAL_HEADER, None)
    if not request.app[EXPOSE_UI]:  # the editor, passed whole, keeps its .anon Host (ComfyUI compares it with Origin)
        headers["Host"] = f"{target.raw_host}:{target.port}"
    if forward.reply is not None:
        headers.popall("Accept-Encoding", None)  # a reply we rewrite comes as plain JSON
    if forward.body is not None:  # its length (and a form's boundary) are those of what we send
        headers.popall("Content-Length", None)
        if isinstance(forward.body, aiohttp.FormData):
            headers.popall("Content-Type", None)
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return await _websocket(request, url, headers, caller)
    data = forward.body
    if data is None and request.body_exists:
        data = request.content
    try:
        upstream = await request.app[SESSION].request(request.method, url, headers=headers, allow_redirects=False,
                                                      data=data)
    except (aiohttp.ClientError, OSError):
        return web.Response(status=502, text="ComfyUI is not reachable\n")
    async with upstream:
        reply = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP and not (forward.reply is not None and key.lower() == "content-length"):
                reply.headers.add(key, value)
        try:
            if forward.reply is not None:
                body = forward.reply(await upstream.read()) if upstream.status == 200 else await upstream.read()
                reply.content_length = len(body)
                await reply.prepare(request)
                await reply.write(body)
            else:
                await reply.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await reply.write(chunk)
            await reply.write_eof()
        except (ConnectionResetError, aiohttp.ClientError):
            pass  # either side went away mid-transfer
    return reply


async def _websocket(request: web.Request, url: URL, headers: CIMultiDict, caller: str | None) -> web.StreamResponse:
    protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
    try:
        upstream = await request.app[SESSION].ws_connect(
            url, headers=headers, protocols=protocols,
            max_msg_size=0)  # ComfyUI may send whole images as binary frames
    except (aiohttp.ClientError, OSError):
        return web.Response(status=502, text="ComfyUI is not reachable\n")
    downstream = web.WebSocketResponse(protocols=[upstream.protocol] if upstream.protocol else ())
    seen = None if caller is None else functools.partial(_executed, request.app[POLICY], caller)
    try:
        await downstream.prepare(request)
        pumps = [asyncio.create_task(_pump(upstream, downstream, seen)),
                 asyncio.create_task(_pump(downstream, upstream))]
        _, pending = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pumps, return_exceptions=True)
    finally:
        await upstream.close()
        await downstream.close()
    return downstream


def _executed(policy: Policy, caller: str, text: str) -> None:
    """A text frame ComfyUI sent this caller's socket: an ``executed`` one names files its prompt wrote."""
    if not text.startswith('{"type": "executed"'):
        return
    try:
        frame = json.loads(text)
    except ValueError:
        return
    output = frame.get("data", {}).get("output") if isinstance(frame.get("data"), dict) else None
    policy.saw_outputs(caller, {"node": output})


async def _pump(source, sink, seen: Callable[[str], None] | None = None) -> None:
    """Copy text and binary frames from ``source`` to ``sink`` until either side closes."""
    async for message in source:
        if message.type == WSMsgType.TEXT:
            if seen is not None:
                seen(message.data)
            await sink.send_str(message.data)
        elif message.type == WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        else:
            break


def gateway_app(target: str, *, expose_ui: bool = False, policy: Policy | None = None) -> web.Application:
    """The proxy as an aiohttp app in front of ``target`` (``http://127.0.0.1:8188``)."""
    app = web.Application(client_max_size=MAX_UPLOAD_BYTES)
    app[TARGET] = URL(target)
    app[EXPOSE_UI] = expose_ui
    app[POLICY] = policy if policy is not None else Policy()
    app.cleanup_ctx.append(_upstream_session)
    app.router.add_route("*", "/{path:.*}", _forward)
    return app


class Gateway:
    """``gateway_app`` served on 127.0.0.1 (a free port); ``address`` is ``127.0.0.1:PORT`` once started.

    ``policy.credentials`` and ``policy.node_types`` may be set (and changed) at any time.
    """

    def __init__(self, target: str, *, expose_ui: bool = False):
        self.target = target
        self.expose_ui = expose_ui
        self.policy = Policy()
        self.address: str | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        if self._runner is None:
            self._runner = web.AppRunner(gateway_app(self.target, expose_ui=self.expose_ui, policy=self.policy),
                                         access_log=None)
            await self._runner.setup()
            await web.TCPSite(self._runner, "127.0.0.1", 0).start()
            self.address = f"127.0.0.1:{self._runner.addresses[0][1]}"
        return self.address

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
