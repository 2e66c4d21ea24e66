"""Threat row "forged webhook": whoever knows the webhook's URL, but not the secret Telegram was
given with ``setWebhook``, can post updates, and they do nothing.

Real parts: PostgreSQL, python-telegram-bot against the Bot API emulator in webhook mode (the
emulator sends the secret it was registered with, as Telegram does), the real aiohttp route, the
fake ComfyUI behind the dispatcher. No ``COURIER_WEBHOOK_SECRET`` is set: the bot makes one.
"""

import asyncio
import contextlib
import json
import logging
import time
from pathlib import Path

import asyncpg
import pytest
from aiohttp import ClientSession

from comfyui_courier.core.config import SettingsError, load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.server_routes.helpers import serve_routes

pytestmark = pytest.mark.timeout(120)

ADMIN, USER, VICTIM = 501, 502, 4242
HEADER = "X-Telegram-Bot-Api-Secret-Token"


def forged(update_id: int, user_id: int, text: str) -> dict:
    """A message update as Telegram would post it, written by the attacker."""
    person = {"id": user_id, "is_bot": False, "first_name": "Mallory"}
    return {"update_id": update_id, "message": {
        "message_id": 900 + update_id, "date": int(time.time()), "chat": {**person, "type": "private"},
        "from": person, "text": text,
        "entities": [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]}}


@contextlib.asynccontextmanager
async def webhook_courier(botapi, botapi_bot, pg_database, data_dir: Path, backend: str | None, **env):
    """A started Courier in webhook mode behind the real route; yields (courier, webhook URL)."""
    def make_courier(url: str) -> Courier:
        return Courier(load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_DATABASE_URL": pg_database, "COURIER_WEBHOOK_URL": f"{url}/courier/telegram/webhook",
            "COURIER_ADMIN_USERS": str(ADMIN), "COURIER_ALLOWED_USERS": f"{ADMIN},{USER}",
            "COURIER_PROGRESS_INTERVAL_S": "0", **env}), data_dir, backend)

    runner, url, courier = await serve_routes(make_courier)
    try:
        await courier.start()
        await courier.booted()
        assert courier.health.state("bot") == "ok", courier.health_report()
        yield courier, f"{url}/courier/telegram/webhook"
    finally:
        await courier.stop()
        await runner.cleanup()


async def post(url: str, update: dict, secret: str | None) -> tuple[int, dict]:
    headers = {} if secret is None else {HEADER: secret}
    async with ClientSession(trust_env=False) as http, http.post(url, json=update, headers=headers) as response:
        return response.status, await response.json()


async def counts(courier: Courier) -> tuple[int, int]:
    """(banned users, jobs)."""
    async with courier.store.pool.acquire() as conn:
        return (await conn.fetchval("SELECT count(*) FROM courier_users WHERE banned"),
                await conn.fetchval("SELECT count(*) FROM courier_jobs"))


