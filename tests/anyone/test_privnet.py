"""End to end on the private Anyone network (127.0.0.1 only): hidden service, gateway, client auth, restarts."""

import asyncio
import os
import signal
import time

import aiohttp
import httpx
import pytest
from aiohttp import WSMsgType, web
from aiohttp_socks import (
    ProxyConnectionError,
    ProxyConnector,
    ProxyError,
    ProxyTimeoutError,
)
from yarl import URL

from comfyui_courier.anyone import (
    describe_proxy_error,
    make_session,
    telegram_proxy_url,
    write_client_credential,
)
from comfyui_courier.anyone.gateway_policy import CREDENTIAL_HEADER
from comfyui_courier.core.config import Settings
from comfyui_courier.tests.fixtures.anyone import (
    share_client_key,
    shared_credential,
    socket_owner,
    tcp_clients,
)
from comfyui_courier.tests.support.http import serve_app

REACH_S = 90  # descriptor upload + rendezvous on a fresh service take a few seconds here
ATTEMPT_S = 10  # a stuck attempt (old descriptor, stuck circuit) is dropped and retried on fresh circuits
PREVIEW = b"\x00\x00\x00\x01\x00\x00\x00\x02\x89PNG\r\n\x1a\n"  # a binary preview frame as ComfyUI sends it


class FakeComfy:
    """A loopback stand-in for ComfyUI. For each request it records which process holds the open connection
    into the hidden service's gateway (``candidates``: pid -> name), i.e. who delivered it."""

    def __init__(self):
        self.callers: list[list[str]] = []
        self.seen: list[str] = []
        self.gateway_port = 0
        self.candidates: dict[int, str] = {}
        self.url = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/system_stats", self.system_stats)
        app.router.add_post("/prompt", self.prompt)
        app.router.add_get("/queue", self.queue)  # the gateway asks whether a prompt id is taken
        app.router.add_get("/history/{prompt_id}", self.history)
        app.router.add_get("/ws", self.ws)
        app.router.add_route("*", "/{tail:.*}", self.anything)  # /userdata, Manager: must never be reached
        return app

    def record(self, request) -> None:
        self.seen.append(f"{request.method} {request.rel_url.raw_path}")
        if self.gateway_port:
            self.callers.append([socket_owner(port, self.gateway_port, self.candidates)
                                 for port in tcp_clients(self.gateway_port)])

    async def system_stats(self, request):
        self.record(request)
        return web.json_response({"system": {"os": "posix", "comfyui_version": "fake"}, "devices": []})

    async def prompt(self, request):
        self.record(request)
        body = await request.json()
        return web.json_response({"prompt_id": body.get("prompt_id", "p1"), "number": 0, "node_errors": {}})

    async def queue(self, request):
        return web.json_response({"queue_running": [], "queue_pending": []})

    async def history(self, request):
        return web.json_response({})

    async def ws(self, request):
        """A status text frame, a binary preview frame, then echo what the client sends."""
        self.record(request)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"type": "status", "data": {"sid": request.query["clientId"]}})
        await ws.send_bytes(PREVIEW)
        async for message in ws:
            if message.type == WSMsgType.BINARY:
                await ws.send_bytes(b"echo " + message.data)
        return ws

    async def anything(self, request):
        self.record(request)
        return web.Response(text="reached ComfyUI")


@pytest.fixture
async def fake_comfyui():
    fake = FakeComfy()
    async with serve_app(fake.app()) as url:
        fake.url = url
        yield fake


def watch(fake: FakeComfy, service, privnet) -> None:
    """Have ``fake`` tell which process delivers each request into ``service``'s gateway."""
    fake.gateway_port = int(service.gateway.address.rsplit(":", 1)[1])
    fake.candidates = {os.getpid(): "this test process (not through anon)",
                       service.process.pid: "the hidden service's anon",
                       **{n.process.pid: f"privnet {n.role} {n.name}" for n in privnet.nodes if n.process}}


