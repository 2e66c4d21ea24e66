"""The gatekeeper fails closed: whatever the access check raises ends the update there, with an
incident reply; no command handler runs for it, allowlist and bans unchecked (issue 17, item 2).

Real python-telegram-bot against the Bot API emulator, real PostgreSQL, the fake ComfyUI.
"""

import logging
import re
import time
from pathlib import Path

import pytest

from comfyui_courier.bot import access
from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.server_routes.helpers import serve_routes
from comfyui_courier.tests.support.courier import running_courier

pytestmark = pytest.mark.timeout(90)

USER, FAILING = 611, 612
HUGE = 2**70  # a Telegram update may carry it; PostgreSQL's bigint cannot


def said(botapi_bot, chat_id: int) -> list[str]:
    return [call.params.get("text") or call.method for call in botapi_bot.outbox
            if call.params.get("chat_id") == chat_id]


def private_text(user_id: int, text: str) -> dict:
    person = {"id": user_id, "is_bot": False, "first_name": "Big"}
    return {"message": {"message_id": 1, "date": int(time.time()), "chat": {**person, "type": "private"},
                        "from": person, "text": text,
                        "entities": [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]}}


async def test_a_user_id_postgresql_cannot_take_gets_an_incident_and_no_command_through_the_webhook(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, caplog):
    caplog.set_level(logging.ERROR, logger="courier.bot")

    def make_courier(url: str) -> Courier:
        return Courier(load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_DATABASE_URL": pg_database, "COURIER_WEBHOOK_URL": f"{url}/courier/telegram/webhook",
            "COURIER_ALLOWED_USERS": f"{HUGE},{USER}"}), Path(tmp_path), fake_comfy.url)

    runner, _, courier = await serve_routes(make_courier)
    try:
        await courier.start()
        await courier.booted()
        assert courier.health.state("bot") == "ok", courier.health_report()
        for text in ("/start", "/demo big"):
            update = botapi_bot.inject_update(private_text(HUGE, text))
            await botapi.wait_for(lambda update=update: update not in botapi_bot.updates, timeout=30)  # answered
        async with courier.store.pool.acquire() as conn:
            jobs = await conn.fetchval("SELECT count(*) FROM courier_jobs")
    finally:
        await courier.stop()
        await runner.cleanup()
    replies = said(botapi_bot, HUGE)
    assert len(replies) == 2 and all(re.search(r"\(incident [0-9a-f]{8}\)", reply) for reply in replies), replies
    assert jobs == 0
    assert caplog.text.count("incident ") == 2 and "in gatekeeper" in caplog.text


async def test_a_gatekeeper_that_raises_lets_no_handler_run_and_other_updates_pass(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, monkeypatch):
    admit = access.refusal

    async def refusal(update, context):
        if update.effective_user.id == FAILING:
            raise RuntimeError("forced")
        return await admit(update, context)

    monkeypatch.setattr(access, "refusal", refusal)
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER},{FAILING}") as courier:
        for text in ("/start", "/demo forced", "/help"):  # the two users' updates side by side
            botapi_bot.inject_text(FAILING, text)
            botapi_bot.inject_text(USER, text)
        await botapi_bot.wait_for_call("sendDocument", where=lambda c: c.params["chat_id"] == USER, timeout=30)
        await botapi.wait_for(lambda: len(said(botapi_bot, FAILING)) >= 3 and not botapi_bot.updates, timeout=30)
        async with courier.store.pool.acquire() as conn:
            jobs = await conn.fetch("SELECT user_id FROM courier_jobs")
    failing = said(botapi_bot, FAILING)
    assert len(failing) == 3 and all("(incident " in reply for reply in failing), failing
    assert [row["user_id"] for row in jobs] == [USER]
    assert any(reply.startswith("Hi ") for reply in said(botapi_bot, USER))