async def test_a_forged_update_is_refused_and_does_nothing_the_right_secret_works(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    async with webhook_courier(botapi, botapi_bot, pg_database, tmp_path, fake_comfy.url) as (courier, url):
        for user in (ADMIN, USER):  # their chats exist, as an attacker's victims' would
            botapi_bot.inject_text(user, "/help")
            await botapi_bot.wait_for_call("sendMessage", where=lambda c, user=user: c.params["chat_id"] == user,
                                           timeout=30)
        sent = len(botapi_bot.outbox)
        attacks = [forged(10_001, ADMIN, f"/ban {VICTIM}"), forged(10_002, USER, "/demo forged")]
        for update in attacks:
            assert await post(url, update, None) == (401, {"error": {
                "code": "unauthorized", "message": f"missing {HEADER}"}})

        async with courier.store.pool.acquire() as conn:
            secret = await conn.fetchval("SELECT secret FROM courier_webhook_secrets WHERE bot_id = $1",
                                         botapi_bot.id)
        assert secret and len(secret) >= 43 and botapi_bot.webhook.secret_token == secret
        for update in attacks:
            for wrong in ("", "wrong", secret[:-1], secret + "x", secret.upper()):
                assert await post(url, update, wrong) == (403, {"error": {
                    "code": "forbidden", "message": "bad secret token"}}), wrong
        assert await counts(courier) == (0, 0)
        assert len(botapi_bot.outbox) == sent

        assert await post(url, attacks[0], secret) == (200, {"ok": True})
        assert await counts(courier) == (1, 0)
        assert await post(url, attacks[1], secret) == (200, {"ok": True})
        await botapi_bot.wait_for_call("sendDocument", where=lambda c: c.params["chat_id"] == USER, timeout=30)
        assert (await counts(courier))[1] == 1


async def test_two_hosts_on_one_database_register_the_same_generated_secret_across_restarts(
        botapi, botapi_bot, pg_database, tmp_path):
    async with contextlib.AsyncExitStack() as stack:
        hosts = await asyncio.gather(*(
            stack.enter_async_context(webhook_courier(botapi, botapi_bot, pg_database, tmp_path / name, None))
            for name in ("one", "two")))
        first, second = (host.bot.webhook_secret.reveal() for host, _ in hosts)
    assert first == second
    registered = [c.params["secret_token"] for c in botapi_bot.calls if c.method == "setWebhook" and c.ok]
    assert registered == [first, first]
    async with webhook_courier(botapi, botapi_bot, pg_database, tmp_path / "one", None) as (again, url):
        assert again.bot.webhook_secret.reveal() == first
        assert (await post(url, forged(10_003, USER, "/start"), first))[0] == 200
    conn = await asyncpg.connect(pg_database)
    try:
        assert await conn.fetchval("SELECT count(*) FROM courier_webhook_secrets") == 1
    finally:
        await conn.close()


async def test_an_operator_secret_is_used_as_it_is(botapi, botapi_bot, pg_database, tmp_path):
    async with webhook_courier(botapi, botapi_bot, pg_database, tmp_path, None,
                               COURIER_WEBHOOK_SECRET="Operator_chosen-1") as (courier, url):
        assert botapi_bot.webhook.secret_token == "Operator_chosen-1"
        assert (await post(url, forged(10_001, USER, "/start"), "Operator_chosen-1"))[0] == 200
        assert (await post(url, forged(10_002, USER, "/start"), None))[0] == 401


async def test_no_update_is_taken_before_the_bot_registered_its_secret(botapi, botapi_bot, pg_database, tmp_path):
    """The Bot API is unreachable, so the bot never starts: the route has no secret to check and takes
    nothing, not even with the operator's secret."""
    botapi_bot.fail("getMe", times=10**6, status=500)

    def make_courier(url: str) -> Courier:
        return Courier(load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_DATABASE_URL": pg_database, "COURIER_WEBHOOK_URL": f"{url}/courier/telegram/webhook",
            "COURIER_WEBHOOK_SECRET": "known-to-the-attacker"}), tmp_path, None)

    runner, url, courier = await serve_routes(make_courier)
    try:
        await courier.start()
        await courier.booted()
        assert courier.bot is not None and courier.health.state("bot") == "error", courier.health_report()
        status, reply = await post(f"{url}/courier/telegram/webhook", forged(10_001, USER, "/start"),
                                   "known-to-the-attacker")
        assert (status, reply["error"]["code"]) == (503, "webhook_not_ready")
    finally:
        await courier.stop()
        await runner.cleanup()
    assert not botapi_bot.outbox


@pytest.mark.parametrize("bad", ["has space", "x" * 257, "ümlaut", "semi;colon", "new\nline"])
def test_a_secret_telegram_would_refuse_is_refused_at_start(tmp_path, caplog, bad):
    with pytest.raises(SettingsError, match="COURIER_WEBHOOK_SECRET") as raised:
        load_settings(None, {"COURIER_WEBHOOK_SECRET": bad})
    assert "1-256 characters of A-Z, a-z, 0-9, _ and -" in str(raised.value) and bad.strip() not in str(raised.value)
    (tmp_path / "courier.toml").write_text(f"webhook_secret = {json.dumps(bad)}\n")  # a JSON string is TOML
    caplog.set_level(logging.ERROR, logger="courier.runtime")
    courier = Courier.for_comfyui(tmp_path, "http://127.0.0.1:8188", "127.0.0.1")
    assert courier.settings is None
    assert {part["state"] for part in courier.health_report()["components"].values()} == {"error"}
    assert "'webhook_secret': bad value (Telegram takes" in caplog.text and bad.strip() not in caplog.text
    assert load_settings(None, {"COURIER_WEBHOOK_SECRET": "A-z_09" * 42 + "abcd"}).webhook_secret