async def get_stats(url: str, socks_url: str, credential: str) -> dict:
    """GET /system_stats through Anyone (private mode) with a bot-host credential, retried on fresh circuits
    until REACH_S."""
    deadline = time.monotonic() + REACH_S
    attempt = aiohttp.ClientTimeout(total=ATTEMPT_S)
    while True:
        try:
            async with make_session(url, Settings(private_mode=True), socks_url,
                                    headers={CREDENTIAL_HEADER: credential}) as session, \
                    session.get(f"{url}/system_stats", timeout=attempt) as reply:
                    reply.raise_for_status()
                    return await reply.json()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} unreachable after {REACH_S} s: {describe_proxy_error(exc)}") from exc
            await asyncio.sleep(0.5)


async def refusal(url: str, socks_url: str) -> str:
    """Why a client without a key cannot reach ``url`` (retried until anon says it is client authorization)."""
    deadline = time.monotonic() + REACH_S
    while True:  # until anon has the descriptor and says why it cannot use it
        with pytest.raises((aiohttp.ClientError, OSError, asyncio.TimeoutError)) as failure:
            async with make_session(url, Settings(), socks_url) as session:
                await session.get(f"{url}/system_stats", timeout=aiohttp.ClientTimeout(total=ATTEMPT_S))
        reason = describe_proxy_error(failure.value)
        if "client authorization" in reason or time.monotonic() > deadline:
            return reason
        await asyncio.sleep(0.5)


async def test_request_reaches_loopback_comfyui_through_hidden_service(
        anyone_privnet, anyone_service_factory, fake_comfyui):
    service = await anyone_service_factory(fake_comfyui.url)
    address = service.onion_address
    assert address and address.endswith(".anon") and len(address) == 61
    assert service.health()["state"] == "ok" and service.health()["bootstrap"] == 100
    watch(fake_comfyui, service, anyone_privnet)
    stats = await get_stats(f"http://{address}", service.socks_url,  # this host's anon holds the bot-host key
                            shared_credential(service.dir.parent))
    assert stats["system"]["comfyui_version"] == "fake"
    # delivered by the hidden service's anon into the gateway (direct or exit traffic would show another owner)
    assert fake_comfyui.callers[-1] == ["the hidden service's anon"], fake_comfyui.callers


async def test_bot_routes_pass_the_onion_and_nothing_else(anyone_service_factory, fake_comfyui):
    """Through an authorized client: /prompt and /ws (text and binary frames both ways) work; user data and
    ComfyUI-Manager routes answer 403 from the gateway and never reach ComfyUI."""
    service = await anyone_service_factory(fake_comfyui.url)
    url = f"http://{service.onion_address}"
    credential = shared_credential(service.dir.parent)
    await get_stats(url, service.socks_url, credential)
    timeout = aiohttp.ClientTimeout(total=REACH_S)
    async with make_session(url, Settings(private_mode=True), service.socks_url,
                            headers={CREDENTIAL_HEADER: credential}) as session:
        async with session.post(f"{url}/prompt", json={"prompt": {}, "prompt_id": "onion-1", "client_id": "bot-1"},
                                timeout=timeout) as reply:
            assert reply.status == 200 and (await reply.json())["prompt_id"] == "onion-1"
        async with session.ws_connect(f"{url}/ws", params={"clientId": "bot-1"}) as ws:
            status = await ws.receive(REACH_S)
            assert status.type == WSMsgType.TEXT and status.json() == {"type": "status", "data": {"sid": "bot-1"}}
            preview = await ws.receive(REACH_S)
            assert (preview.type, preview.data) == (WSMsgType.BINARY, PREVIEW)
            await ws.send_bytes(b"\x00\x01binary")
            echo = await ws.receive(REACH_S)
            assert (echo.type, echo.data) == (WSMsgType.BINARY, b"echo \x00\x01binary")
        for method, path in (("GET", "/userdata/comfy.settings.json"), ("GET", "/api/userdata?dir=workflows"),
                             ("POST", "/customnode/install"), ("POST", "/api/manager/queue/install"),
                             ("GET", "/prompt/../userdata/x"), ("GET", "/")):
            async with session.request(method, URL(url + path, encoded=True), timeout=timeout) as reply:
                assert (reply.status, await reply.text()) == (403, "not available through the hidden service\n")
    assert fake_comfyui.seen == ["GET /system_stats", "POST /prompt", "GET /ws"]


