"""Access and quotas end to end: python-telegram-bot ⇄ Bot API emulator, real PostgreSQL, the dispatcher on
the fake ComfyUI. Allowlist by id and by @username (bound to the first id, not to whoever has the name
later), bans, hourly and daily quotas with /quota, /cancel <job id>, and the admin commands and menu."""

import asyncio
import json

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import replies_to, running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI

ADMIN = 111
USER = 222
OTHER = 333


@pytest.fixture
async def fake():
    async with FakeComfyUI(steps=0) as server:
        yield server


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


async def reply(bot, text: str, timeout: float = 10):
    """The sendMessage that said exactly ``text``, waiting for it."""
    try:
        return await bot.wait_for_call("sendMessage", where=lambda c: c.params.get("text") == text, timeout=timeout)
    except TimeoutError:
        raise AssertionError(
            f"never sent {text!r}; the bot sent {[c.params.get('text') for c in bot.outbox]}") from None


async def fetch(courier, sql: str, *args):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch(sql, *args)


def courier_with(botapi, botapi_bot, pg_database, fake, tmp_path, **env):
    return running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path, COURIER_ADMIN_USERS=f"{ADMIN}",
                           **{"COURIER_ALLOWED_USERS": f"{ADMIN},{USER},{OTHER}", **env})


async def test_an_hourly_quota_refuses_the_next_job_and_quota_shows_what_is_left(
        botapi, botapi_bot, pg_database, fake, tmp_path):
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path, COURIER_QUOTA_HOUR="2",
                            COURIER_QUOTA_DAY="5") as courier:
        async def has_jobs(user: int, count: int) -> bool:  # a job done within a moment gets no status
            return len(await fetch(courier, "SELECT 1 FROM courier_jobs WHERE user_id = $1", user)) >= count

        for count, prompt in enumerate(("one", "two"), 1):
            botapi_bot.inject_text(USER, f"/demo {prompt}")
            assert await until(lambda n=count: has_jobs(USER, n), 30), f"job {prompt} not queued"
        botapi_bot.inject_text(USER, "/demo three")
        refusal = await botapi_bot.wait_for_call("sendMessage", where=lambda c: "jobs of this hour" in c.params["text"])
        assert refusal.params["text"].startswith(en("quota_hour_spent", limit=2, time="")[:30])
        assert [r["command"] for r in await fetch(courier, "SELECT command FROM courier_jobs WHERE user_id = $1",
                                                   USER)] == ["demo", "demo"]
        assert len(await fetch(courier, "SELECT 1 FROM courier_quota_events WHERE user_id = $1", USER)) == 2

        botapi_bot.inject_text(USER, "/quota")
        shown = await botapi_bot.wait_for_call("sendMessage", where=lambda c: "Last 24 hours" in c.params["text"])
        lines = shown.params["text"].split("\n")
        assert lines[0].startswith("At a time: ") and lines[0].endswith(" of 5 jobs queued or running.")
        assert lines[1].startswith("You have used your 2 jobs of this hour; the next one frees up at ")
        assert lines[2] == en("quota_day_left", left=3, limit=5)

        for prompt in ("a", "b", "c"):  # the admin has no quota
            botapi_bot.inject_text(ADMIN, f"/demo {prompt}")
        assert await until(lambda: has_jobs(ADMIN, 3), 30), "the admin's three jobs not queued"
        botapi_bot.inject_text(ADMIN, "/quota")
        await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["chat_id"] == ADMIN
                                       and c.params["text"].endswith(en("quota_unlimited")))


async def test_the_daily_quota_counts_jobs_of_earlier_hours(botapi, botapi_bot, pg_database, fake, tmp_path):
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path, COURIER_QUOTA_DAY="3") as courier:
        async with courier.store.pool.acquire() as conn:  # three jobs counted 2 to 4 hours ago
            await conn.execute("INSERT INTO courier_users (user_id) VALUES ($1)", USER)
            await conn.execute("INSERT INTO courier_quota_events (user_id, at) SELECT $1, now() - h * interval "
                               "'1 hour' FROM generate_series(2, 4) h", USER)
        botapi_bot.inject_text(USER, "/demo x")
        refusal = await botapi_bot.wait_for_call("sendMessage", where=lambda c: "24 hours" in c.params["text"])
        assert refusal.params["text"].startswith("You have used your 3 jobs of the last 24 hours; the next one frees "
                                                 "up at ")
        assert await fetch(courier, "SELECT 1 FROM courier_jobs") == []


