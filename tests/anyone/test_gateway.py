"""The hidden service's filtering proxy (anyone/gateway.py) in front of a loopback stand-in for ComfyUI."""

import asyncio
import json

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from comfyui_courier.anyone.gateway import (
    CREDENTIAL_HEADER,
    ROUTES,
    Policy,
    digest,
    gateway_app,
    route,
)
from comfyui_courier.tests.support.http import serve_app

WAIT_S = 10
PREVIEW = b"\x00\x00\x00\x01\x00\x00\x00\x02\x89PNG\r\n\x1a\n"  # ComfyUI's binary preview frame layout
TOKEN = "bot-host-token"
AUTH = {CREDENTIAL_HEADER: TOKEN}


def policy(*tokens: str, types=("ImageInvert", "CourierTelegramOutput")) -> Policy:
    async def node_types():
        return types

    return Policy(credentials=frozenset(digest(t) for t in tokens or (TOKEN,)), node_types=node_types)


class Backend:
    """Records every request that reached it; /ws echoes frames and greets with a binary preview."""

    def __init__(self):
        self.seen: list[tuple[str, str, dict]] = []
        self.first_chunk_out = asyncio.Event()  # /view has sent its first chunk
        self.release_rest = asyncio.Event()  # ... and may send the rest
        self.upload_started = asyncio.Event()  # /upload/image has read its first bytes

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/ws", self.ws)
        app.router.add_get("/view", self.view)
        app.router.add_post("/upload/image", self.upload)
        app.router.add_route("*", "/{tail:.*}", self.anything)
        return app

    def record(self, request):
        self.seen.append((request.method, request.rel_url.raw_path, dict(request.headers)))

    async def anything(self, request):
        self.record(request)
        reply = web.Response(text=f"backend {request.method} {request.rel_url.raw_path}")
        reply.headers["Keep-Alive"] = "timeout=5"
        reply.headers["Proxy-Authenticate"] = "Basic"
        reply.headers["X-Backend"] = "yes"
        return reply

    async def view(self, request):
        """Two chunks; the second only once the test has received the first through the proxy."""
        self.record(request)
        reply = web.StreamResponse()
        reply.content_type = "image/png"
        await reply.prepare(request)
        await reply.write(b"A" * 65536)
        self.first_chunk_out.set()
        await self.release_rest.wait()
        await reply.write(b"B" * 65536)
        await reply.write_eof()
        return reply

    async def upload(self, request):
        self.record(request)
        first = await request.content.readexactly(5)
        self.upload_started.set()
        rest = await request.content.read()
        return web.json_response({"received": len(first) + len(rest), "first": first.decode()})

    async def ws(self, request):
        self.record(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_bytes(PREVIEW)
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                await ws.send_str(f"echo {message.data}")
            elif message.type == WSMsgType.BINARY:
                await ws.send_bytes(b"echo " + message.data)
        return ws


@pytest.fixture
async def proxied():
    """(gateway URL, Backend) for the default allowlist."""
    backend = Backend()
    async with serve_app(backend.app()) as target, serve_app(gateway_app(target, policy=policy())) as url:
        yield url, backend
        backend.release_rest.set()  # a failed streaming test must not hold /view open


async def raw_request(url: str, request_line: str, headers: str = f"{CREDENTIAL_HEADER}: {TOKEN}\r\n"
                      ) -> tuple[int, bytes]:
    """Send one request exactly as written (no client-side path normalization), with the credential
    unless ``headers`` says otherwise; (status, body)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"{request_line} HTTP/1.1\r\nHost: x.anon\r\n{headers}Connection: close\r\n\r\n".encode())
        await writer.drain()
        reply = await asyncio.wait_for(reader.read(), WAIT_S)
    finally:
        writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.parametrize("method, path", [
    ("POST", "/prompt"), ("POST", "/api/prompt"), ("GET", "/ws"), ("GET", "/view"), ("POST", "/upload/image"),
    ("GET", "/history/3f1c2c1e-6a7b-4c1d-9e2f-0a1b2c3d4e5f"), ("GET", "/api/history/abc"),
    ("GET", "/queue"), ("POST", "/queue"), ("POST", "/interrupt"), ("GET", "/object_info"),
    ("GET", "/object_info/KSampler"), ("GET", "/object_info/Load%20Image"), ("GET", "/system_stats"),
    ("GET", "/api/system_stats"), ("GET", "/courier/health"), ("POST", "/courier/files/delete"),
])
def test_what_a_courier_bot_calls_is_allowed(method, path):
    assert route(method, path) is not None


@pytest.mark.parametrize("method, path", [
    ("GET", "/"), ("GET", "/userdata/comfy.settings.json"), ("GET", "/api/userdata/x"), ("POST", "/userdata/x"),
    ("POST", "/customnode/install"), ("POST", "/api/manager/queue/install"), ("GET", "/manager/reboot"),
    ("GET", "/prompt/../userdata"), ("GET", "/prompt/%2e%2e/userdata"), ("GET", "/%2e%2e/userdata"),
    ("GET", "//userdata"), ("GET", "//system_stats"), ("GET", "/system_stats/"), ("GET", "/./system_stats"),
    ("GET", "/history/.."), ("GET", "/history/%2E%2E"), ("GET", "/object_info/a%2F..%2F..%2Fuserdata"),
    ("GET", "/object_info/a%5Cb"), ("GET", "/api/api/prompt"), ("GET", "/api"), ("GET", "/extensions"),
    ("GET", "/internal/logs"), ("POST", "/free"), ("GET", "/courier/sessions"), ("GET", "/courier/anyone/qr.png"),
    ("GET", "/courier/files/delete"), ("POST", "/courier/files"),
    ("GET", "/prompt"), ("GET", "/upload/image"), ("DELETE", "/queue"), ("PUT", "/prompt"), ("POST", "/history"),
    ("GET", "/history"), ("GET", "/api/history"),
    ("GET", "http://127.0.0.1:1/system_stats"), ("GET", "system_stats"),
])
def test_everything_else_is_refused(method, path):
    assert route(method, path) is None


def test_the_allowlist_is_data():
    assert {path for _, path, _ in ROUTES} >= {"/prompt", "/ws", "/view", "/upload/image", "/history/{}", "/queue",
                                               "/interrupt", "/object_info", "/system_stats", "/courier/health"}


@pytest.mark.parametrize("request_line", [
    "GET /userdata/comfy.settings.json", "GET /api/userdata/x", "POST /customnode/install",
    "GET /prompt/../userdata", "GET //userdata", "GET /prompt/%2e%2e/userdata", "GET /%2E%2E/api/userdata",
    "GET /history/..%2Fuserdata", "GET /",
])
async def test_hostile_requests_never_reach_comfyui(proxied, request_line):
    url, backend = proxied
    status, body = await raw_request(url, request_line, f"{CREDENTIAL_HEADER}: {TOKEN}\r\nContent-Length: 0\r\n")
    assert (status, body) == (403, b"not available through the hidden service\n")
    assert backend.seen == []


async def test_allowed_requests_reach_comfyui_with_path_and_query_unchanged(proxied):
    url, backend = proxied
    status, body = await raw_request(url, "GET /api/object_info/abc%20d?max_items=1&x=%2F")
    assert (status, body) == (200, b"backend GET /api/object_info/abc%20d")
    assert backend.seen[0][:2] == ("GET", "/api/object_info/abc%20d")


async def test_the_target_is_fixed(proxied):
    """An absolute-form request line or a foreign Host cannot make the proxy connect elsewhere."""
    url, backend = proxied
    elsewhere = []

    async def record(request):
        elsewhere.append(request.path)
        return web.Response(text="elsewhere")

    other = web.Application()
    other.router.add_get("/{tail:.*}", record)
    async with serve_app(other) as other_url:
        port = other_url.rsplit(":", 1)[1]
        status, body = await raw_request(url, f"GET {other_url}/system_stats",
                                         f"{CREDENTIAL_HEADER}: {TOKEN}\r\nX-Forwarded-Host: 127.0.0.1:{port}\r\n")
        assert (status, body) == (200, b"backend GET /system_stats")
        async with (aiohttp.ClientSession() as session,
                    session.get(f"{url}/system_stats", headers={"Host": f"127.0.0.1:{port}", **AUTH}) as reply):
            assert await reply.text() == "backend GET /system_stats"
    assert elsewhere == []
    target_port = backend.seen[-1][2]["Host"].rsplit(":", 1)[1]
    assert backend.seen[-1][2]["Host"] == f"127.0.0.1:{target_port}" != f"127.0.0.1:{port}"  # ComfyUI's own
    assert CREDENTIAL_HEADER not in backend.seen[-1][2]  # the credential stays at the gateway


async def test_hop_by_hop_headers_are_dropped_both_ways(proxied):
    url, backend = proxied
    async with aiohttp.ClientSession() as session, session.post(f"{url}/courier/files/delete", data=b"{}", headers={
            "Connection": "keep-alive, X-Hop", "X-Hop": "1", "Proxy-Authorization": "Basic eA==",
            "TE": "trailers", "X-End-To-End": "kept", "Cookie": "a=1", **AUTH}) as reply:
        assert reply.status == 200
        assert reply.headers["X-Backend"] == "yes"
        assert "Proxy-Authenticate" not in reply.headers and "timeout=5" not in reply.headers.get("Keep-Alive", "")
    sent = {k.lower(): v for k, v in backend.seen[0][2].items()}
    assert sent["x-end-to-end"] == "kept" and sent["cookie"] == "a=1"
    assert not {"x-hop", "proxy-authorization", "te"} & set(sent)


async def test_downloads_stream_without_being_buffered(proxied):
    """The test receives /view's first chunk while the backend still holds back the second."""
    url, backend = proxied
    async with (aiohttp.ClientSession() as session,
                session.get(f"{url}/view", params={"filename": "a.png", "subfolder": "courier", "type": "output"},
                            headers=AUTH) as reply):
        first = await asyncio.wait_for(reply.content.readexactly(65536), WAIT_S)
        assert first == b"A" * 65536 and backend.first_chunk_out.is_set()
        backend.release_rest.set()
        assert await asyncio.wait_for(reply.content.read(), WAIT_S) == b"B" * 65536


def upload_form(subfolder="courier", filename="in.png", folder="input", overwrite="true") -> aiohttp.FormData:
    form = aiohttp.FormData()
    form.add_field("image", b"\x89PNG-bytes", filename=filename, content_type="image/png")
    form.add_field("type", folder)
    form.add_field("subfolder", subfolder)
    form.add_field("overwrite", overwrite)
    return form


async def test_uploads_are_checked_whole_and_passed_unchanged(proxied):
    """The gateway reads the form (the fields come after the file), checks it, and sends the same bytes on."""
    url, backend = proxied
    async with aiohttp.ClientSession(headers=AUTH) as session:
        async with session.post(f"{url}/upload/image", data=upload_form()) as reply:
            assert reply.status == 200
            received = (await reply.json())["received"]
        for form in (upload_form(subfolder=""), upload_form(subfolder="courier/../x"), upload_form(subfolder="/tmp"),
                     upload_form(filename="../victim.png"), upload_form(folder="output", subfolder="private"),
                     upload_form(subfolder="courier\\..\\x")):
            async with session.post(f"{url}/upload/image", data=form) as reply:
                assert reply.status == 403, await reply.text()
        async with session.post(f"{url}/upload/image", data=b"x" * (32 * 2**20 + 1),
                                headers={"Content-Type": "multipart/form-data; boundary=b"}) as reply:
            assert reply.status == 413
    assert received > 100 and [seen[:2] for seen in backend.seen] == [("POST", "/upload/image")]


async def test_websocket_frames_pass_both_ways(proxied):
    url, backend = proxied
    async with (aiohttp.ClientSession() as session,
                session.ws_connect(f"{url}/ws", params={"clientId": "c1"}, headers=AUTH) as ws):
        greeting = await ws.receive(WAIT_S)
        assert (greeting.type, greeting.data) == (WSMsgType.BINARY, PREVIEW)  # ComfyUI -> client, binary
        await ws.send_str('{"type": "hello"}')
        reply = await ws.receive(WAIT_S)
        assert (reply.type, reply.data) == (WSMsgType.TEXT, 'echo {"type": "hello"}')
        await ws.send_bytes(b"\x00\xffbinary")
        reply = await ws.receive(WAIT_S)
        assert (reply.type, reply.data) == (WSMsgType.BINARY, b"echo \x00\xffbinary")
    assert backend.seen[0][:2] == ("GET", "/ws")


async def test_expose_ui_passes_everything_but_keeps_the_target():
    backend = Backend()
    async with serve_app(backend.app()) as target, serve_app(gateway_app(target, expose_ui=True)) as url:
        assert await raw_request(url, "GET /userdata/comfy.settings.json") == (
            200, b"backend GET /userdata/comfy.settings.json")
    assert backend.seen[-1][2]["Host"] == "x.anon"  # the editor's Origin names it: ComfyUI compares the two


async def test_an_unreachable_comfyui_is_a_502():
    async with serve_app(web.Application()) as gone:
        pass
    async with serve_app(gateway_app(gone, policy=policy())) as url:
        status, body = await raw_request(url, "GET /system_stats")
    assert status == 502 and body == b"ComfyUI is not reachable\n"


async def test_without_the_credential_everything_is_refused(proxied):
    url, backend = proxied
    for headers in ("", f"{CREDENTIAL_HEADER}: wrong\r\n", f"{CREDENTIAL_HEADER}: \r\n"):
        for line in ("GET /system_stats", "GET /courier/health", "GET /view?filename=a.png&subfolder=courier",
                     "POST /courier/files/delete", "GET /object_info"):
            assert await raw_request(url, line, headers + "Content-Length: 0\r\n") == (
                403, b"not available through the hidden service\n")
    assert backend.seen == []


async def test_each_of_several_credentials_passes():
    backend = Backend()
    async with serve_app(backend.app()) as target, \
            serve_app(gateway_app(target, policy=policy("one", "two"))) as url:
        for token in ("one", "two"):
            assert (await raw_request(url, "GET /system_stats", f"{CREDENTIAL_HEADER}: {token}\r\n"))[0] == 200
        assert (await raw_request(url, "GET /system_stats", f"{CREDENTIAL_HEADER}: three\r\n"))[0] == 403


@pytest.mark.parametrize("query, status", [
    ("filename=a.png&subfolder=courier&type=output", 200),
    ("filename=a.png&subfolder=courier/bench&type=temp", 200),
    ("filename=a.png&subfolder=courier&type=input", 200),
    ("filename=a.png&type=output", 403), ("filename=a.png&subfolder=&type=output", 403),
    ("filename=a.png&subfolder=private&type=output", 403), ("filename=a.png&subfolder=courier/..&type=output", 403),
    ("filename=a.png&subfolder=courier/../x&type=output", 403), ("filename=../a.png&subfolder=courier", 403),
    ("filename=a.png&subfolder=courier&subfolder=private", 403), ("filename=a.png&subfolder=/etc", 403),
    ("filename=a.png&subfolder=courier&type=models", 403), ("subfolder=courier", 403),
    ("filename=a.png&subfolder=courierx", 403),
])
async def test_view_is_only_for_couriers_files(query, status):
    backend = Backend()
    backend.release_rest.set()
    async with serve_app(backend.app()) as target, serve_app(gateway_app(target, policy=policy())) as url:
        assert (await raw_request(url, f"GET /view?{query}"))[0] == status


async def test_a_graph_check_refuses_a_graph_with_its_reason():
    """Policy.graph_check sees each prompt's graph once its node types passed; a reason is a 403 that says it."""
    backend = Backend()
    checked = []

    def check(graph: dict) -> str | None:
        checked.append(graph)
        return "image names a file outside courier/" if "evil" in json.dumps(graph) else None

    gate = policy()
    gate.graph_check = check
    good = {"1": {"class_type": "ImageInvert", "inputs": {"image": "fine.png"}}}
    bad = {"1": {"class_type": "ImageInvert", "inputs": {"image": "evil.png"}}}
    async with serve_app(backend.app()) as target, serve_app(gateway_app(target, policy=gate)) as url, \
            aiohttp.ClientSession(headers=AUTH) as session:
        async with session.post(f"{url}/prompt", json={"prompt": bad, "client_id": "c", "prompt_id": "p1"}) as reply:
            assert (reply.status, await reply.text()) == (
                403, "not available through the hidden service: image names a file outside courier/\n")
        async with session.post(f"{url}/prompt", json={"prompt": good, "client_id": "c", "prompt_id": "p2"}) as reply:
            assert reply.status == 200
    assert checked == [bad, good]
    assert [seen[:2] for seen in backend.seen] == [("POST", "/prompt")]