async def test_client_authorization(anyone_privnet, anyone_service_factory, fake_comfyui, tmp_path):
    """On by default: the first start provisions keys and a client for this host; strangers are refused;
    the key copied to another bot host works; a client added while running works; opting out is open."""
    service = await anyone_service_factory(fake_comfyui.url, data_dir=tmp_path / "comfy")
    assert service.health()["client_auth"] is True and service.hidden_service.clients() == ["bot-host"]
    url = f"http://{service.onion_address}"
    stranger = await anyone_service_factory(data_dir=tmp_path / "stranger")  # our anon: SOCKS ExtendedErrors
    assert "requires client authorization" in await refusal(url, stranger.socks_url)

    share_client_key(tmp_path / "comfy", tmp_path / "bot")  # what the operator copies to another bot host
    bot = await anyone_service_factory(data_dir=tmp_path / "bot")
    credential = shared_credential(tmp_path / "comfy")
    assert (await get_stats(url, bot.socks_url, credential))["system"]["comfyui_version"] == "fake"

    late_line, late_credential = await service.add_client("late")  # authorized while running: anon reloads
    write_client_credential(tmp_path / "late" / "anyone" / "client_auth", "comfy", late_line)
    late = await anyone_service_factory(data_dir=tmp_path / "late")
    assert (await get_stats(url, late.socks_url, late_credential.split()[1]))["system"]["comfyui_version"] == "fake"

    opened = await anyone_service_factory(fake_comfyui.url, data_dir=tmp_path / "open", anyone_client_auth=False)
    assert "CLIENT AUTHORIZATION IS OFF" in opened.health()["warning"]
    stats = await get_stats(f"http://{opened.onion_address}", anyone_privnet.socks_url,  # no key needed now
                            shared_credential(tmp_path / "open"))
    assert stats["system"]["comfyui_version"] == "fake"


async def test_killed_anon_is_restarted_and_keeps_its_address(anyone_privnet, anyone_service_factory, fake_comfyui):
    service = await anyone_service_factory(fake_comfyui.url)
    address, pid = service.onion_address, service.process.pid
    await get_stats(f"http://{address}", service.socks_url, shared_credential(service.dir.parent))

    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while service.process.restarts < 1 or service.health()["state"] != "ok":
        assert time.monotonic() < deadline, f"not restarted: {service.health()}"
        await asyncio.sleep(0.1)
    assert service.process.pid != pid
    assert service.onion_address == address
    await get_stats(f"http://{address}", service.socks_url, shared_credential(service.dir.parent))


async def test_bot_traffic_through_an_exit_reaches_loopback(anyone_privnet, fake_comfyui):
    """The proxy_telegram path: SOCKS -> exit relay -> a server on 127.0.0.1 (the Bot API emulator in CI)."""
    host, port = "127.0.0.1", int(fake_comfyui.url.rsplit(":", 1)[1])
    socks_port = int(anyone_privnet.socks_url.rsplit(":", 1)[1])
    deadline = time.monotonic() + REACH_S
    while True:  # exits come and go from a young network's consensus: retry on fresh circuits
        connector = ProxyConnector(host="127.0.0.1", port=socks_port, rdns=True,
                                   username=str(time.monotonic()), password="x")
        try:
            async with aiohttp.ClientSession(connector=connector) as session, \
                    session.get(f"http://{host}:{port}/system_stats",
                                timeout=aiohttp.ClientTimeout(total=ATTEMPT_S)) as reply:
                assert reply.status == 200
                break
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError, ProxyError, ProxyTimeoutError,
                ProxyConnectionError):
            assert time.monotonic() < deadline, "no exit reached 127.0.0.1"
            await asyncio.sleep(0.5)

    proxy = telegram_proxy_url(Settings(proxy_telegram=True), anyone_privnet.socks_url)
    async with httpx.AsyncClient(proxy=proxy) as client:
        assert (await client.get(f"http://{host}:{port}/system_stats")).status_code == 200
