"""Threat row "allowed but malicious user": someone the operator let in, who then floods the bot.

Can: queue jobs up to their caps. Cannot: have more than ``COURIER_MAX_JOBS_PER_USER`` queued or
running, start more than the hourly and daily quotas allow (a burst of commands handled
concurrently, as the bot does, included), get more than one refusal for a burst (nor a banned
user for a flood), run an admin command, let someone else in with
``/allow`` or take someone out, or cancel another user's job. Real parts: python-telegram-bot
against the Bot API emulator, PostgreSQL, the dispatcher on the fake ComfyUI (paused, so jobs
stay active).
"""

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import refusals_sent, running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(180)

ADMIN, MALLORY, QUOTA_USER, DAY_USER, VICTIM, STRANGER = 876543201, 876543202, 876543203, 876543204, 876543205, \
    876543206
BURST = 20


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


@pytest.fixture
async def fake():
    async with FakeComfyUI(steps=0) as server:
        server.pause()  # jobs stay queued or running: the concurrent cap counts them
        yield server


async def fetch(courier, sql: str, *args):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch(sql, *args)


def texts_to(bot, chat_id: int) -> list[str]:
    return [c.params.get("text") for c in bot.outbox if c.params.get("chat_id") == chat_id and "text" in c.params]


def handled(courier, count: int):
    """Whether at least ``count`` updates are in the inbox, all handled (a probe for ``until``)."""
    async def probe() -> bool:
        rows = await fetch(courier, "SELECT handled_at FROM courier_polled_updates")
        return len(rows) >= count and all(r["handled_at"] is not None for r in rows)
    return probe


async def burst(bot, courier, user_id: int, refusal: str, label: str = "burst") -> tuple[int, int]:
    """``BURST`` /demo commands at once from ``user_id``; once all are handled (a refusal at the cap
    or the quota is sent before its update is), (their jobs, the replies starting with ``refusal``)."""
    before = len(await fetch(courier, "SELECT 1 FROM courier_polled_updates"))
    for n in range(BURST):
        bot.inject_text(user_id, f"/demo {label} {n}")
    await until(handled(courier, before + BURST), 30, f"{BURST} commands of {user_id} handled")
    await refusals_sent()
    jobs = len(await fetch(courier, "SELECT 1 FROM courier_jobs WHERE user_id = $1", user_id))
    return jobs, sum(text.startswith(refusal) for text in texts_to(bot, user_id))


async def test_the_concurrent_cap_and_the_quotas_hold_under_a_burst_told_once(
        botapi, botapi_bot, pg_database, fake, tmp_path):
    """20 commands at once: as many jobs as the cap or the quota lets through, and one refusal for the
    rest (each had its own: 15 identical replies at a cap of 5)."""
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path, COURIER_ADMIN_USERS=str(ADMIN),
                               COURIER_ALLOWED_USERS=f"{MALLORY},{QUOTA_USER},{DAY_USER}",
                               COURIER_MAX_JOBS_PER_USER="5", COURIER_QUOTA_HOUR="6",
                               COURIER_QUOTA_DAY="8") as courier:
        assert await burst(botapi_bot, courier, MALLORY, i18n.ntext("en", "too_many_jobs", 5)) == (5, 1)

    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path, COURIER_ADMIN_USERS=str(ADMIN),
                               COURIER_ALLOWED_USERS=f"{MALLORY},{QUOTA_USER},{DAY_USER}",
                               COURIER_MAX_JOBS_PER_USER="50", COURIER_QUOTA_HOUR="4",
                               COURIER_QUOTA_DAY="6") as courier:
        hour_line = en("quota_hour_spent", limit=4, time="")[:40]
        assert await burst(botapi_bot, courier, QUOTA_USER, hour_line, "hour") == (4, 1)
        assert len(await fetch(courier, "SELECT 1 FROM courier_quota_events WHERE user_id = $1", QUOTA_USER)) == 4

        async with courier.store.pool.acquire() as conn:  # four jobs counted 2 to 5 hours ago: two left today
            await conn.execute("INSERT INTO courier_users (user_id) VALUES ($1)", DAY_USER)
            await conn.execute("INSERT INTO courier_quota_events (user_id, at) SELECT $1, now() - h * interval "
                               "'1 hour' FROM generate_series(2, 5) h", DAY_USER)
        day_line = en("quota_day_spent", limit=6, time="")[:40]
        assert await burst(botapi_bot, courier, DAY_USER, day_line, "day") == (2, 1)


