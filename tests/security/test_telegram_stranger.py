"""Threat row "Telegram stranger": anyone who finds the bot in Telegram and writes to it.

Can: be told the bot is private, with their own id to give the operator, once in five minutes
however many messages they send. Cannot: run a command, queue a job, leave a row with their id or
@username in PostgreSQL, hold up anyone else's commands with a flood (their replies wait apart),
or become an admin without the owner code the console printed (on stderr, never in a log ComfyUI
serves; it works once, and a wrong one is answered as if none were sent). Real parts:
python-telegram-bot against the Bot API emulator, PostgreSQL, the dispatcher on the fake ComfyUI;
the settings are the defaults (no allowlist, no admins).
"""

import json
import logging
import re

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import refusals_sent, running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(180)

STRANGER, OWNER, FRIEND, ADMIN, OTHER, ANOTHER = 987654301, 987654302, 987654303, 987654304, 987654305, 987654306
CODE = re.compile(r"/start ([A-Za-z0-9_-]{22}) ")


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


@pytest.fixture
async def fake():
    async with FakeComfyUI(steps=0) as server:
        yield server


async def fetch(courier, sql: str, *args):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch(sql, *args)


async def said(botapi, bot, chat_id: int, text: str, times: int = 1) -> None:
    """Wait until the bot has sent ``text`` to ``chat_id`` ``times`` times (more fails)."""
    def count() -> int:
        return sum(c.params.get("chat_id") == chat_id and c.params.get("text") == text for c in bot.outbox)
    try:
        await botapi.wait_for(lambda: count() >= times, timeout=15)
    except TimeoutError:
        sent = [c.params.get('text') for c in bot.outbox if c.params.get('chat_id') == chat_id]
        raise AssertionError(f"never sent {text!r} {times}x to {chat_id}; sent {sent}") from None
    assert count() == times


async def traces_of(courier, needle: str) -> list[str]:
    """The tables holding ``needle`` anywhere in a row (ids, usernames, texts)."""
    tables = [r["tablename"]
              for r in await fetch(courier, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    found = []
    for table in tables:
        if (await fetch(courier, f'SELECT 1 FROM "{table}" t WHERE t::text LIKE $1 LIMIT 1', f"%{needle}%")):
            found.append(table)
    return found


async def all_handled(courier) -> bool:
    rows = await fetch(courier, "SELECT handled_at FROM courier_polled_updates")
    return bool(rows) and all(r["handled_at"] is not None for r in rows)


def owner_codes(console: str) -> list[str]:
    """The owner codes printed on the console (captured stderr)."""
    return CODE.findall(console)


async def test_a_stranger_is_told_the_bot_is_private_and_leaves_no_trace(
        botapi, botapi_bot, pg_database, fake, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path) as courier:
        botapi.add_user(STRANGER, "Mallory", username="mallory_stranger")
        for text in ("/demo quokka-on-a-zebra", "/start", "/help", "hello", "/start not-a-code", "/quota"):
            botapi_bot.inject_text(STRANGER, text)
        await until(lambda: all_handled(courier), 15, "handled updates in the inbox")
        await refusals_sent()
        await said(botapi, botapi_bot, STRANGER, en("not_allowed", user_id=STRANGER))  # once, not six times
        assert await fetch(courier, "SELECT 1 FROM courier_jobs") == []
        assert await fetch(courier, "SELECT 1 FROM courier_users") == []
        assert await traces_of(courier, str(STRANGER)) == []
        assert await traces_of(courier, "mallory") == []
        assert await traces_of(courier, "quokka-on-a-zebra") == []


async def test_the_owner_code_makes_the_first_admin_once_and_is_never_shown_again(
        botapi, botapi_bot, pg_database, fake, tmp_path, caplog, capfd):
    caplog.set_level(logging.INFO)  # ComfyUI's level (below it python-telegram-bot logs each update it fetched)
    console = ""
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path / "first") as courier, \
            running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path / "second",
                            COURIER_RECEIVE_UPDATES="0"):
        console += capfd.readouterr().err
        first, second = owner_codes(console)  # each host that started while there was no admin printed its own
        assert first != second
        assert len(await fetch(courier, "SELECT code_hash FROM courier_owner_codes")) == 2
        assert await traces_of(courier, first) == [] and await traces_of(courier, second) == []  # hashes only

        botapi_bot.inject_text(STRANGER, "/start " + "A" * 22)  # a wrong code: told what any stranger is
        await said(botapi, botapi_bot, STRANGER, en("not_allowed", user_id=STRANGER))
        botapi_bot.inject_text(OWNER, f"/start {second}")
        await said(botapi, botapi_bot, OWNER, en("owner_made", user_id=OWNER))
        assert [tuple(r) for r in await fetch(courier, "SELECT user_id, is_admin FROM courier_users")] == [
            (OWNER, True)]
        assert await fetch(courier, "SELECT 1 FROM courier_owner_codes") == []  # all spent
        admin_scope = json.dumps({"type": "chat", "chat_id": OWNER}, sort_keys=True)
        await botapi.wait_for(lambda: "allow" in [c["command"] for c in botapi_bot.commands.get((admin_scope, ""), [])],
                              timeout=15)

        for stranger, code in ((OTHER, first), (ANOTHER, second)):  # spent: the owner's own and the other host's
            botapi_bot.inject_text(stranger, f"/start {code}")
            await said(botapi, botapi_bot, stranger, en("not_allowed", user_id=stranger))
        botapi_bot.inject_text(OWNER, f"/start {first}")  # the owner is greeted as usual, nothing changes
        await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["chat_id"] == OWNER
                                       and c.params["text"].startswith("Hi "))
        assert [tuple(r) for r in await fetch(courier, "SELECT user_id, is_admin FROM courier_users")] == [
            (OWNER, True)]

        botapi_bot.inject_text(OWNER, "/queue")  # an admin now
        await said(botapi, botapi_bot, OWNER, en("queue_empty"))
        botapi_bot.inject_text(OWNER, f"/allow {FRIEND}")
        await said(botapi, botapi_bot, OWNER, en("allow_done", user_id=FRIEND))
        botapi_bot.inject_text(FRIEND, "/status")
        await said(botapi, botapi_bot, FRIEND, en("status_none"))
        await until(lambda: all_handled(courier), 15, "handled updates in the inbox")
        assert await traces_of(courier, first) == [] and await traces_of(courier, second) == []

    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path / "third") as courier:
        console += capfd.readouterr().err
        assert len(owner_codes(console)) == 2  # an admin exists: no code
        assert await fetch(courier, "SELECT 1 FROM courier_owner_codes") == []
    codes = {first, second}
    assert [c for c in botapi_bot.outbox if any(code in json.dumps(c.params) for code in codes)] == []
    assert len([line for line in console.splitlines() if any(code in line for code in codes)]) == 2  # one a host
    # never in a log record: in ComfyUI every record (and sys.stderr) lands in the log it serves at /internal/logs
    assert caplog.records and not [r for r in caplog.records if any(code in r.getMessage() for code in codes)]
    assert any("owner code is printed on the console" in r.getMessage() for r in caplog.records)