async def test_an_allowed_username_is_bound_to_the_first_id_that_brings_it(
        botapi, botapi_bot, pg_database, fake, tmp_path):
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path,
                            COURIER_ALLOWED_USERS="@Ada_Lovelace") as courier:
        botapi.add_user(USER, "Ada", username="ada_lovelace")
        botapi_bot.inject_text(USER, "/status")
        await reply(botapi_bot, en("status_none"))
        assert [tuple(r) for r in await fetch(courier, "SELECT username, user_id FROM courier_allowed_names")] == [
            ("ada_lovelace", USER)]

        botapi.add_user(USER, "Ada", username="ada_elsewhere")  # she changes her name ...
        botapi.add_user(OTHER, "Mallory", username="Ada_Lovelace")  # ... and someone else takes it
        botapi_bot.inject_text(OTHER, "/status")
        await reply(botapi_bot, en("not_allowed", user_id=OTHER))
        botapi_bot.inject_text(USER, "/status")  # the stored id still is let in
        await botapi.wait_for(lambda: [c for c in botapi_bot.outbox if c.params.get("text") == en("status_none")
                                       and c.params.get("chat_id") == USER][1:])


async def test_bans_by_username_and_id_turn_the_user_away_until_unbanned(
        botapi, botapi_bot, pg_database, fake, tmp_path):
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path) as courier:
        botapi.add_user(USER, "Uta", username="uta_user", language_code="de")
        botapi_bot.inject_text(USER, "/status")  # seen once: her @username is known
        await reply(botapi_bot, i18n.text("de", "status_none"))
        botapi_bot.inject_text(USER, "/ban 1")  # not an admin
        await reply(botapi_bot, i18n.text("de", "admin_only", name="ban"))

        botapi_bot.inject_text(ADMIN, "/ban @Uta_User")
        await reply(botapi_bot, i18n.ntext("en", "ban_done", 0, user_id=USER))
        botapi_bot.inject_text(USER, "/demo hallo")
        await reply(botapi_bot, i18n.text("de", "banned"))
        assert await fetch(courier, "SELECT 1 FROM courier_jobs") == []

        botapi_bot.inject_text(ADMIN, f"/ban {OTHER}")  # an id nobody has seen yet
        await reply(botapi_bot, i18n.ntext("en", "ban_done", 0, user_id=OTHER))
        botapi_bot.inject_text(OTHER, "/status")
        await reply(botapi_bot, en("banned"))
        botapi_bot.inject_text(ADMIN, f"/ban {ADMIN}")
        await reply(botapi_bot, en("ban_admin", user_id=ADMIN))
        botapi_bot.inject_text(ADMIN, "/ban @nobody_here")
        await reply(botapi_bot, en("ban_unknown_name", username="nobody_here"))
        botapi_bot.inject_text(ADMIN, "/ban some one")
        await reply(botapi_bot, en("ban_usage", name="ban"))

        botapi_bot.inject_text(ADMIN, "/unban @uta_user")
        await reply(botapi_bot, en("unban_done", user_id=USER))
        request = botapi_bot.inject_text(USER, "/demo hallo")
        await botapi_bot.wait_for_call("sendDocument", where=replies_to(request), timeout=60)  # her job ran


async def test_admin_replies_say_what_happened(botapi, botapi_bot, pg_database, fake, tmp_path):
    """No user 0; /allow of a banned user says the ban stays; /unban of a user never banned says so."""
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path) as courier:
        botapi_bot.inject_text(ADMIN, "/allow 0")
        await reply(botapi_bot, en("ban_usage", name="allow"))
        assert await fetch(courier, "SELECT 1 FROM courier_users WHERE user_id = 0") == []

        botapi_bot.inject_text(ADMIN, "/ban 43")
        await reply(botapi_bot, i18n.ntext("en", "ban_done", 0, user_id=43))
        botapi_bot.inject_text(ADMIN, "/allow 43")
        await reply(botapi_bot, en("allow_still_banned", user_id=43))
        botapi_bot.inject_text(43, "/status")
        await reply(botapi_bot, en("banned"))

        botapi_bot.inject_text(ADMIN, "/unban 999")
        await reply(botapi_bot, en("unban_not_banned", user_id=999))
        botapi_bot.inject_text(ADMIN, "/unban 43")
        await reply(botapi_bot, en("unban_done", user_id=43))


