"""A bot host SIGKILLed after Telegram took a job's file and before the rest of its delivery (the
preview with the caption and buttons) was answered (issue 28, item 3): the job runs again on
another host, which finds the file recorded as sent, sends it no second time and says "Done" once,
without "it may be missing". Real processes (``python <pack> run``), real PostgreSQL, the Bot API
emulator, a fake ComfyUI.
"""

import json

import asyncpg
import pytest

from comfyui_courier.tests.support.courier import replies_to, shown_text, standalone_courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(240)

USER = 52
SETTINGS = {"COURIER_ALLOWED_USERS": "*", "COURIER_PROGRESS_INTERVAL_S": "0", "COURIER_JOB_LEASE_S": "6"}


async def test_a_host_killed_between_sending_and_recording_leaves_one_file_and_one_true_done(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    db = await asyncpg.connect(pg_database)
    try:
        botapi_bot.hold("sendPhoto")  # the preview, after the file: on its way when the host dies
        async with standalone_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path / "first",
                                      **SETTINGS) as first:
            request = botapi_bot.inject_text(USER, "/demo a lighthouse")
            await botapi_bot.wait_for_call("sendDocument", timeout=60, where=replies_to(request))
            await botapi.wait_for(lambda: any(call.method == "sendPhoto" for call in botapi_bot.calls), timeout=30)
            first.kill()
            await first.wait()
        async with standalone_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path / "second",
                                      **SETTINGS):
            job = await until(lambda: db.fetchrow("SELECT status, attempts, result FROM courier_jobs "
                                                  "WHERE status IN ('succeeded', 'failed')"), 60, "the job ended")
            await botapi.wait_for(lambda: done_said(botapi_bot), timeout=30)
    finally:
        await db.close()
    assert (job["status"], job["attempts"]) == ("succeeded", 2), dict(job)  # it ran again
    files = [call for call in botapi_bot.outbox if call.method == "sendDocument" and replies_to(request)(call)]
    assert len(files) == 1
    said = [shown_text(call) or "" for call in botapi_bot.outbox]
    assert not [text for text in said if "did not confirm" in text], said
    assert len(done_said(botapi_bot)) == 1, said
    result = json.loads(job["result"])
    assert not result["unconfirmed"], result
    assert result["outputs"][0]["message_ids"][0] == files[0].result["message_id"]


def done_said(botapi_bot) -> list:
    return [call for call in botapi_bot.outbox if (shown_text(call) or "").startswith("Done in ")]
