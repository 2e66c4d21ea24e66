"""Telegram down for minutes while a job's result goes out (issue 28, item 1): the job waits as
'delivering' (its files in PostgreSQL, its backend free) and the file and its "Done" arrive once
Telegram is back, once, also when the bot host is SIGKILLed during the outage and another takes
over; a definite refusal still fails the job at once, with Telegram's reason. Real processes
(``python <pack> run``), real PostgreSQL, the Bot API emulator's outage control, a fake ComfyUI.

Settings keep the outage realistic and the test bounded: the waits between tries top out at 5 s
(``COURIER_DELIVERY_BACKOFF_MAX_S``), leases last 6 s.
"""

import time

import asyncpg
import pytest

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import replies_to, shown_text, standalone_courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(420)

USER = 51
OUTAGE_S = 120.0  # the case: two minutes, with a host restart in the middle
SHORT_OUTAGE_S = 12.0  # where the length proves nothing more: past the quick tries (3.5 s) and a lease (6 s)
SETTINGS = {"COURIER_ALLOWED_USERS": "*", "COURIER_PROGRESS_INTERVAL_S": "0", "COURIER_JOB_LEASE_S": "6",
            "COURIER_DELIVERY_BACKOFF_MAX_S": "5"}
STEPS = 6
STEP_S = 1.0
LAST_STEP_BEGUN = i18n.text("en", "progress", name="demo", value=STEPS - 1, max=STEPS,
                            percent=100 * (STEPS - 1) // STEPS)
"""Shown as the last step begins, a second before the result."""


@pytest.fixture
async def db(pg_database):
    conn = await asyncpg.connect(pg_database)
    yield conn
    await conn.close()


@pytest.fixture
def slow_comfy(fake_comfy):
    fake_comfy.steps, fake_comfy.step_delay = STEPS, STEP_S  # the job shows its steps in a status message
    return fake_comfy


def results(botapi_bot, request) -> list:
    return [call for call in botapi_bot.outbox if call.method == "sendDocument" and replies_to(request)(call)]


async def job_in(db, *statuses: str):
    return await db.fetchrow("SELECT id, status, attempts, worker, error FROM courier_jobs WHERE status = any($1)",
                             list(statuses))


async def last_step_then_outage(botapi_bot, request, seconds: float = OUTAGE_S, *,
                                hang: bool = False) -> tuple[int, float]:
    """Telegram goes down as the job's last step begins; the status message's id, and when
    Telegram is back (``Call.received_at``'s clock)."""
    step = await botapi_bot.wait_for_call(
        "editMessageText", timeout=60, where=lambda call: (call.params.get("text") or "").startswith(LAST_STEP_BEGUN))
    botapi_bot.outage(seconds, hang=hang)
    back_at = time.perf_counter() + seconds
    assert not results(botapi_bot, request), "the result went before the outage"
    return int(step.params["message_id"]), back_at


async def done_in(botapi_bot, message_id: int):
    """The edit that makes the status message say "Done in …" (it comes after the job's row ends)."""
    return await botapi_bot.wait_for_call(
        "editMessageText", timeout=30,
        where=lambda call: call.params.get("message_id") == message_id and call.params["text"].startswith("Done in "))


def shown(botapi_bot, message_id: int) -> str:
    (message,) = [m for m in botapi_bot.history(USER) if m["message_id"] == message_id]
    return message.get("text") or message.get("caption") or ""


async def test_an_outage_after_the_last_step_delivers_the_file_and_done_once_it_ends(
        botapi, botapi_bot, pg_database, db, slow_comfy, tmp_path):
    async with standalone_courier(botapi, botapi_bot, pg_database, slow_comfy.url, tmp_path / "host", **SETTINGS):
        request = botapi_bot.inject_text(USER, "/demo a lighthouse")
        status_id, back_at = await last_step_then_outage(botapi_bot, request, 2 * SHORT_OUTAGE_S)
        waiting = await until(lambda: job_in(db, "delivering", "failed", "succeeded"), 60, "the job's result waiting")
        assert waiting["status"] == "delivering", dict(waiting)  # neither failed nor re-rendered

        sent = await botapi_bot.wait_for_call("sendDocument", timeout=OUTAGE_S + 60, where=replies_to(request))
        job = await until(lambda: job_in(db, "succeeded", "failed"), 30, "the job ended")
        await done_in(botapi_bot, status_id)
    assert sent.received_at >= back_at
    assert (job["status"], job["attempts"]) == ("succeeded", 1), dict(job)
    assert len(results(botapi_bot, request)) == 1
    assert shown(botapi_bot, status_id).startswith("Done in "), shown(botapi_bot, status_id)
    assert not [call for call in botapi_bot.outbox if "failed" in (shown_text(call) or "")]
    assert await db.fetchval("SELECT count(*) FROM courier_outbox") == 0  # the kept file went with the job


async def test_the_host_killed_during_the_outage_another_host_delivers_once_it_ends(
        botapi, botapi_bot, pg_database, db, slow_comfy, tmp_path):
    async with standalone_courier(botapi, botapi_bot, pg_database, slow_comfy.url, tmp_path / "first",
                                  **SETTINGS) as first:
        request = botapi_bot.inject_text(USER, "/demo a lighthouse")
        status_id, back_at = await last_step_then_outage(botapi_bot, request)
        waiting = await until(lambda: job_in(db, "delivering", "failed", "succeeded"), 60, "the job's result waiting")
        assert waiting["status"] == "delivering", dict(waiting)
        first.kill()  # no cleanup: its lease must run out
        await first.wait()
    async with standalone_courier(botapi, botapi_bot, pg_database, slow_comfy.url, tmp_path / "second",
                                  **SETTINGS) as second:
        assert time.perf_counter() < back_at, "the second host started after the outage"
        taken = await until(lambda: job_in(db, "delivering", "succeeded", "failed"), 30, "the job")
        sent = await botapi_bot.wait_for_call("sendDocument", timeout=OUTAGE_S + 60, where=replies_to(request))
        job = await until(lambda: job_in(db, "succeeded", "failed"), 30, "the job ended")
        await done_in(botapi_bot, status_id)
    assert taken["status"] == "delivering", dict(taken)
    assert sent.received_at >= back_at
    assert (job["status"], job["attempts"]) == ("succeeded", 1), dict(job)  # never rendered again
    assert f":{second.pid}:" in job["worker"], job["worker"]
    assert len(results(botapi_bot, request)) == 1
    assert shown(botapi_bot, status_id).startswith("Done in "), shown(botapi_bot, status_id)


async def test_a_hang_leaves_no_silence_the_status_says_what_is_known_once_telegram_answers(
        botapi, botapi_bot, pg_database, db, slow_comfy, tmp_path):
    """No answer at all: the file's send may have reached Telegram, so it is not sent again (it
    could show twice); the job's last status says so once Telegram answers again."""
    async with standalone_courier(botapi, botapi_bot, pg_database, slow_comfy.url, tmp_path / "host", **SETTINGS):
        request = botapi_bot.inject_text(USER, "/demo a lighthouse")
        status_id, back_at = await last_step_then_outage(botapi_bot, request, SHORT_OUTAGE_S, hang=True)
        told = await botapi_bot.wait_for_call(
            "editMessageText", timeout=SHORT_OUTAGE_S + 60,
            where=lambda call: call.params.get("message_id") == status_id and "Done in" in call.params.get("text", ""))
        job = await until(lambda: job_in(db, "succeeded", "failed"), 30, "the job ended")
    assert told.received_at >= back_at
    assert (job["status"], job["attempts"]) == ("succeeded", 1), dict(job)
    assert "did not confirm" in shown(botapi_bot, status_id), shown(botapi_bot, status_id)
    assert len(results(botapi_bot, request)) == 0  # at most once: the emulator dropped the hung send


async def test_a_refusal_after_the_outage_fails_the_job_at_once_with_telegrams_reason(
        botapi, botapi_bot, pg_database, db, slow_comfy, tmp_path):
    async with standalone_courier(botapi, botapi_bot, pg_database, slow_comfy.url, tmp_path / "host", **SETTINGS):
        request = botapi_bot.inject_text(USER, "/demo a lighthouse")
        botapi_bot.fail("sendDocument", status=400, description="Bad Request: chat not found")  # once it is back
        status_id, back_at = await last_step_then_outage(botapi_bot, request, SHORT_OUTAGE_S)
        job = await until(lambda: job_in(db, "succeeded", "failed"), SHORT_OUTAGE_S + 60, "the job ended")
        await botapi_bot.wait_for_call(
            "editMessageText", timeout=30,
            where=lambda call: call.params.get("message_id") == status_id and "failed" in call.params.get("text", ""))
    after = [call for call in botapi_bot.calls if call.method == "sendDocument" and call.received_at >= back_at]
    assert [call.status for call in after] == [400]  # refused once Telegram is back: not tried again
    assert job["status"] == "failed" and "chat not found" in job["error"].lower(), dict(job)
    assert "chat not found" in shown(botapi_bot, status_id).lower(), shown(botapi_bot, status_id)
    assert not results(botapi_bot, request)


async def test_where_only_files_fail_the_status_says_the_result_waits_until_it_goes(
        botapi, botapi_bot, pg_database, db, slow_comfy, tmp_path):
    """Telegram's file uploads failing while its edits go (say its file servers are down): the user
    reads that the result waits, then gets it."""
    async with standalone_courier(botapi, botapi_bot, pg_database, slow_comfy.url, tmp_path / "host", **SETTINGS):
        botapi_bot.fail("sendDocument", status=502, times=6)  # the quick tries, and two after the job waits
        request = botapi_bot.inject_text(USER, "/demo a lighthouse")
        waits = i18n.text("en", "telegram_down_result", name="demo")
        told = await botapi_bot.wait_for_call("editMessageText", timeout=60,
                                              where=lambda call: call.params.get("text") == waits)
        sent = await botapi_bot.wait_for_call("sendDocument", timeout=60, where=replies_to(request))
        job = await until(lambda: job_in(db, "succeeded", "failed"), 30, "the job ended")
        await done_in(botapi_bot, int(told.params["message_id"]))
    assert told.received_at < sent.received_at
    assert (job["status"], job["attempts"]) == ("succeeded", 1), dict(job)
    assert len(results(botapi_bot, request)) == 1
    assert shown(botapi_bot, int(told.params["message_id"])).startswith("Done in ")


async def test_a_wait_for_telegram_does_not_count_against_the_jobs_time_limit(
        botapi, botapi_bot, pg_database, db, slow_comfy, tmp_path):
    """``COURIER_JOB_TIMEOUT_S`` stops a prompt that runs too long on its backend; a result that
    waits for Telegram holds no backend, and is neither timed out nor failed."""
    limit_s = STEPS * STEP_S + 4  # the run fits; the run and the outage do not
    async with standalone_courier(botapi, botapi_bot, pg_database, slow_comfy.url, tmp_path / "host",
                                  **SETTINGS, COURIER_JOB_TIMEOUT_S=str(limit_s)):
        request = botapi_bot.inject_text(USER, "/demo a lighthouse")
        status_id, back_at = await last_step_then_outage(botapi_bot, request, SHORT_OUTAGE_S)
        job = await until(lambda: job_in(db, "succeeded", "failed"), SHORT_OUTAGE_S + 60, "the job ended")
        assert job["status"] == "succeeded", dict(job)
        await done_in(botapi_bot, status_id)
    assert len(results(botapi_bot, request)) == 1
    assert results(botapi_bot, request)[0].received_at >= back_at
