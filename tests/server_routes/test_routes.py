"""The /courier routes mounted on a bare aiohttp app, as ComfyUI mounts them."""

from pathlib import Path

import pytest
from aiohttp import ClientSession

from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.server_routes import helpers


@pytest.fixture
async def idle_courier(tmp_path):
    """A Courier whose services are not started: every component reports off."""
    runner, url, courier = await helpers.serve_routes(lambda url: Courier(load_settings(None, {}), Path(tmp_path), url))
    async with ClientSession() as http:
        yield courier, url, http
    await runner.cleanup()


async def test_health_reports_version_and_each_component(idle_courier):
    _, url, http = idle_courier
    async with http.get(f"{url}/courier/health") as response:
        assert response.status == 200
        report = await response.json()
    assert report["version"]
    assert set(report["components"]) == {"database", "bot", "dispatcher", "anyone"}
    assert all(part["state"] in ("ok", "off", "starting", "error") and "reason" in part
               for part in report["components"].values())


async def test_settings_error_is_reported_not_raised(tmp_path):
    (tmp_path / "courier.toml").write_text("bogus_key = 1\n")
    courier = Courier.for_comfyui(tmp_path, "http://127.0.0.1:8188", "127.0.0.1")
    await courier.start()  # does nothing: there are no usable settings
    states = courier.health_report()["components"]
    assert {part["state"] for part in states.values()} == {"error"}
    assert "bogus_key" in states["database"]["reason"]


async def test_anyone_route_without_hidden_service(idle_courier):
    _, url, http = idle_courier
    async with http.get(f"{url}/courier/anyone") as response:
        assert response.status == 200
        assert (await response.json())["onion_address"] is None
    async with http.get(f"{url}/courier/anyone/qr.png") as response:
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "no_address"


async def test_webhook_is_closed_when_off(idle_courier):
    _, url, http = idle_courier
    async with http.post(f"{url}/courier/telegram/webhook", json={"update_id": 1}) as response:
        assert response.status == 404


async def test_webhook_mode_serves_demo(webhook_courier, botapi_bot):
    courier, url = webhook_courier
    assert botapi_bot.webhook is not None and botapi_bot.webhook.url.endswith("/courier/telegram/webhook")
    request = botapi_bot.inject_text(7, "/demo via webhook")
    call = await botapi_bot.wait_for_call("sendDocument", timeout=30, where=lambda c: (
        c.result.get("reply_to_message", {}).get("message_id") == request["message_id"]))
    assert call.result["document"]["file_name"].endswith(".png")


async def test_webhook_refuses_a_wrong_secret_and_junk(webhook_courier):
    _, url = webhook_courier
    async with ClientSession() as http:
        async with http.post(f"{url}/courier/telegram/webhook", json={"update_id": 1},
                             headers={"X-Telegram-Bot-Api-Secret-Token": "wrong"}) as response:
            assert response.status == 403
        headers = {"X-Telegram-Bot-Api-Secret-Token": "s3cret-token"}
        for body in (b"[1, 2]", b"not json", b"{}", b'{"update_id": 1, "message": {}}', b"[" * 100_000):
            async with http.post(f"{url}/courier/telegram/webhook", data=body, headers=headers) as response:
                assert response.status == 400
        async with http.post(f"{url}/courier/telegram/webhook", data=b"x" * (2 * 2**20),
                             headers=headers) as response:
            assert response.status == 413
