"""The hidden service's filtering proxy (anyone/gateway.py, its policy in gateway_policy.py, bodies read by
gateway_bodies.py) in front of a loopback stand-in for ComfyUI."""

import asyncio
import json

import aiohttp
import pytest
from aiohttp import WSMsgType, web

from comfyui_courier.anyone import ownership
from comfyui_courier.anyone.gateway import gateway_app
from comfyui_courier.anyone.gateway_policy import CREDENTIAL_HEADER, ROUTES, Policy, digest, route
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
    """Records every request that reached it; /ws echoes frames and greets with a binary preview. /prompt,
    /queue, /history/{id} and /upload/image answer as ComfyUI 0.3.64 does (reference/COMFYUI_API.md): a
    prompt with a node without its ``image`` input gets 400, an accepted one waits in ``queue_pending``; an upload
    that may not overwrite an existing name is stored as ``name (1).ext``."""

    def __init__(self):
        self.seen: list[tuple[str, str, dict]] = []
        self.first_chunk_out = asyncio.Event()  # /view has sent its first chunk
        self.release_rest = asyncio.Event()  # ... and may send the rest
        self.pending: list[list] = []  # queue items [number, prompt_id, graph, extra_data, outputs]
        self.history: dict[str, dict] = {}
        self.files: dict[tuple[str, str, str], bytes] = {}  # (type, subfolder, name) -> bytes
        self.deleted: list[dict] = []  # the bodies of /courier/files/delete

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_get("/ws", self.ws)
        app.router.add_get("/view", self.view)
        app.router.add_post("/upload/image", self.upload)
        app.router.add_post("/prompt", self.prompt)
        app.router.add_get("/queue", self.queue)
        app.router.add_get("/history/{prompt_id}", self.history_of)
        app.router.add_post("/courier/files/delete", self.delete_files)
        app.router.add_route("*", "/{tail:.*}", self.anything)
        return app

    def record(self, request):
        self.seen.append((request.method, request.rel_url.raw_path, dict(request.headers)))

    def reached(self, method: str, path: str) -> int:
        return sum(1 for seen in self.seen if seen[:2] == (method, path))

    async def anything(self, request):
        self.record(request)
        reply = web.Response(text=f"backend {request.method} {request.rel_url.raw_path}")
        reply.headers["Keep-Alive"] = "timeout=5"
        reply.headers["Proxy-Authenticate"] = "Basic"
        reply.headers["X-Backend"] = "yes"
        return reply

    async def prompt(self, request):
        self.record(request)
        data = await request.json()
        if any("image" not in node.get("inputs", {}) for node in data["prompt"].values()):
            return web.json_response({"error": {"type": "prompt_outputs_failed_validation", "message": "Prompt "
                                      "outputs failed validation", "details": "", "extra_info": {}},
                                      "node_errors": {"1": {"errors": [{"type": "required_input_missing"}]}}},
                                     status=400)
        number = len(self.pending) + len(self.history)
        self.pending.append([number, data["prompt_id"], data["prompt"], {"client_id": data["client_id"]}, ["1"]])
        return web.json_response({"prompt_id": data["prompt_id"], "number": number, "node_errors": {}})

    async def queue(self, request):
        self.record(request)
        return web.json_response({"queue_running": [], "queue_pending": self.pending})

    async def history_of(self, request):
        self.record(request)
        prompt_id = request.match_info["prompt_id"]
        return web.json_response({prompt_id: self.history[prompt_id]} if prompt_id in self.history else {})

    async def delete_files(self, request):
        """Courier's route (server_routes/files.py): it counts what it deleted."""
        self.record(request)
        self.deleted.append(await request.json())
        return web.json_response({"deleted": len(self.deleted[-1]["files"]), "missing": 0, "refused": 0, "failed": 0})

    def finish(self, prompt_id: str, outputs: dict) -> None:
        """The pending prompt ``prompt_id`` ran: into the history with ``outputs``."""
        item = next(item for item in self.pending if item[1] == prompt_id)
        self.pending.remove(item)
        self.history[prompt_id] = {"prompt": item, "outputs": outputs, "status": {"status_str": "success"}}

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
        form = await request.post()
        image, folder, subfolder = form["image"], form.get("type", "input"), form.get("subfolder", "")
        name = image.filename
        if form.get("overwrite") not in ("true", "1"):
            stem, dot, ext = name.rpartition(".")
            count = 0
            while (folder, subfolder, name) in self.files:
                count += 1
                name = f"{stem} ({count}){dot}{ext}"
        self.files[(folder, subfolder, name)] = image.file.read()
        return web.json_response({"name": name, "subfolder": subfolder, "type": folder})

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
    backend.policy = policy()
    async with serve_app(backend.app()) as target, serve_app(gateway_app(target, policy=backend.policy)) as url:
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
    async with aiohttp.ClientSession() as session, session.get(f"{url}/system_stats", headers={
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
    backend.policy.owned.wrote(digest(TOKEN), ("output", "courier", "a.png"))
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


async def test_uploads_are_checked_whole_and_stored_as_sent(proxied):
    """The gateway reads the form (the fields come after the file), checks it, and sends its picture on."""
    url, backend = proxied
    async with aiohttp.ClientSession(headers=AUTH) as session:
        async with session.post(f"{url}/upload/image", data=upload_form()) as reply:
            assert (reply.status, await reply.json()) == (200, {"name": "in.png", "subfolder": "courier",
                                                                "type": "input"})
        for form in (upload_form(subfolder=""), upload_form(subfolder="courier/../x"), upload_form(subfolder="/tmp"),
                     upload_form(filename="../victim.png"), upload_form(folder="output", subfolder="private"),
                     upload_form(subfolder="courier\\..\\x")):
            async with session.post(f"{url}/upload/image", data=form) as reply:
                assert reply.status == 403, await reply.text()
        async with session.post(f"{url}/upload/image", data=b"x" * (32 * 2**20 + 1),
                                headers={"Content-Type": "multipart/form-data; boundary=b"}) as reply:
            assert reply.status == 413
    assert backend.files == {("input", "courier", "in.png"): b"\x89PNG-bytes"}
    assert [seen[:2] for seen in backend.seen] == [("POST", "/upload/image")]


def picture(size: int) -> bytes:
    """A PNG signature and ``size`` bytes in all."""
    return b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * (size // 256) + b"\0" * (size % 256 - 8)


async def slowly(data: bytes, pieces: int, pause_s: float):
    """``data`` as a chunked body in ``pieces``, ``pause_s`` apart (as anon hands a body over, in cells)."""
    size = -(-len(data) // pieces)
    for start in range(0, len(data), size):
        yield data[start:start + size]
        await asyncio.sleep(pause_s)


BOUNDARY = "courier-test-boundary"


def multipart(image: bytes, filename: str, **fields: str) -> bytes:
    """An /upload/image form as a browser or aiohttp writes it (Content-Type ``FORM_TYPE``)."""
    parts = [f'Content-Disposition: form-data; name="image"; filename="{filename}"\r\n'
             f"Content-Type: image/png\r\n\r\n".encode() + image]
    parts += [f'Content-Disposition: form-data; name="{name}"\r\n\r\n{value}'.encode()
              for name, value in fields.items()]
    return b"".join(f"--{BOUNDARY}\r\n".encode() + part + b"\r\n" for part in parts) + f"--{BOUNDARY}--\r\n".encode()


FORM_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


@pytest.mark.parametrize("size", [2**20, 10 * 2**20])
async def test_an_upload_arriving_in_pieces_is_read_to_its_end(proxied, size):
    url, backend = proxied
    sent = picture(size)
    body = multipart(sent, "big.png", type="input", subfolder="courier", overwrite="true")
    async with aiohttp.ClientSession(headers={**AUTH, "Content-Type": FORM_TYPE}) as session, \
            session.post(f"{url}/upload/image", data=slowly(body, 4, 0.1)) as reply:
        assert reply.status == 200, await reply.text()
    assert backend.files[("input", "courier", "big.png")] == sent


async def test_a_chunked_upload_past_the_limit_is_a_413(proxied):
    url, backend = proxied
    async with aiohttp.ClientSession(headers={**AUTH, "Content-Type": "multipart/form-data; boundary=b"}) as session, \
            session.post(f"{url}/upload/image", data=slowly(b"x" * (32 * 2**20 + 1), 8, 0)) as reply:
        assert reply.status == 413
    assert backend.seen == []


async def test_a_prompt_arriving_in_two_pieces_is_read_whole(proxied):
    url, backend = proxied
    body = json.dumps({"prompt": {"1": {"class_type": "ImageInvert", "inputs": {"image": "y" * 600}}},
                       "client_id": "c", "prompt_id": "p-slow"}).encode()
    async with aiohttp.ClientSession(headers={**AUTH, "Content-Type": "application/json"}) as session, \
            session.post(f"{url}/prompt", data=slowly(body, 2, 0.3)) as reply:
        assert (reply.status, (await reply.json())["prompt_id"]) == (200, "p-slow")
    assert backend.pending[0][1] == "p-slow"


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
    ("filename=b.png&subfolder=courier&type=output", 403),  # under courier/, but nobody's it knows of
    ("filename=theirs.png&subfolder=courier&type=output", 403),  # another credential's
    ("filename=a.png&type=output", 403), ("filename=a.png&subfolder=&type=output", 403),
    ("filename=a.png&subfolder=private&type=output", 403), ("filename=a.png&subfolder=courier/..&type=output", 403),
    ("filename=a.png&subfolder=courier/../x&type=output", 403), ("filename=../a.png&subfolder=courier", 403),
    ("filename=a.png&subfolder=courier&subfolder=private", 403), ("filename=a.png&subfolder=/etc", 403),
    ("filename=a.png&subfolder=courier&type=models", 403), ("subfolder=courier", 403),
    ("filename=a.png&subfolder=courierx", 403),
])
async def test_view_is_only_for_the_callers_files(query, status):
    backend = Backend()
    backend.release_rest.set()
    gate = policy(TOKEN, "other")
    for folder, subfolder in (("output", "courier"), ("temp", "courier/bench"), ("input", "courier")):
        gate.owned.wrote(digest(TOKEN), (folder, subfolder, "a.png"))
    gate.owned.wrote(digest("other"), ("output", "courier", "theirs.png"))
    async with serve_app(backend.app()) as target, serve_app(gateway_app(target, policy=gate)) as url:
        assert (await raw_request(url, f"GET /view?{query}"))[0] == status


VICTIM = "victim-credential"


@pytest.fixture
async def two_callers():
    """(gateway URL, Backend, attacker's session, victim's session): two credentials, one gateway."""
    backend = Backend()
    backend.release_rest.set()
    async with serve_app(backend.app()) as target, \
            serve_app(gateway_app(target, policy=policy(TOKEN, VICTIM))) as url, \
            aiohttp.ClientSession(headers=AUTH) as attacker, \
            aiohttp.ClientSession(headers={CREDENTIAL_HEADER: VICTIM}) as victim:
        yield url, backend, attacker, victim


def graph(valid: bool = True) -> dict:
    """One node; without its image ComfyUI refuses the prompt (400)."""
    return {"1": {"class_type": "ImageInvert", "inputs": {"image": ["2", 0]} if valid else {}}}


async def status_of(session, method: str, url: str, **kwargs) -> int:
    async with session.request(method, url, **kwargs) as reply:
        await reply.read()
        return reply.status


async def test_a_prompt_id_comfyui_knows_cannot_be_claimed(two_callers):
    """The victim's id (queued through the gateway, or by the local bot / the editor: ComfyUI alone knows it)
    on a prompt ComfyUI would refuse gets 409 and never reaches ComfyUI; it cancels, interrupts and reads
    nothing of the victim's."""
    url, backend, attacker, victim = two_callers
    assert await status_of(victim, "POST", f"{url}/prompt", json={
        "prompt": graph(), "client_id": "victim-client", "prompt_id": "victim-1"}) == 200
    backend.pending.append([7, "local-1", graph(), {"client_id": "editor"}, ["1"]])  # queued on the machine
    for victim_id in ("victim-1", "local-1"):
        assert await status_of(attacker, "POST", f"{url}/prompt", json={
            "prompt": graph(valid=False), "client_id": "attacker", "prompt_id": victim_id}) == 409
        assert await status_of(attacker, "POST", f"{url}/queue", json={"delete": [victim_id]}) == 403
        assert await status_of(attacker, "POST", f"{url}/interrupt", json={"prompt_id": victim_id}) == 403
    backend.finish("victim-1", {"9": {"images": [{"filename": "v.png", "subfolder": "courier", "type": "output"}]}})
    async with attacker.get(f"{url}/history/victim-1") as reply:
        assert (reply.status, await reply.json()) == (200, {})
    async with victim.get(f"{url}/history/victim-1") as reply:
        assert (await reply.json())["victim-1"]["prompt"][3] == {"client_id": "victim-client"}
    assert backend.reached("POST", "/prompt") == 1 and not backend.reached("POST", "/queue")


async def test_a_prompt_comfyui_refused_is_nobodys(two_callers):
    url, backend, attacker, _ = two_callers
    async with attacker.post(f"{url}/prompt", json={"prompt": graph(valid=False), "client_id": "attacker",
                                                    "prompt_id": "fresh-1"}) as reply:
        assert reply.status == 400 and (await reply.json())["error"]["type"] == "prompt_outputs_failed_validation"
    assert await status_of(attacker, "POST", f"{url}/queue", json={"delete": ["fresh-1"]}) == 403
    assert await status_of(attacker, "POST", f"{url}/interrupt", json={"prompt_id": "fresh-1"}) == 403


async def test_the_queue_lists_only_the_callers_prompts(two_callers):
    """Others' entries are left out, ids included; a prompt ComfyUI queued under the caller's client_id (a
    Benchmark node's runs) is the caller's."""
    url, backend, attacker, victim = two_callers
    for session, client_id, prompt_id in ((victim, "victim-client", "victim-1"), (attacker, "attacker", "mine-1")):
        assert await status_of(session, "POST", f"{url}/prompt", json={
            "prompt": graph(), "client_id": client_id, "prompt_id": prompt_id}) == 200
    backend.pending.append([7, "local-1", graph(), {"client_id": "editor"}, ["1"]])
    backend.pending.append([8, "bench-run-2", graph(), {"client_id": "attacker"}, ["1"]])
    async with attacker.get(f"{url}/queue") as reply:
        queue = await reply.json()
    assert queue["queue_running"] == []
    assert [item[1] for item in queue["queue_pending"]] == ["mine-1", "bench-run-2"]
    assert "victim" not in json.dumps(queue) and "local-1" not in json.dumps(queue)
    assert await status_of(attacker, "POST", f"{url}/queue", json={"delete": ["bench-run-2"]}) == 200


async def test_one_credentials_flood_never_evicts_anothers_prompts(two_callers, monkeypatch):
    url, backend, attacker, victim = two_callers
    monkeypatch.setattr(ownership, "REMEMBERED", 5)
    assert await status_of(victim, "POST", f"{url}/prompt", json={
        "prompt": graph(), "client_id": "victim-client", "prompt_id": "victim-1"}) == 200
    for n in range(12):  # accepted and refused ones
        await status_of(attacker, "POST", f"{url}/prompt", json={
            "prompt": graph(valid=n % 2 == 0), "client_id": "attacker", "prompt_id": f"f{n}"})
    assert backend.reached("POST", "/prompt") == 13
    assert await status_of(victim, "POST", f"{url}/queue", json={"delete": ["victim-1"]}) == 200
    assert await status_of(attacker, "POST", f"{url}/queue", json={"delete": ["f0"]}) == 403  # its own oldest went


async def test_an_upload_never_replaces_another_credentials_file(two_callers):
    """A pending job picture (``job-5.png``) cannot be swapped: the second writer's copy gets a name of its own."""
    url, backend, attacker, victim = two_callers
    form = {"type": "input", "subfolder": "courier", "overwrite": "true"}
    async with victim.post(f"{url}/upload/image", data=multipart(b"victim", "job-5.png", **form),
                           headers={"Content-Type": FORM_TYPE}) as reply:
        assert (await reply.json())["name"] == "job-5.png"
    async with attacker.post(f"{url}/upload/image", data=multipart(b"swap", "job-5.png", **form),
                             headers={"Content-Type": FORM_TYPE}) as reply:
        assert (reply.status, (await reply.json())["name"]) == (200, "job-5 (1).png")
    async with victim.post(f"{url}/upload/image", data=multipart(b"victim again", "job-5.png", **form),
                           headers={"Content-Type": FORM_TYPE}) as reply:
        assert (await reply.json())["name"] == "job-5.png"  # its own: overwritten as asked
    assert backend.files == {("input", "courier", "job-5.png"): b"victim again",
                             ("input", "courier", "job-5 (1).png"): b"swap"}
    assert await status_of(attacker, "GET", f"{url}/view", params={
        "filename": "job-5.png", "subfolder": "courier", "type": "input"}) == 403


async def test_files_delete_passes_only_the_callers_files_and_prompts(two_callers):
    url, backend, attacker, victim = two_callers
    form = {"type": "input", "subfolder": "courier", "overwrite": "true"}
    for session, name in ((victim, "job-5.png"), (attacker, "job-6.png")):
        async with session.post(f"{url}/upload/image", data=multipart(b"x", name, **form),
                                headers={"Content-Type": FORM_TYPE}):
            pass
    assert await status_of(victim, "POST", f"{url}/prompt", json={
        "prompt": graph(), "client_id": "victim-client", "prompt_id": "victim-1"}) == 200
    sent = {"files": [{"filename": name, "subfolder": "courier", "type": "input"}
                      for name in ("job-5.png", "job-6.png")], "prompt_ids": ["victim-1"]}
    async with attacker.post(f"{url}/courier/files/delete", json=sent) as reply:
        assert (reply.status, await reply.json()) == (200, {"deleted": 1, "missing": 0, "refused": 1, "failed": 0})
    assert backend.deleted == [{"files": [{"filename": "job-6.png", "subfolder": "courier", "type": "input"}],
                                "prompt_ids": []}]
    assert await status_of(attacker, "POST", f"{url}/courier/files/delete", data=b"[]",
                           headers={"Content-Type": "application/json"}) == 400