async def until(probe, timeout: float = 10.0):
    """Poll the coroutine function ``probe`` until it returns something truthy, for ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (value := await probe()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{probe.__name__} still false after {timeout} s")
        await asyncio.sleep(0.05)
    return value


async def test_cancel_by_id_for_ones_own_jobs_and_for_an_admin_anyones(
        botapi, botapi_bot, pg_database, fake, tmp_path):
    fake.pause()  # a claimed job keeps running, the others wait
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path, COURIER_PIPELINE_DEPTH="1") as courier:
        async def statuses():
            return {r["id"]: r["status"] for r in await fetch(courier, "SELECT id, status FROM courier_jobs")}

        for count, user in enumerate((USER, OTHER, OTHER), 1):
            botapi_bot.inject_text(user, "/demo wait")

            async def queued(count=count):
                return len(await statuses()) == count
            await until(queued)
        mine, theirs, their_second = sorted(await statuses())

        botapi_bot.inject_text(USER, f"/cancel {theirs}")  # not hers
        await reply(botapi_bot, en("cancel_job_none", id=theirs))
        botapi_bot.inject_text(USER, "/cancel #x")
        await reply(botapi_bot, en("cancel_usage"))
        botapi_bot.inject_text(USER, f"/cancel #{mine}")
        await reply(botapi_bot, en("cancel_job_done", id=mine))

        async def next_one_running():
            return (await statuses())[theirs] == "running"
        await until(next_one_running)
        botapi_bot.inject_text(ADMIN, "/queue")
        listed = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["chat_id"] == ADMIN)
        assert listed.params["text"].split("\n") == [
            en("queue_line", id=theirs, command="demo", user_id=OTHER, state=en("state_running")),
            en("queue_line", id=their_second, command="demo", user_id=OTHER, state=en("state_queued", position=1))]
        botapi_bot.inject_text(ADMIN, f"/cancel {their_second}")
        await reply(botapi_bot, en("cancel_job_done", id=their_second))
        assert await statuses() == {mine: "cancelled", theirs: "running", their_second: "cancelled"}
        fake.resume()


async def test_stats_count_jobs_and_failures_per_day_and_command(botapi, botapi_bot, pg_database, fake, tmp_path):
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path) as courier:
        botapi_bot.inject_text(ADMIN, "/stats")
        await reply(botapi_bot, en("stats_none", days=7))
        async with courier.store.pool.acquire() as conn:
            await conn.execute("INSERT INTO courier_users (user_id) VALUES ($1)", USER)
            await conn.execute(
                "INSERT INTO courier_jobs (user_id, chat_id, command, status, created_at, started_at, finished_at) "
                "SELECT $1, $1, c, s, '2026-11-30 12:00Z'::timestamptz, now(), now() + d * interval '1 second' "
                "FROM (VALUES ('f', 'succeeded', 2), ('f', 'succeeded', 4), ('f', 'failed', 100), "
                "('demo', 'succeeded', 1)) v(c, s, d)", USER)
            await conn.execute("UPDATE courier_jobs SET created_at = now() - interval '1 hour'")
        day = (await fetch(courier, "SELECT (now() - interval '1 hour') AT TIME ZONE 'UTC' AS d"))[0]["d"].date()
        botapi_bot.inject_text(ADMIN, "/stats")
        shown = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith("Jobs in"))
        assert shown.params["text"].split("\n") == [
            en("stats_title", days=7), en("stats_day", day=day.isoformat(), jobs=4, failed=1),
            en("stats_per_command"), en("stats_command", command="demo", jobs=1, failed=0, median="1.0"),
            en("stats_command", command="f", jobs=3, failed=1, median="3.0")]


async def test_admin_commands_are_in_the_admins_menu_only(botapi, botapi_bot, pg_database, fake, tmp_path):
    async with courier_with(botapi, botapi_bot, pg_database, fake, tmp_path):
        admin_scope = json.dumps({"type": "chat", "chat_id": ADMIN}, sort_keys=True)
        default_scope = json.dumps({"type": "default"}, sort_keys=True)
        for language in ("", *i18n.LANGUAGES):
            everyone = [c["command"] for c in botapi_bot.commands[(default_scope, language)]]
            admins = [c["command"] for c in botapi_bot.commands[(admin_scope, language)]]
            assert everyone[-10:] == ["help", "status", "cancel", "history", "quota", "lang", "forget", "settings",
                                      "models", "app"]
            assert admins == everyone + ["queue", "allow", "disallow", "ban", "unban", "stats", "bench", "compare",
                                         "backends"]
        german = {c["command"]: c["description"] for c in botapi_bot.commands[(admin_scope, "de")]}
        assert german["ban"] == i18n.text("de", "menu_ban")
        assert [key for key in botapi_bot.commands if "chat" in key[0]] == [
            (admin_scope, language) for language in ("", *i18n.LANGUAGES)]