async def test_a_banned_user_is_told_once_however_many_messages(botapi, botapi_bot, pg_database, fake, tmp_path):
    """50 messages of a banned user: one "you are banned" (there were 50), and nothing queued."""
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path, COURIER_ADMIN_USERS=str(ADMIN),
                               COURIER_ALLOWED_USERS=str(MALLORY)) as courier:
        botapi_bot.inject_text(ADMIN, f"/ban {MALLORY}")
        await botapi.wait_for(lambda: texts_to(botapi_bot, ADMIN), timeout=15)
        assert texts_to(botapi_bot, ADMIN) == [i18n.ntext("en", "ban_done", 0, user_id=MALLORY)]
        for n in range(50):
            botapi_bot.inject_text(MALLORY, f"/demo let me back {n}")
        await until(handled(courier, 51), 30, "50 commands handled")  # and /ban, the admin's
        await refusals_sent()
        assert texts_to(botapi_bot, MALLORY) == [en("banned")]
        assert await fetch(courier, "SELECT 1 FROM courier_jobs") == []


async def test_admin_commands_are_refused_and_allow_does_nothing(botapi, botapi_bot, pg_database, fake, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path, COURIER_ADMIN_USERS=str(ADMIN),
                               COURIER_ALLOWED_USERS=f"{MALLORY},{VICTIM}") as courier:
        botapi_bot.inject_text(VICTIM, "/demo mine")
        (victim_job,) = await until(lambda: fetch(courier, "SELECT id FROM courier_jobs WHERE user_id = $1", VICTIM),
                                    15, "the victim's job")
        commands = {"queue": "/queue", "allow": f"/allow {STRANGER}", "disallow": f"/disallow {VICTIM}",
                    "ban": f"/ban {VICTIM}", "unban": f"/unban {MALLORY}", "stats": "/stats", "bench": "/bench demo",
                    "compare": "/compare", "backends": "/backends drain 1"}
        for text in commands.values():
            botapi_bot.inject_text(MALLORY, text)
        botapi_bot.inject_text(MALLORY, f"/cancel {victim_job['id']}")
        wanted = [en("admin_only", name=name) for name in commands] + [en("cancel_job_none", id=victim_job["id"])]
        await botapi.wait_for(lambda: len(texts_to(botapi_bot, MALLORY)) >= len(wanted), timeout=15)
        assert sorted(texts_to(botapi_bot, MALLORY)) == sorted(wanted)

        botapi_bot.inject_text(STRANGER, "/status")  # /allow by Mallory let nobody in
        await botapi.wait_for(lambda: texts_to(botapi_bot, STRANGER), timeout=15)
        assert texts_to(botapi_bot, STRANGER) == [en("not_allowed", user_id=STRANGER)]
        botapi_bot.inject_text(VICTIM, "/status")  # nor took anyone out, nor banned them
        await botapi_bot.wait_for_call("sendMessage", timeout=15, where=lambda c: c.params["chat_id"] == VICTIM
                                       and c.params["text"].startswith(f"#{victim_job['id']} /demo"))
        assert [tuple(r) for r in await fetch(courier, "SELECT user_id, banned, allowed, is_admin FROM courier_users "
                                                       "ORDER BY user_id")] == [
            (MALLORY, False, False, False), (VICTIM, False, False, False)]
        assert [r["status"] for r in await fetch(courier, "SELECT status FROM courier_jobs")] in (["queued"],
                                                                                                 ["running"])
        assert await fetch(courier, "SELECT 1 FROM courier_backends WHERE draining") == []
