"""The update inbox: an update delivered twice (a webhook retry, polling after a restart) makes one
job and one reply. Real python-telegram-bot on the Bot API emulator, real PostgreSQL; no backend,
so the only reply is the chat's queue message, listing the jobs."""

import contextlib
import logging
from pathlib import Path

import asyncpg
import pytest
from aiohttp import ClientSession

from comfyui_courier.bot.polling import BATCH
from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.server_routes.helpers import serve_routes
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(90)

USER = 31
SECRET = "inbox-secret"


@contextlib.asynccontextmanager
async def started(courier: Courier):
    await courier.start()
    try:
        await courier.booted()
        assert courier.health.state("bot") == "ok", courier.health_report()
        yield courier
    finally:
        await courier.stop()


def settings(botapi, botapi_bot, pg_database, **env):
    return load_settings(None, {"TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
                                "COURIER_DATABASE_URL": pg_database, "COURIER_ALLOWED_USERS": "*", **env})


async def jobs_and_inbox(courier: Courier) -> tuple[list, list]:
    async with courier.store.pool.acquire() as conn:
        return (await conn.fetch("SELECT id, params->>'prompt' AS prompt FROM courier_jobs"),
                await conn.fetch("SELECT update_id, job_id FROM courier_updates"))


def replies_to(botapi_bot, message: dict) -> list:
    return [call for call in botapi_bot.outbox if call.method == "sendMessage"
            and call.result.get("reply_to_message", {}).get("message_id") == message["message_id"]]


def queue_lines(botapi_bot) -> int:
    """The most jobs the chat's queue message listed (it is posted once, then edited)."""
    return max((call.params.get("text", "").count("Queued /") for call in botapi_bot.outbox
                if call.method in ("sendMessage", "editMessageText")), default=0)


async def handled_before(botapi, caplog, update_id: int) -> None:
    await botapi.wait_for(lambda: f"update {update_id} of bot" in caplog.text and "handled before" in caplog.text,
                          timeout=30)


async def polled_and_confirmed(botapi, botapi_bot, update: dict) -> None:
    """The bot fetched ``update`` and confirmed it: it was kept in the polling inbox as handled."""
    await botapi.wait_for(lambda: update not in botapi_bot.updates, timeout=30)


async def test_an_update_polled_again_after_a_restart_queues_nothing_twice(botapi, botapi_bot, pg_database,
                                                                         tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="courier.submit")
    config = settings(botapi, botapi_bot, pg_database)
    async with started(Courier(config, Path(tmp_path), None)) as first:
        request = botapi_bot.inject_text(USER, "/demo once")
        update = botapi_bot.updates[-1]
        await botapi.wait_for(lambda: replies_to(botapi_bot, request), timeout=30)
        jobs, inbox = await jobs_and_inbox(first)
        assert [(row["update_id"], row["job_id"]) for row in inbox] == [(update["update_id"], jobs[0]["id"])]
    # The first process died before its next getUpdates confirmed the update: Telegram has it still.
    botapi_bot.updates.append(update)
    async with started(Courier(config, Path(tmp_path), None)) as second:
        await polled_and_confirmed(botapi, botapi_bot, update)
        jobs, inbox = await jobs_and_inbox(second)
    assert [row["prompt"] for row in jobs] == ["once"] and len(inbox) == 1
    assert len(replies_to(botapi_bot, request)) == 1


async def test_an_update_asking_for_several_jobs_is_recorded_per_job_and_queues_them_once(
        botapi, botapi_bot, pg_database, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="courier.submit")
    config = settings(botapi, botapi_bot, pg_database)
    async with started(Courier(config, Path(tmp_path), None)) as first:
        request = botapi_bot.inject_text(USER, "/demo --n 3 thrice")  # /demo takes no batch: three jobs
        update = botapi_bot.updates[-1]
        await botapi.wait_for(lambda: queue_lines(botapi_bot) == 3, timeout=30)
        jobs, inbox = await jobs_and_inbox(first)
        assert sorted((row["update_id"], row["job_id"]) for row in inbox) == [
            (update["update_id"], job["id"]) for job in sorted(jobs, key=lambda job: job["id"])]
    botapi_bot.updates.append(update)
    async with started(Courier(config, Path(tmp_path), None)) as second:
        await polled_and_confirmed(botapi, botapi_bot, update)
        jobs, inbox = await jobs_and_inbox(second)
    assert [row["prompt"] for row in jobs] == ["thrice"] * 3 and len(inbox) == 3
    assert len(replies_to(botapi_bot, request)) == 1  # the chat's queue message, listing all three
    assert queue_lines(botapi_bot) == 3


