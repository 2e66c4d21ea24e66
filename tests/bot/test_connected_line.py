"""The console says once, on every start, that the bot is connected (issue 29): the first start too,
not only a start that needed retries. Real python-telegram-bot against the Bot API emulator, real
PostgreSQL."""

import logging

import pytest

from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier

pytestmark = pytest.mark.timeout(90)


async def test_a_start_that_connects_at_once_says_so_in_one_line(botapi, botapi_bot, pg_database, fake_comfy,
                                                                   tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="courier")
    courier = Courier(load_settings(None, {
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ALLOWED_USERS": "1"}), tmp_path, fake_comfy.url)
    try:
        await courier.start()
        await courier.booted()
        assert courier.health.state("bot") == "ok", courier.health_report()
    finally:
        await courier.stop()
    told = [record.getMessage() for record in caplog.records if "connected to the Bot API" in record.getMessage()]
    username = botapi_bot.user["username"]
    assert told == [f"[Courier] bot: connected to the Bot API as @{username} (polling)"], told
    assert caplog.records[[r.getMessage() for r in caplog.records].index(told[0])].levelno == logging.INFO
