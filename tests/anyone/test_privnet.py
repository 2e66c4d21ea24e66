"""End to end on the private Anyone network (127.0.0.1 only): hidden service, client auth, restarts."""

import asyncio
import os
import signal
import time

import aiohttp
import pytest
from aiohttp import web
from aiohttp_socks import (
    ProxyConnectionError,
    ProxyConnector,
    ProxyError,
    ProxyTimeoutError,
)
from comfyui_courier.anyone import (
    describe_proxy_error,
    make_session,
    telegram_proxy_url,
    write_client_credential,
)
from comfyui_courier.anyone.hidden_service import HiddenService
from comfyui_courier.config import Settings
from comfyui_courier.tests.support.http import serve_app

REACH_S = 90  # descriptor upload + rendezvous on a fresh service take a few seconds here
ATTEMPT_S = 10  # a stuck attempt (old descriptor, stuck circuit) is dropped and retried on fresh circuits


@pytest.fixture
async def fake_comfyui():
    """A loopback server answering /system_stats like ComfyUI; records who asked."""
    peers = []

    async def system_stats(request):
        peers.append(request.remote)
        return web.json_response({"system": {"os": "posix", "comfyui_version": "fake"}, "devices": []})

    app = web.Application()
    app.router.add_get("/system_stats", system_stats)
    async with serve_app(app) as url:
        yield url, peers


async def get_stats(url: str, socks_url: str) -> dict:
    """GET /system_stats through Anyone (private mode), retried on fresh circuits until REACH_S."""
    deadline = time.monotonic() + REACH_S
    attempt = aiohttp.ClientTimeout(total=ATTEMPT_S)
    while True:
        try:
            async with make_session(url, Settings(private_mode=True), socks_url) as session, \
                    session.get(f"{url}/system_stats", timeout=attempt) as reply:
                    reply.raise_for_status()
                    return await reply.json()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{url} unreachable after {REACH_S} s: {describe_proxy_error(exc)}") from exc
            await asyncio.sleep(0.5)


async def test_request_reaches_loopback_comfyui_through_hidden_service(
        anyone_privnet, anyone_service_factory, fake_comfyui):
    backend, peers = fake_comfyui
    service = await anyone_service_factory(backend)
    address = service.onion_address
    assert address and address.endswith(".anon") and len(address) == 61
    assert service.health()["state"] == "ok" and service.health()["bootstrap"] == 100
    stats = await get_stats(f"http://{address}", anyone_privnet.socks_url)
    assert stats["system"]["comfyui_version"] == "fake"
    assert peers[-1] == "127.0.0.1"  # anon delivers to the loopback backend


async def test_client_authorization(anyone_service_factory, fake_comfyui, tmp_path):
    backend, _ = fake_comfyui
    open_service = await anyone_service_factory(backend, data_dir=tmp_path / "comfy")
    address = open_service.onion_address
    await open_service.stop()
    client_line = HiddenService(tmp_path / "comfy" / "anyone", "unused", client_auth=True).add_client("bot")

    service = await anyone_service_factory(backend, data_dir=tmp_path / "comfy", anyone_client_auth=True)
    assert service.onion_address == address  # same keys, same address
    url = f"http://{address}"

    stranger = await anyone_service_factory(data_dir=tmp_path / "stranger")
    deadline = time.monotonic() + REACH_S
    while True:  # until anon has the new descriptor and says why it cannot use it
        with pytest.raises((aiohttp.ClientError, OSError, asyncio.TimeoutError)) as failure:
            async with make_session(url, Settings(), stranger.socks_url) as session:
                await session.get(f"{url}/system_stats", timeout=aiohttp.ClientTimeout(total=ATTEMPT_S))
        reason = describe_proxy_error(failure.value)
        if "client authorization" in reason or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert "requires client authorization" in reason

    write_client_credential(tmp_path / "bot" / "anyone" / "client_auth", "comfy", client_line)
    bot = await anyone_service_factory(data_dir=tmp_path / "bot")
    assert (await get_stats(url, bot.socks_url))["system"]["comfyui_version"] == "fake"

    late_line = await service.add_client("late")  # authorized while running: anon reloads
    write_client_credential(tmp_path / "late" / "anyone" / "client_auth", "comfy", late_line)
    late = await anyone_service_factory(data_dir=tmp_path / "late")
    assert (await get_stats(url, late.socks_url))["system"]["comfyui_version"] == "fake"


async def test_killed_anon_is_restarted_and_keeps_its_address(anyone_privnet, anyone_service_factory, fake_comfyui):
    backend, _ = fake_comfyui
    service = await anyone_service_factory(backend)
    address, pid = service.onion_address, service.process.pid
    await get_stats(f"http://{address}", anyone_privnet.socks_url)

    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while service.process.restarts < 1 or service.health()["state"] != "ok":
        assert time.monotonic() < deadline, f"not restarted: {service.health()}"
        await asyncio.sleep(0.1)
    assert service.process.pid != pid
    assert service.onion_address == address
    await get_stats(f"http://{address}", anyone_privnet.socks_url)


async def test_bot_traffic_through_an_exit_reaches_loopback(anyone_privnet, fake_comfyui):
    """The proxy_telegram path: SOCKS -> exit relay -> a server on 127.0.0.1 (the Bot API emulator in CI)."""
    backend, _ = fake_comfyui
    host, port = "127.0.0.1", int(backend.rsplit(":", 1)[1])
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

    httpx = pytest.importorskip("httpx")
    pytest.importorskip("socksio", reason='python-telegram-bot[socks] (socksio) not installed')
    proxy = telegram_proxy_url(Settings(proxy_telegram=True), anyone_privnet.socks_url)
    async with httpx.AsyncClient(proxy=proxy) as client:
        assert (await client.get(f"http://{host}:{port}/system_stats")).status_code == 200
