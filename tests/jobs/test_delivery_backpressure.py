"""When Telegram is slower than the backends, jobs wait in the queue, not as finished results: the
dispatcher holds at most its backends' slots plus ``DELIVERING_AT_ONCE`` jobs, so a result never
queues behind a backlog of other results at the Bot API (the real bot on the emulator, real
PostgreSQL, the transcript-faithful fake ComfyUI with jobs that take no time).
"""

import asyncio

import pytest

from comfyui_courier.jobs import dispatcher
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.polling import job_rows, until

USERS = list(range(501, 515))  # a job each: the per-user cap is not what holds them back
DEPTH, DELIVERING = 2, 3


def documents_on_their_way(bot) -> int:
    return sum(1 for call in bot.calls if call.method == "sendDocument" and call.status is None)


@pytest.mark.timeout(120)
async def test_with_results_stuck_on_their_way_no_more_jobs_are_claimed_than_slots_and_deliveries(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path, monkeypatch):
    monkeypatch.setattr(dispatcher, "DELIVERING_AT_ONCE", DELIVERING)
    slow_telegram = botapi_bot.hold("sendDocument", times=len(USERS))
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_PIPELINE_DEPTH=str(DEPTH),
                               COURIER_ALLOWED_USERS=",".join(map(str, USERS))) as courier:
        peak = 0

        def watch() -> bool:  # evaluated at every request's start and end, never true: it only records
            nonlocal peak
            peak = max(peak, documents_on_their_way(botapi_bot))
            return False

        watcher = asyncio.create_task(botapi.wait_for(watch, timeout=None))
        try:
            for user in USERS:
                botapi_bot.inject_text(user, f"/demo {user}")
            await botapi.wait_for(lambda: documents_on_their_way(botapi_bot) >= DEPTH + DELIVERING, timeout=60)

            async def rest_queued() -> bool:
                statuses = [row["status"] for row in await job_rows(courier.store.pool)]
                return len(statuses) == len(USERS) and statuses.count("queued") == len(USERS) - DEPTH - DELIVERING

            await until(rest_queued, 30, "the jobs past the slots and deliveries left in the queue")
            slow_telegram.set()

            async def all_done() -> bool:
                return all(row["status"] == "succeeded" for row in await job_rows(courier.store.pool))

            await until(all_done, 60, "every job delivered")
        finally:
            watcher.cancel()
    assert peak == DEPTH + DELIVERING  # reached, and never passed: the 14 jobs take no time at the backend
    assert sum(call.method == "sendDocument" and call.ok for call in botapi_bot.calls) == len(USERS)
