"""Faults on the way to the chat and across processes, with real parts: python-telegram-bot against
the Bot API emulator (its fault injection), real PostgreSQL, real ComfyUI (``COMFYUI_DIR``).

- A send that failed for sure (502) is retried; a lost answer is "delivered, unconfirmed", never
  "failed"; a preview that does not go never fails a job whose file went.
- A re-run of a job (the bot died between the send and marking the job done) sends nothing twice.
- A job cancelled by another process, or whose lease another worker took, stops and sends nothing.
- A user who blocked the bot: their jobs end, without retries.
"""

from __future__ import annotations

import aiohttp
import pytest

from comfyui_courier.core import i18n
from comfyui_courier.store import commands
from comfyui_courier.tests.jobs.test_dispatcher import (
    TIMEOUT_S,
    comfy_queue,
    eventually,
    job_rows,
    running_for,
    to_chat,
)
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.graphs import cpu_bound

USER, OTHER = 401, 402


@pytest.fixture
async def courier(comfyui, botapi, botapi_bot, pg_database, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER},{OTHER}") as service:
        await commands.put_command(service.store.pool, "busy", workflow=cpu_bound(256, 2), description="quick")
        await commands.put_command(service.store.pool, "slow", workflow=cpu_bound(2048, 31),
                                   description="several seconds")
        yield service


def sent(bot, method: str, chat_id: int = USER) -> list:
    return [c for c in bot.outbox if c.method == method and int(c.params.get("chat_id", 0)) == chat_id]


def texts(bot, chat_id: int = USER) -> list[str]:
    return [c.params.get("text", "") for c in bot.outbox if int(c.params.get("chat_id", 0)) == chat_id]


async def ended(courier, user_id: int = USER):
    rows = [row for row in await job_rows(courier) if row["user_id"] == user_id]
    return rows if rows and all(row["finished_at"] is not None for row in rows) else None


async def off_comfyui(url: str) -> bool:
    running, pending = await comfy_queue(url)
    return not running and not pending


async def test_one_502_on_send_document_is_retried_and_delivered_once(courier, botapi_bot):
    botapi_bot.fail("sendDocument", status=502)
    botapi_bot.inject_text(USER, "/busy a fox")
    await to_chat(USER, "editMessageText", botapi_bot, "Done")
    assert [row["status"] for row in await job_rows(courier)] == ["succeeded"]
    assert len(sent(botapi_bot, "sendDocument")) == 1
    assert len([c for c in botapi_bot.calls if c.method == "sendDocument"]) == 2  # the 502, then the retry


async def test_a_preview_that_never_goes_does_not_fail_the_delivered_file(courier, botapi_bot):
    botapi_bot.fail("sendPhoto", status=502, times=10)
    botapi_bot.inject_text(USER, "/busy a fox")
    await to_chat(USER, "editMessageText", botapi_bot, "Done")
    assert [row["status"] for row in await job_rows(courier)] == ["succeeded"]
    assert len(sent(botapi_bot, "sendDocument")) == 1 and not sent(botapi_bot, "sendPhoto")
    assert not any("failed" in text for text in texts(botapi_bot))


async def test_a_lost_answer_is_delivered_unconfirmed_never_failed_nor_sent_twice(courier, botapi_bot):
    botapi_bot.hang("sendDocument", perform=True)  # Telegram sends it; the answer never comes
    botapi_bot.inject_text(USER, "/busy a fox")
    unconfirmed = i18n.ntext("en", "done_unconfirmed", 1, seconds=0).split(". ", 1)[1]
    assert unconfirmed.startswith("1 file went out, but Telegram did not confirm it arrived, so it may be missing")
    await to_chat(USER, "editMessageText", botapi_bot, unconfirmed)
    [row] = await job_rows(courier)
    assert row["status"] == "succeeded"
    assert len([c for c in botapi_bot.calls if c.method == "sendDocument"]) == 1  # never retried
    assert not any("failed" in text for text in texts(botapi_bot))
    async with courier.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT status FROM courier_deliveries WHERE job_id = $1", row["id"]) == "sending"


async def test_a_job_run_again_after_its_send_sends_nothing_twice(courier, botapi_bot):
    """As when the bot died between sending the file and marking the job done: the lease ran
    out and the job is queued again; its output has a 'sent' row."""
    botapi_bot.inject_text(USER, "/busy a fox")
    await to_chat(USER, "editMessageText", botapi_bot, "Done")
    [row] = await job_rows(courier)
    async with courier.store.pool.acquire() as conn:
        await conn.execute("UPDATE courier_jobs SET status = 'queued', finished_at = NULL, worker = NULL, "
                           "result = NULL WHERE id = $1", row["id"])
        await conn.execute("NOTIFY courier_jobs, 'requeued'")
    await eventually(lambda: ended(courier), "the job run again")
    assert [row["status"] for row in await job_rows(courier)] == ["succeeded"]
    assert len(sent(botapi_bot, "sendDocument")) == 1
    async with courier.store.pool.acquire() as conn:
        result = await conn.fetchval("SELECT result FROM courier_jobs WHERE id = $1", row["id"])
    assert len(result["outputs"]) == 1  # the earlier send's record, for chaining


