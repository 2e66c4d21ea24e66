"""Start-up that tells and retries (issue 21, item 1): a Bot API that is down at start is tried again
with backoff and the bot serves once it is up, without a restart; a rejected token is said once, in
one console line without the token, and not tried again. Real python-telegram-bot against the Bot API
emulator (stopped and started again on its port), real PostgreSQL."""

import logging
from pathlib import Path

import pytest

from comfyui_courier import runtime
from comfyui_courier.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(90)

USER = 2101


def make_courier(botapi, botapi_bot, pg_database: str, fake_comfy, data_dir: Path) -> Courier:
    return Courier(load_settings(None, {
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ALLOWED_USERS": str(USER)}), data_dir, fake_comfy.url)


def console(caplog, needle: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if needle in record.getMessage()]


async def test_a_bot_api_down_at_start_is_tried_again_and_the_bot_serves_once_it_is_up(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(runtime, "BOT_RETRY_FIRST_S", 0.2, raising=False)
    caplog.set_level(logging.INFO, logger="courier")
    courier = make_courier(botapi, botapi_bot, pg_database, fake_comfy, tmp_path)
    await botapi.stop()  # nothing listens on its port now
    try:
        await courier.start()
        await courier.booted()
        health = courier.health_report()["components"]
        assert health["bot"]["state"] == "error" and "trying again in" in health["bot"]["reason"], health
        assert health["dispatcher"]["state"] == "off", health
        retried = courier.health.report()["bot"]["attempts"]
        async def tried_twice_more():
            return courier.health.report()["bot"].get("attempts", 0) >= retried + 2

        await until(tried_twice_more, 30, "two more tries")
        assert courier.health.state("bot") == "error"
        await botapi.start()  # the same port: Telegram is reachable again
        await botapi.wait_for(lambda: courier.health.state("dispatcher") == "ok", timeout=30)
        assert courier.health.state("bot") == "ok", courier.health_report()
        request = botapi_bot.inject_text(USER, "/demo after the outage")
        await botapi_bot.wait_for_call("sendDocument", timeout=30,
                                       where=lambda call: call.params.get("chat_id") == USER)
    finally:
        await courier.stop()
    told = console(caplog, "cannot reach the Bot API")
    assert len(told) == 1, told  # one line, however many tries
    assert "check the network" in told[0] and "trying again" in told[0]
    assert console(caplog, "connected to the Bot API as @")
    assert botapi_bot.token not in caplog.text and botapi_bot.token.partition(":")[2] not in caplog.text
    assert request["text"] == "/demo after the outage"


async def test_a_rejected_token_is_told_once_and_not_tried_again(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(runtime, "BOT_RETRY_FIRST_S", 0.05, raising=False)
    caplog.set_level(logging.INFO, logger="courier")
    botapi_bot.fail("getMe", times=10**6, status=401, description="Unauthorized")
    courier = make_courier(botapi, botapi_bot, pg_database, fake_comfy, tmp_path)
    try:
        await courier.start()
        await courier.booted()
        health = courier.health.report()["bot"]
        assert health["state"] == "error" and "rejected the bot token" in health["reason"], health
        assert getattr(courier, "_bot_retry", None) is None  # no task tries it again
        with pytest.raises(TimeoutError):  # and nothing else does: a retry would come within 0.05 s
            await botapi.wait_for(lambda: sum(call.method == "getMe" for call in botapi_bot.calls) > 1, timeout=1.5)
    finally:
        await courier.stop()
    told = console(caplog, "rejected the bot token")
    assert len(told) == 1 and "TELEGRAM_BOT_TOKEN" in told[0] and "not tried again" in told[0], told
    assert botapi_bot.token.partition(":")[2] not in caplog.text