async def test_a_webhook_retry_queues_nothing_twice_and_the_first_answer_came_after_commit(
        botapi, botapi_bot, pg_database, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="courier.submit")

    def make_courier(url):
        return Courier(settings(botapi, botapi_bot, pg_database, COURIER_WEBHOOK_URL=f"{url}/courier/telegram/webhook",
                                COURIER_WEBHOOK_SECRET=SECRET), Path(tmp_path), None)

    runner, url, courier = await serve_routes(make_courier)
    try:
        async with started(courier), ClientSession() as http:
            request = botapi_bot.inject_text(USER, "/demo once")
            update = botapi_bot.updates[-1]
            await botapi.wait_for(lambda: update not in botapi_bot.updates, timeout=30)  # answered 200
            jobs, inbox = await jobs_and_inbox(courier)  # ... only once the job was committed
            assert [(row["update_id"], row["job_id"]) for row in inbox] == [(update["update_id"], jobs[0]["id"])]
            await botapi.wait_for(lambda: replies_to(botapi_bot, request), timeout=30)
            async with http.post(f"{url}/courier/telegram/webhook", json=update,
                                 headers={"X-Telegram-Bot-Api-Secret-Token": SECRET}) as response:
                assert response.status == 200  # Telegram's retry: handled (before), so it stops retrying
            await handled_before(botapi, caplog, update["update_id"])
            jobs, inbox = await jobs_and_inbox(courier)
    finally:
        await runner.cleanup()
    assert [row["prompt"] for row in jobs] == ["once"] and len(inbox) == 1
    assert len(replies_to(botapi_bot, request)) == 1


async def test_a_flood_waits_at_telegram_and_every_update_is_marked_handled(botapi, botapi_bot, pg_database,
                                                                            tmp_path, caplog):
    """While a getUpdates batch is still being handled the bot asks for no more (the rest wait at
    Telegram, not in the bot's memory); each handled update is marked so in the inbox (in one
    UPDATE per burst), so a restart handles none of them again."""
    caplog.set_level(logging.DEBUG, logger="courier.bot")
    flood = 2 * BATCH + 20
    config = settings(botapi, botapi_bot, pg_database, COURIER_MAX_JOBS_PER_USER=str(flood))
    blocker = await asyncpg.connect(pg_database)
    try:
        async with started(Courier(config, Path(tmp_path), None)):
            lock = blocker.transaction()
            await lock.start()
            await blocker.execute("LOCK TABLE courier_updates IN EXCLUSIVE MODE")  # every job's commit waits
            try:
                for index in range(flood):
                    botapi_bot.inject_text(USER, f"/demo flood {index}")
                async def waits_for_room():
                    return "the next getUpdates waits for room" in caplog.text

                await until(waits_for_room, 30, "wait for room in the bot's log")
                delivered = [len(call.result) for call in botapi_bot.calls
                             if call.method == "getUpdates" and call.ok and call.result]
                assert delivered == [BATCH], delivered
                assert all(call.params.get("limit") == BATCH for call in botapi_bot.calls
                           if call.method == "getUpdates")
            finally:
                await lock.rollback()
            await until(lambda: blocker.fetchval("SELECT count(*) = $1 FROM courier_jobs", flood), 60,
                        "every command's job")
        assert await blocker.fetchval("SELECT count(*) FROM courier_polled_updates WHERE handled_at IS NULL") == 0
        assert await blocker.fetchval("SELECT count(*) FROM courier_polled_updates") == flood
    finally:
        await blocker.close()


async def test_updates_whose_handled_mark_failed_are_handled_again_and_queue_nothing_twice(
        botapi, botapi_bot, pg_database, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="courier.submit")
    config = settings(botapi, botapi_bot, pg_database)
    conn = await asyncpg.connect(pg_database)
    try:
        async with started(Courier(config, Path(tmp_path), None)) as courier:
            await conn.execute("""
                CREATE FUNCTION refuse_marks() RETURNS trigger LANGUAGE plpgsql AS
                $$ BEGIN RAISE EXCEPTION 'no marks now'; END $$;
                CREATE TRIGGER refuse_marks BEFORE UPDATE ON courier_polled_updates
                FOR EACH ROW EXECUTE FUNCTION refuse_marks()""")
            requests = [botapi_bot.inject_text(USER, f"/demo {index}") for index in range(5)]
            ids = [update["update_id"] for update in botapi_bot.updates[-5:]]

            async def all_handled_again():  # from the inbox, after their marks failed
                return all(f"update {update_id} of bot" in caplog.text for update_id in ids)

            await until(all_handled_again, 30, "handling again of the updates whose marks failed")
            await conn.execute("DROP TRIGGER refuse_marks ON courier_polled_updates")
            await until(lambda: conn.fetchval("SELECT count(*) = 0 FROM courier_polled_updates "
                                              "WHERE handled_at IS NULL"), 30, "every update marked handled")
            jobs, inbox = await jobs_and_inbox(courier)
    finally:
        await conn.close()
    assert sorted(row["prompt"] for row in jobs) == [str(index) for index in range(5)] and len(inbox) == 5
    assert sum(len(replies_to(botapi_bot, request)) for request in requests) == 1  # one queue message
    assert queue_lines(botapi_bot) == 5
