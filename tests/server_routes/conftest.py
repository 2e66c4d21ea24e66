"""The /courier routes on a bare aiohttp app, with a Courier whose settings each test picks.

``courier_api(env, store=...)`` serves every route table and returns a ``helpers.Api``. The admin
token is ``helpers.TOKEN`` unless ``env`` says otherwise; published graphs are checked against
``helpers.NODE_TYPES`` (ComfyUI's own list is not there).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from aiohttp import ClientSession, web

from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import COURIER, Courier
from comfyui_courier.server_routes import ROUTE_TABLES
from comfyui_courier.server_routes.commands import NODE_TYPES
from comfyui_courier.tests.server_routes import helpers
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI


@pytest.fixture
async def courier_api(tmp_path):
    """``await courier_api(env={...}, store=store)``: the routes served for a Courier of those settings.

    ``courier=`` serves an existing (started) Courier instead.
    """
    runners = []
    http = ClientSession(trust_env=False)

    async def serve(env: dict | None = None, *, store=None, node_types=helpers.NODE_TYPES,
                    courier: Courier | None = None) -> helpers.Api:
        if courier is None:
            settings = load_settings(None, {"COURIER_ADMIN_TOKEN": helpers.TOKEN, **(env or {})})
            courier = Courier(settings, Path(tmp_path), "http://127.0.0.1:1")
            courier.store = store
        app = web.Application()
        app[COURIER] = courier
        if node_types is not None:  # None: ask ComfyUI, as in production
            app[NODE_TYPES] = node_types
        for table in ROUTE_TABLES:
            app.router.add_routes(table)
        runner = web.AppRunner(app)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        runners.append(runner)
        return helpers.Api(f"http://127.0.0.1:{sock.getsockname()[1]}", courier, http)

    yield serve
    await http.close()
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def api(courier_api, store):
    """The routes with a token configured and the test's database open."""
    return await courier_api(store=store)


@pytest.fixture
async def webhook_courier(botapi, botapi_bot, pg_database, tmp_path):
    """A Courier in webhook mode: the emulator POSTs updates to our route."""
    async with FakeComfyUI() as comfy:
        def make_courier(url):
            settings = load_settings(None, {
                "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
                "COURIER_DATABASE_URL": pg_database, "COURIER_WEBHOOK_URL": f"{url}/courier/telegram/webhook",
                "COURIER_WEBHOOK_SECRET": "s3cret-token", "COURIER_PROGRESS_INTERVAL_S": "0",
                "COURIER_ALLOWED_USERS": "*"})
            return Courier(settings, Path(tmp_path), comfy.url)

        runner, url, courier = await helpers.serve_routes(make_courier)
        await courier.start()
        await courier.booted()
        try:
            yield courier, url
        finally:
            await courier.stop()
            await runner.cleanup()
