"""Threat row: a stranger who knows the ``.anon`` address (real onion routing, private network on 127.0.0.1).

With client authorization on (the default) anon refuses a client without a key before any request is
made; with it switched off, the gateway answers 403 to every request without the bot-host credential
and nothing reaches ComfyUI (a loopback stand-in that records what reaches it).
"""

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from comfyui_courier.anyone import describe_proxy_error, make_session
from comfyui_courier.anyone.gateway_policy import CREDENTIAL_HEADER
from comfyui_courier.core.config import Settings
from comfyui_courier.tests.fixtures.anyone import shared_credential
from comfyui_courier.tests.support.http import serve_app

REACH_S = 60
ATTEMPT_S = 15


@pytest.fixture
async def comfyui_standin():
    seen = []

    async def anything(request):
        seen.append(f"{request.method} {request.path}")
        return web.json_response({"system": {"comfyui_version": "stand-in"}})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", anything)
    async with serve_app(app) as url:
        yield url, seen


async def through_onion(url: str, socks_url: str, method: str, path: str, headers=None) -> tuple[int, str]:
    """One request through Anyone, retried on fresh circuits until the service answers (REACH_S)."""
    deadline = time.monotonic() + REACH_S
    while True:
        try:
            async with make_session(url, Settings(private_mode=True), socks_url, headers=headers) as session, \
                    session.request(method, url + path, json={},
                                    timeout=aiohttp.ClientTimeout(total=ATTEMPT_S)) as reply:
                return reply.status, await reply.text()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def test_without_a_client_key_anon_refuses(anyone_service_factory, comfyui_standin, tmp_path):
    url, seen = comfyui_standin
    service = await anyone_service_factory(url, data_dir=tmp_path / "comfy")
    stranger = await anyone_service_factory(data_dir=tmp_path / "stranger")
    onion = f"http://{service.onion_address}"
    deadline = time.monotonic() + REACH_S
    while True:
        with pytest.raises((aiohttp.ClientError, OSError, asyncio.TimeoutError)) as failure:
            async with make_session(onion, Settings(), stranger.socks_url) as session:
                await session.get(f"{onion}/system_stats", timeout=aiohttp.ClientTimeout(total=ATTEMPT_S))
        reason = describe_proxy_error(failure.value)
        if "client authorization" in reason or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert "requires client authorization" in reason
    assert seen == []


async def test_with_client_auth_off_the_gateway_wants_the_credential(anyone_privnet, anyone_service_factory,
                                                                     comfyui_standin, tmp_path):
    url, seen = comfyui_standin
    service = await anyone_service_factory(url, data_dir=tmp_path / "open", anyone_client_auth=False)
    onion = f"http://{service.onion_address}"
    for method, path in (("GET", "/system_stats"), ("GET", "/courier/health"), ("POST", "/prompt"),
                         ("GET", "/queue"), ("GET", "/view?filename=a.png&subfolder=courier"),
                         ("POST", "/courier/files/delete"), ("GET", "/userdata/comfy.settings.json")):
        status, text = await through_onion(onion, anyone_privnet.socks_url, method, path)
        assert (status, text) == (403, "not available through the hidden service\n"), (method, path)
    assert seen == []
    credential = {CREDENTIAL_HEADER: shared_credential(tmp_path / "open")}
    assert (await through_onion(onion, anyone_privnet.socks_url, "GET", "/system_stats", credential))[0] == 200
    assert seen == ["GET /system_stats"]