async def test_a_job_cancelled_by_another_process_stops_and_sends_nothing(courier, comfyui, botapi_bot):
    botapi_bot.inject_text(USER, "/slow a fox")
    await eventually(lambda: running_for(comfyui.url, USER), "the job running in ComfyUI")
    [row] = await job_rows(courier)
    async with courier.store.pool.acquire() as conn:  # what /cancel in another Courier process does
        await conn.execute("UPDATE courier_jobs SET status = 'cancelled', finished_at = now(), lease_until = NULL "
                           "WHERE id = $1", row["id"])
    await eventually(lambda: off_comfyui(comfyui.url), "the prompt stopped on ComfyUI (after its running node)",
                     timeout=60)
    await to_chat(USER, "editMessageText", botapi_bot, i18n.text("en", "job_cancelled", name="slow"))
    assert not sent(botapi_bot, "sendDocument")
    assert [row["status"] for row in await job_rows(courier)] == ["cancelled"]


async def test_a_job_whose_lease_another_worker_holds_stops_quietly(courier, comfyui, botapi_bot):
    botapi_bot.inject_text(USER, "/slow a fox")
    await eventually(lambda: running_for(comfyui.url, USER), "the job running in ComfyUI")
    (_, prompt_id), = (await comfy_queue(comfyui.url))[0]
    [row] = await job_rows(courier)
    async with courier.store.pool.acquire() as conn:  # our lease ran out; another worker claimed it
        await conn.execute("UPDATE courier_jobs SET worker = 'elsewhere' WHERE id = $1", row["id"])
    await eventually(lambda: off_comfyui(comfyui.url), "the prompt stopped on ComfyUI (after its running node)",
                     timeout=60)
    async with aiohttp.ClientSession() as session, session.get(f"{comfyui.url}/history/{prompt_id}") as reply:
        history = await reply.json()
    assert history[prompt_id]["status"]["status_str"] != "success"  # interrupted, not run to its end
    assert not sent(botapi_bot, "sendDocument")
    async with courier.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT worker FROM courier_jobs WHERE id = $1", row["id"]) == "elsewhere"


async def test_a_user_who_blocked_the_bot_has_their_jobs_ended_without_retries(courier, comfyui, botapi_bot):
    botapi_bot.inject_text(USER, "/slow a fox")
    await to_chat(USER, "sendMessage", botapi_bot, "/slow")
    botapi_bot.inject_text(USER, "/busy the next one")
    await botapi_bot.emulator.wait_for(lambda: [  # the chat's queue message names it: posted, or edited
        c for c in botapi_bot.outbox if c.method in ("sendMessage", "editMessageText")
        and "/busy" in c.params.get("text", "")], timeout=60)
    botapi_bot.block(USER)
    await eventually(lambda: ended(courier), "the jobs ended")
    first, second = await job_rows(courier)
    assert first["status"] == "failed" and second["status"] in ("failed", "cancelled")  # the next one ran out too
    async with courier.store.pool.acquire() as conn:
        ends = await conn.fetch("SELECT attempts, error FROM courier_jobs ORDER BY id")
    assert [end["attempts"] for end in ends] == [1, 1]  # neither was queued again
    assert ends[0]["error"] == "the user blocked the bot"  # no incident: nothing went wrong on our side
    documents = [c for c in botapi_bot.calls if c.method == "sendDocument"]
    assert 1 <= len(documents) <= 2  # one try per job at most: no retry of a 403


async def test_the_backend_retrying_notice_is_never_dropped_by_the_progress_throttle(botapi, botapi_bot, pg_database,
                                                                                    fake_comfy, tmp_path):
    fake_comfy.refuse_websockets = True  # up for the health check, lost for the job
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER), COURIER_PROGRESS_INTERVAL_S="600"):
        botapi_bot.inject_text(USER, "/demo a fox")
        retrying = i18n.text("en", "backend_retrying")
        # its status: "Rendering" edited, or posted with the notice if the job failed within a moment
        await botapi_bot.emulator.wait_for(lambda: any(
            c.method in ("sendMessage", "editMessageText") and retrying in c.params.get("text", "")
            for c in botapi_bot.outbox), TIMEOUT_S)


async def test_failed_status_edits_leave_the_final_text_beside_the_file(courier, botapi_bot):
    botapi_bot.fail("editMessageText", status=502, times=3)  # "Rendering", then the first tries of "Done"
    botapi_bot.inject_text(USER, "/busy a fox")
    await to_chat(USER, "editMessageText", botapi_bot, "Done")  # taken by Telegram, on a retry
    assert [row["status"] for row in await job_rows(courier)] == ["succeeded"]
    assert len(sent(botapi_bot, "sendDocument")) == 1
    assert any(m.get("text", "").startswith("Done") for m in botapi_bot.history(USER))
