"""The Host guard in front of ComfyUI, on a bare aiohttp app: the Host names this machine, and a
browser's ``Origin``, when there is one, is the page's own for that Host -- under every Host,
IP literals and LAN addresses included, and on the ``/ws`` upgrade as on ``POST /prompt``.
(tests/security/test_web_page_comfyui.py drives the same attacks from real Chromium.)"""

from __future__ import annotations

import pytest
from aiohttp import ClientSession, web

from comfyui_courier.core.config import load_settings
from comfyui_courier.server_routes.host_guard import host_guard
from comfyui_courier.tests.support.http import handshake, serve_app

LAN = "gpu-box.lan"
HOSTS = ("127.0.0.1", "localhost", "[::1]", "0.0.0.0", "[::]", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
         "192.168.1.5", "[fd00::5]", LAN)


@pytest.fixture
async def guarded():
    """``(url, port, http)``: a bare app behind the guard (``COURIER_ALLOWED_HOSTS`` = the LAN name) with
    ``POST /prompt`` and ``GET /ws`` as ComfyUI has them."""
    async def prompt(_):
        return web.json_response({"prompt_id": "1"})

    async def websocket(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.close()
        return ws

    app = web.Application(middlewares=[host_guard(load_settings(None, {"COURIER_ALLOWED_HOSTS": LAN}))])
    app.router.add_post("/prompt", prompt)
    app.router.add_get("/ws", websocket)
    async with serve_app(app) as url, ClientSession(trust_env=False) as http:
        yield url, int(url.rsplit(":", 1)[1]), http


async def post(guarded, host: str, origin: str | None) -> tuple[int, dict]:
    url, _, http = guarded
    headers = {"Host": host, "Content-Type": "text/plain"}  # a cross-site form's type: no preflight
    if origin is not None:
        headers["Origin"] = origin
    async with http.post(f"{url}/prompt", data='{"prompt": {}}', headers=headers) as reply:
        return reply.status, await reply.json()


@pytest.mark.parametrize("name", HOSTS)
async def test_a_page_of_another_origin_is_refused_under_every_host(guarded, name):
    _, port, _ = guarded
    host = f"{name}:{port}"
    for origin in (f"http://evil.example:{port}", f"http://127.0.0.1:{port + 1}", "null", f"https://{host}",
                   f"http://{host}/", f"http://{name}:{port + 1}", ""):
        status, reply = await post(guarded, host, origin)
        assert (status, reply["error"]["code"]) == (403, "origin_not_allowed"), origin
        assert "Origin" in reply["error"]["message"]
    assert await handshake(f"{guarded[0]}/ws", host, f"http://evil.example:{port}") == 403
    assert await handshake(f"{guarded[0]}/ws", host, "null") == 403


@pytest.mark.parametrize("name", HOSTS)
async def test_the_pages_own_origin_and_programs_without_one_pass(guarded, name):
    """The editor and the Courier panel send their page's origin; the bot and curl send none."""
    _, port, _ = guarded
    host = f"{name}:{port}"
    assert (await post(guarded, host, f"http://{host}"))[0] == 200
    assert (await post(guarded, host, None))[0] == 200
    assert await handshake(f"{guarded[0]}/ws", host, f"http://{host}") == 101


@pytest.mark.parametrize("host,origin", [
    (LAN, f"http://{LAN}"), (LAN, f"http://{LAN}:80"), (f"{LAN}:80", f"http://{LAN}"),  # the default port
    ("LOCALHOST:8188", "http://localhost:8188"),  # names compare without case
    ("[::ffff:7f00:1]:8188", "http://[::ffff:127.0.0.1]:8188"),  # one address, two spellings
])
async def test_one_origin_spelled_two_ways_passes(guarded, host, origin):
    assert (await post(guarded, host, origin))[0] == 200


async def test_a_foreign_host_is_refused_whatever_its_origin(guarded):
    """DNS rebinding: the page's own name, rebound to 127.0.0.1, in both headers."""
    status, reply = await post(guarded, "evil.example:8188", "http://evil.example:8188")
    assert (status, reply["error"]["code"]) == (403, "host_not_allowed")


async def test_the_origin_named_by_enable_cors_header_is_let_in_and_a_bare_star_opens_nothing():
    async def prompt(_):
        return web.json_response({"prompt_id": "1"})

    for cors, passes in (("https://app.example", True), ("*", False), (None, False)):
        app = web.Application(middlewares=[host_guard(load_settings(None, {}), cors)])
        app.router.add_post("/prompt", prompt)
        async with serve_app(app) as url, ClientSession(trust_env=False) as http:
            for origin, expected in (("https://app.example", 200 if passes else 403), ("https://evil.example", 403)):
                async with http.post(f"{url}/prompt", data="{}", headers={"Origin": origin}) as reply:
                    assert reply.status == expected, (cors, origin)
