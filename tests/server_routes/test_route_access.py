"""Access as data: every route Courier serves declares its access in its table, and each kind is enforced.

The first test composes the routes as production does (``host.attach`` on a stand-in of ComfyUI's
``PromptServer``, then ComfyUI's own mounting under ``/`` and ``/api``) and walks the router: a route
there that no table declares with an access kind, or whose handler is not the declaration's guarded
one, fails it. The others send hostile or missing credentials to every declared route of each kind.
"""

from __future__ import annotations

import re

import pytest
from aiohttp import ClientSession, web

from comfyui_courier import host
from comfyui_courier.server_routes import ROUTE_TABLES
from comfyui_courier.server_routes.access import ADMIN, BACKEND, KINDS, PUBLIC, STATUS, TELEGRAM, Routes
from comfyui_courier.tests.server_routes.helpers import TOKEN
from comfyui_courier.tests.support.requires import require_comfy_api

STRANGER = {"X-Forwarded-For": "203.0.113.9"}  # not a browser on this machine, whatever the peer
SAMPLES = {"name": "demo", "id": "1"}
"""A value for each path variable of the tables (``{name:[^/]+}``, ``{id:[0-9]{1,18}}``)."""


def declared(*kinds: str) -> list:
    return [route for table in ROUTE_TABLES for route in table if getattr(route, "access", None) in kinds]


def concrete(path: str) -> str:
    """``path`` with each variable filled in: ``/courier/commands/{name:[^/]+}`` -> ``/courier/commands/demo``."""
    return re.sub(r"\{(\w+)(?::(?:[^{}]|\{[^{}]*\})*)?\}", lambda m: SAMPLES[m[1]], path)


def label(route) -> str:
    return f"{route.method} {route.path}"


class PromptServerStandIn:
    """What ``host.attach`` uses of ComfyUI 0.3.64's ``server.PromptServer``; ``mount`` then serves its
    route table as ``PromptServer.add_routes`` does (server.py: each ``RouteDef`` under ``/api`` too)."""

    def __init__(self):
        self.app = web.Application()
        self.routes = web.RouteTableDef()
        self.on_prompt_handlers = []

    def add_on_prompt_handler(self, handler) -> None:
        self.on_prompt_handlers.append(handler)

    def mount(self) -> None:
        api_routes = web.RouteTableDef()
        for route in self.routes:
            if isinstance(route, web.RouteDef):
                api_routes.route(route.method, "/api" + route.path)(route.handler, **route.kwargs)
        self.app.add_routes(api_routes)
        self.app.add_routes(self.routes)


def test_every_route_served_declares_its_access():
    require_comfy_api()  # host.attach reads ComfyUI's command line and folders
    server = PromptServerStandIn()
    host.attach(server)
    server.mount()
    declarations = {route.handler: route for table in ROUTE_TABLES for route in table}
    served = [route for route in server.app.router.routes() if "/courier/" in route.resource.canonical]
    assert len(served) >= 2 * len(declarations), "the routes were not mounted under / and /api"
    undeclared = sorted(f"{route.method} {route.resource.canonical}" for route in served
                        if getattr(declarations.get(route.handler), "access", None) not in KINDS)
    assert undeclared == [], "routes served without a declared access"


def test_a_route_cannot_be_declared_without_its_access():
    routes = Routes()
    with pytest.raises(TypeError, match="access"):
        routes.get("/courier/nothing")
    with pytest.raises(ValueError, match="unknown access"):
        routes.get("/courier/nothing", access="everyone")(lambda request: None)
    assert len(routes) == 0


@pytest.mark.parametrize("route", declared(ADMIN, STATUS), ids=label)
async def test_token_routes_refuse_a_stranger_without_the_right_token(courier_api, route):
    api = await courier_api()
    path = concrete(route.path)
    status, reply, headers = await api.send(route.method, path, token=TOKEN + "x", headers=STRANGER)
    assert (status, reply["error"]["code"]) == (401, "bad_token")
    assert headers["WWW-Authenticate"].startswith("Bearer")
    status, reply, _ = await api.send(route.method, path, token=None, headers=STRANGER)
    if route.stranger is None:
        assert (status, reply["error"]["code"]) == (401, "unauthorized")
    else:  # what a stranger is told instead (health: the states, no reasons)
        assert status == 200 and "reason" not in str(reply), reply
    unset = await courier_api({"COURIER_ADMIN_TOKEN": ""})
    status, reply, _ = await unset.send(route.method, path, token="anything", headers=STRANGER)
    assert (status, reply["error"]["code"]) == (403, "admin_token_unset")


@pytest.mark.parametrize("route", declared(BACKEND, PUBLIC), ids=label)
async def test_open_routes_ask_no_credential(courier_api, route):
    """Who reaches a BACKEND route is decided before it (the Host check, the hidden service's
    authorization, the gateway); a PUBLIC one serves the same files to everyone."""
    api = await courier_api()
    status, reply, _ = await api.send(route.method, concrete(route.path), token=None, headers=STRANGER)
    assert status not in (401, 403), reply


async def test_the_webhook_refuses_a_missing_or_wrong_secret_and_takes_no_admin_token(webhook_courier):
    courier, url = webhook_courier
    routes = declared(TELEGRAM)
    assert routes, "no TELEGRAM route declared"
    headers = {"Authorization": f"Bearer {courier.settings.admin_token.reveal() or TOKEN}"}
    async with ClientSession(trust_env=False) as http:
        for route in routes:
            for extra, expected in (({}, 401), (headers, 401), ({"X-Telegram-Bot-Api-Secret-Token": "forged"}, 403)):
                async with http.request(route.method, url + concrete(route.path), json={"update_id": 1},
                                        headers=extra) as response:
                    assert response.status == expected, (route.path, extra)