async def test_a_stranger_flood_gets_one_reply_and_holds_up_nobody(botapi, botapi_bot, pg_database, fake, tmp_path):
    """60 messages of a stranger, whose reply Telegram keeps waiting (a 429 pauses their chat): an allowed
    user's /help is answered while it waits, and the stranger gets one reply in all. (Each of the 60 had
    its own reply, and while the poller held a batch of updates waiting for theirs, it fetched nobody
    else's: /help came after the stranger's chat was free again.)"""
    held_s = 10
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(FRIEND)) as courier:
        botapi_bot.fail("sendMessage", status=429, retry_after=held_s)  # the stranger's reply: their chat waits
        for n in range(60):
            botapi_bot.inject_text(STRANGER, f"/demo let me in {n}")
        botapi_bot.inject_text(FRIEND, "/help")
        await botapi_bot.wait_for_call("sendMessage", timeout=held_s - 2, where=lambda c: c.params["chat_id"] == FRIEND)
        assert not [c for c in botapi_bot.outbox if c.params.get("chat_id") == STRANGER]  # its reply still waits
        await until(lambda: all_handled(courier), 15, "handled updates in the inbox")
        await said(botapi, botapi_bot, STRANGER, en("not_allowed", user_id=STRANGER))
        await refusals_sent()
        await said(botapi, botapi_bot, STRANGER, en("not_allowed", user_id=STRANGER))  # and no more


async def test_allow_lets_a_user_in_and_disallow_takes_them_out_with_their_jobs(
        botapi, botapi_bot, pg_database, fake, tmp_path):
    fake.pause()  # the job stays active until /disallow
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                               COURIER_ADMIN_USERS=str(ADMIN)) as courier:
        botapi_bot.inject_text(FRIEND, "/status")
        await said(botapi, botapi_bot, FRIEND, en("not_allowed", user_id=FRIEND))
        botapi_bot.inject_text(ADMIN, f"/allow {FRIEND}")
        await said(botapi, botapi_bot, ADMIN, en("allow_done", user_id=FRIEND))
        botapi_bot.inject_text(FRIEND, "/demo let in")
        await until(lambda: fetch(courier, "SELECT 1 FROM courier_jobs WHERE user_id = $1", FRIEND), 15, "a job")

        botapi_bot.inject_text(ADMIN, f"/disallow {FRIEND}")
        await said(botapi, botapi_bot, ADMIN, i18n.ntext("en", "disallow_done", 1, user_id=FRIEND))
        assert [r["status"] for r in await fetch(courier, "SELECT status FROM courier_jobs")] == ["cancelled"]
        botapi_bot.inject_text(FRIEND, "/demo again")
        await said(botapi, botapi_bot, FRIEND, en("not_allowed", user_id=FRIEND), times=2)
        assert len(await fetch(courier, "SELECT 1 FROM courier_jobs")) == 1
        botapi_bot.inject_text(ADMIN, f"/disallow {ADMIN}")
        await said(botapi, botapi_bot, ADMIN, en("disallow_admin", user_id=ADMIN))
        botapi_bot.inject_text(ADMIN, "/allow everyone")
        await said(botapi, botapi_bot, ADMIN, en("ban_usage", name="allow"))


async def test_a_star_opens_the_bot_to_everyone(botapi, botapi_bot, pg_database, fake, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                               COURIER_ALLOWED_USERS="*", COURIER_ADMIN_USERS=str(ADMIN)) as courier:
        botapi_bot.inject_text(STRANGER, "/status")
        await said(botapi, botapi_bot, STRANGER, en("status_none"))
        request = botapi_bot.inject_text(STRANGER, "/demo open")
        await botapi_bot.wait_for_call("sendDocument", timeout=30, where=lambda c: (
            c.result.get("reply_to_message", {}).get("message_id") == request["message_id"]))
        botapi_bot.inject_text(ADMIN, f"/disallow {STRANGER}")  # * still lets them in: the reply says so
        await said(botapi, botapi_bot, ADMIN, en("disallow_by_settings", user_id=STRANGER))
        botapi_bot.inject_text(STRANGER, "/queue")  # open is not admin
        await said(botapi, botapi_bot, STRANGER, en("admin_only", name="queue"))
        assert [r["user_id"] for r in await fetch(courier, "SELECT user_id FROM courier_jobs")] == [STRANGER]
