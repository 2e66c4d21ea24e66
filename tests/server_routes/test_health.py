"""/courier/health: the whole report to a browser on this machine or with the admin token; to
anyone else (a foreign Host, a proxy, a hidden-service visitor) each service's state only, no
reason, since reasons name server paths (issue 17, item 6)."""

import pytest

from comfyui_courier.tests.server_routes import helpers

FOREIGN_HOST = {"Host": "evil.example:8188"}  # DNS rebinding: the page's name resolves to 127.0.0.1
PROXIED = {"X-Forwarded-For": "203.0.113.7"}


@pytest.fixture
def with_path(tmp_path):
    """Marks the courier's database reason with a server path, as the embedded server's is."""
    def mark(api: helpers.Api) -> str:
        path = str(tmp_path / "courier" / "postgres")
        api.courier.health.set("database", "ok", f"embedded PostgreSQL in {path}")
        return path
    return mark


def states_only(body: dict) -> bool:
    return (set(body) == {"components"} and set(body["components"]) == {"database", "bot", "dispatcher", "anyone"}
            and all(set(part) == {"state"} for part in body["components"].values()))


async def test_a_stranger_gets_the_states_and_no_path(courier_api, with_path):
    api = await courier_api()
    path = with_path(api)
    for headers in (FOREIGN_HOST, PROXIED, {**FOREIGN_HOST, **PROXIED}):
        status, body, _ = await api.get("/courier/health", token=None, headers=headers)
        assert status == 200 and states_only(body), (headers, body)
        assert body["components"]["database"] == {"state": "ok"} and path not in str(body)
    hidden = await courier_api({"COURIER_ANYONE": "1"})  # its visitors come from loopback too
    with_path(hidden)
    status, body, _ = await hidden.get("/courier/health", token=None)
    assert status == 200 and states_only(body), body


async def test_the_token_or_a_local_browser_gets_the_whole_report(courier_api, with_path):
    api = await courier_api()
    path = with_path(api)
    for token, headers in ((None, {}), (helpers.TOKEN, FOREIGN_HOST), (helpers.TOKEN, PROXIED)):
        status, body, _ = await api.get("/courier/health", token=token, headers=headers)
        assert status == 200 and body["version"], body
        assert body["components"]["database"] == {"state": "ok", "reason": f"embedded PostgreSQL in {path}"}


async def test_a_wrong_token_is_refused_not_served_as_a_stranger(courier_api):
    api = await courier_api()
    status, body, _ = await api.get("/courier/health", token="wrong", headers=FOREIGN_HOST)
    assert (status, body["error"]["code"]) == (401, "bad_token")
    untokened = await courier_api({"COURIER_ADMIN_TOKEN": ""})
    status, body, _ = await untokened.get("/courier/health", token=None, headers=FOREIGN_HOST)
    assert status == 200 and states_only(body), body
