"""Who may call the /courier routes: the admin token, and read-only status from this machine only."""

from unittest import mock

import pytest
from aiohttp.test_utils import make_mocked_request

from comfyui_courier.core.config import load_settings
from comfyui_courier.jobs.seed import seed_commands
from comfyui_courier.runtime import Courier
from comfyui_courier.server_routes.access import is_local_browser
from comfyui_courier.tests.server_routes.helpers import TOKEN, demo_graph

STATUS_ROUTES = ("/courier/commands", "/courier/jobs", "/courier/sessions", "/courier/backends",
                 "/courier/benchmarks", "/courier/commands/demo/export", "/courier/readiness")
ADMIN_CALLS = (("POST", "/courier/commands", {"workflow": demo_graph()}),
               ("PATCH", "/courier/commands/demo", {"enabled": False}),
               ("DELETE", "/courier/commands/demo", None))


@pytest.mark.parametrize("method,path,body", ADMIN_CALLS)
async def test_admin_routes_refuse_when_no_token_is_configured(courier_api, store, method, path, body):
    api = await courier_api({"COURIER_ADMIN_TOKEN": ""}, store=store)
    for token in (None, "anything"):
        status, reply, _ = await api.send(method, path, json=body, token=token)
        assert status == 403, reply
        assert reply["error"]["code"] == "admin_token_unset"
        assert "COURIER_ADMIN_TOKEN" in reply["error"]["message"]
        assert "Authorization: Bearer" in reply["error"]["message"]


@pytest.mark.parametrize("method,path,body", ADMIN_CALLS)
async def test_admin_routes_need_the_right_bearer_token(api, method, path, body):
    status, reply, headers = await api.send(method, path, json=body, token=None)
    assert (status, reply["error"]["code"]) == (401, "unauthorized")
    assert headers["WWW-Authenticate"].startswith("Bearer")
    status, reply, _ = await api.send(method, path, json=body, token=TOKEN + "x")
    assert (status, reply["error"]["code"]) == (401, "bad_token")
    status, reply, _ = await api.send(method, path, json=body, token=None,
                                      headers={"Authorization": f"Basic {TOKEN}"})
    assert (status, reply["error"]["code"]) == (401, "unauthorized")


async def test_the_token_is_never_echoed(api):
    _, reply, _ = await api.send("DELETE", "/courier/commands/demo", token="wrong-token")
    assert "wrong-token" not in str(reply) and TOKEN not in str(reply)


@pytest.mark.parametrize("path", STATUS_ROUTES)
async def test_status_routes_are_open_to_a_browser_on_this_machine(courier_api, store, path):
    await seed_commands(store)
    api = await courier_api({"COURIER_ADMIN_TOKEN": ""}, store=store)
    status, reply, _ = await api.get(path, token=None)
    assert status == 200, reply


@pytest.mark.parametrize("headers", [{"X-Forwarded-For": "203.0.113.9"}, {"Forwarded": "for=203.0.113.9"},
                                     {"X-Real-IP": "203.0.113.9"}, {"Host": "attacker.example:8188"}])
async def test_status_routes_refuse_proxied_or_rebound_requests(courier_api, store, headers):
    """A reverse proxy on this machine, or DNS rebinding (a foreign Host), is not 'this machine'."""
    api = await courier_api({"COURIER_ADMIN_TOKEN": ""}, store=store)
    status, reply, _ = await api.get("/courier/commands", token=None, headers=headers)
    assert (status, reply["error"]["code"]) == (403, "admin_token_unset")
    assert "this machine" in reply["error"]["message"]
    api = await courier_api(store=store)
    status, _, _ = await api.get("/courier/commands", token=None, headers=headers)
    assert status == 401
    status, _, _ = await api.get("/courier/commands", headers=headers)
    assert status == 200


async def test_status_routes_need_the_token_when_this_server_is_a_hidden_service(courier_api, store):
    """Visitors of the .anon address arrive from loopback too."""
    api = await courier_api({"COURIER_ANYONE": "1"}, store=store)
    status, _, _ = await api.get("/courier/jobs", token=None)
    assert status == 401
    status, _, _ = await api.get("/courier/jobs")
    assert status == 200


@pytest.mark.parametrize("path,reply", [("/courier/anyone", 200), ("/courier/anyone/qr.png", 404)])
async def test_the_anyone_report_is_for_the_token_or_a_local_browser_only(courier_api, path, reply):
    """It names the .anon address and how the hidden service is set up: the full health report's rule."""
    api = await courier_api()
    hidden = await courier_api({"COURIER_ANYONE": "1"})  # its visitors come from loopback too
    for server, headers in ((api, {"Host": "attacker.example:8188"}), (api, {"X-Forwarded-For": "203.0.113.9"}),
                            (hidden, {})):
        status, body, _ = await server.get(path, token=None, headers=headers)
        assert (status, body["error"]["code"]) == (401, "unauthorized"), headers
    for server, token in ((api, None), (hidden, TOKEN)):
        status, body, _ = await server.get(path, token=token)
        assert status == reply, body  # the report (no address: not a hidden service), or no QR code
    untokened = await courier_api({"COURIER_ADMIN_TOKEN": "", "COURIER_ANYONE": "1"})
    status, body, _ = await untokened.get(path, token=None)
    assert (status, body["error"]["code"]) == (403, "admin_token_unset")


@pytest.mark.parametrize("peer,host,local", [
    ("127.0.0.1", "127.0.0.1:8188", True),
    ("127.0.0.1", "localhost:8188", True),
    ("::1", "[::1]:8188", True),
    ("127.0.0.1", "LOCALHOST", True),
    ("203.0.113.5", "127.0.0.1:8188", False),
    ("192.168.1.2", "192.168.1.1:8188", False),
    ("127.0.0.1", "comfy.example.org", False),
    ("127.0.0.1", "127.0.0.1.nip.io:8188", False),
    # addresses that reach this machine although ipaddress does not call them loopback
    ("127.0.0.1", "0.0.0.0:8188", True),
    ("::1", "[::]:8188", True),
    ("::ffff:127.0.0.1", "[::ffff:127.0.0.1]:8188", True),
    ("127.0.0.1", "[::ffff:192.168.1.1]:8188", False),
    ("::ffff:192.168.1.2", "127.0.0.1:8188", False),
])
def test_is_local_browser(tmp_path, peer, host, local):
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (peer, 40000) if name == "peername" else default
    request = make_mocked_request("GET", "/courier/jobs", headers={"Host": host}, transport=transport)
    courier = Courier(load_settings(None, {}), tmp_path, None)
    assert is_local_browser(request, courier) is local


async def test_a_database_that_is_not_running_is_503_with_the_reason(courier_api):
    api = await courier_api()
    api.courier.health.set("database", "error", "cannot reach PostgreSQL at postgresql://db/x")
    for method, path, body in (("GET", "/courier/commands", None), *ADMIN_CALLS):
        status, reply, _ = await api.send(method, path, json=body)
        assert status == 503, (path, reply)
        assert reply["error"]["code"] == "database_off"
        assert "cannot reach PostgreSQL" in reply["error"]["message"]


async def test_a_failing_database_is_503_not_a_traceback(courier_api, store):
    api = await courier_api(store=store)
    await store.pool.close()
    status, reply, _ = await api.get("/courier/commands")
    assert (status, reply["error"]["code"]) == (503, "database_error")
