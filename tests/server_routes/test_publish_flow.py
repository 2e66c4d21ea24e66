"""Publish from the routes, and the running bot serves the command: menu updated, /mycmd answered.

A booted Courier (bot on the Bot API emulator, dispatcher on the fake ComfyUI, real PostgreSQL);
no restart between publishing and using the command.
"""

from pathlib import Path

import pytest

from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.server_routes.helpers import TOKEN, demo_graph
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI

USER = 4242


@pytest.fixture
async def running(courier_api, botapi, botapi_bot, pg_database, tmp_path):
    async with FakeComfyUI() as comfy:
        settings = load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN,
            "COURIER_PROGRESS_INTERVAL_S": "0", "COURIER_ALLOWED_USERS": "*"})
        courier = Courier(settings, Path(tmp_path), comfy.url)
        await courier.start()
        await courier.booted()
        try:
            assert courier.health.state("bot") == "ok", courier.health_report()
            yield await courier_api(courier=courier)
        finally:
            await courier.stop()


def menu(bot) -> list[str]:
    return [c["command"] for listed in bot.commands.values() for c in listed]


def replies_to(request):
    return lambda call: call.result.get("reply_to_message", {}).get("message_id") == request["message_id"]


async def test_published_command_is_in_the_menu_and_runs_without_restart(running, botapi_bot):
    api = running
    assert "mycmd" not in menu(botapi_bot)
    assert "help" in menu(botapi_bot) and "bench" not in menu(botapi_bot)  # admin commands stay off the menu
    status, reply, _ = await api.send("POST", "/courier/commands",
                                      json={"workflow": demo_graph(), "name": "mycmd", "description": "Cards"})
    assert (status, reply["menu_updated"]) == (201, True)
    assert "mycmd" in menu(botapi_bot) and "demo" in menu(botapi_bot)

    request = botapi_bot.inject_text(USER, "/mycmd hi")
    document = await botapi_bot.wait_for_call("sendDocument", where=replies_to(request), timeout=30)
    assert document.result["document"]["file_name"].startswith("mycmd_")
    assert botapi_bot.file_bytes(document.result["document"]["file_id"]).startswith(b"\x89PNG")

    status, reply, _ = await api.send("PATCH", "/courier/commands/mycmd", json={"enabled": False})
    assert (status, reply["menu_updated"]) == (200, True)
    assert "mycmd" not in menu(botapi_bot)

    request = botapi_bot.inject_text(USER, "/mycmd again")
    refused = await botapi_bot.wait_for_call("sendMessage", timeout=30, where=lambda call: (
        call.result["chat"]["id"] == USER and call.result["message_id"] > request["message_id"]))
    assert refused.result["text"].startswith("I don't know /mycmd")  # disabled: refused at once

    status, reply, _ = await api.send("DELETE", "/courier/commands/mycmd")
    assert status == 200 and "mycmd" not in menu(botapi_bot)


async def test_backends_are_asked_through_the_dispatcher(running):
    status, reply, _ = await running.get("/courier/backends")
    assert status == 200
    (backend,) = reply["backends"]
    assert (backend["kind"], backend["reachable"], backend["comfyui_version"], backend["error"]) == (
        "loopback", True, "0.3.64", None)
