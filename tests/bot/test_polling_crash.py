"""The bot process killed after Telegram was told an update arrived (the next getUpdates' offset)
and before the update's job was committed: the restarted process queues it, once. Real
processes (``python <pack> run``), real PostgreSQL, the Bot API emulator, a fake ComfyUI."""

import asyncpg
import pytest

from comfyui_courier.tests.support.courier import replies_to, standalone_courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(180)

USER = 41


async def waiting_on_the_lock(conn) -> bool:
    return await conn.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted "
                               "AND relation = 'courier_updates'::regclass") > 0


async def test_a_bot_killed_between_fetch_and_commit_queues_the_command_once_after_restart(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    blocker = await asyncpg.connect(pg_database)
    try:
        async with standalone_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path / "first",
                                      COURIER_ALLOWED_USERS="*") as first:
            # The job's commit (courier_submit writes courier_updates) waits on our lock: the process
            # has fetched the update and is handling it when it dies.
            lock = blocker.transaction()
            await lock.start()
            await blocker.execute("LOCK TABLE courier_updates IN EXCLUSIVE MODE")
            request = botapi_bot.inject_text(USER, "/demo survives a crash")
            update = botapi_bot.updates[-1]
            await until(lambda: waiting_on_the_lock(blocker), 60, "the job's commit waiting on the lock")
            await botapi.wait_for(lambda: update not in botapi_bot.updates, timeout=30)  # confirmed to Telegram
            first.kill()
            await first.wait()
            # Its connections die with it (the server would notice at its next write).
            await blocker.execute("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE NOT granted "
                                  "AND relation = 'courier_updates'::regclass")
            await lock.rollback()
        assert await blocker.fetchval("SELECT count(*) FROM courier_jobs") == 0
        async with standalone_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path / "second",
                                      COURIER_ALLOWED_USERS="*"):
            await botapi_bot.wait_for_call("sendDocument", timeout=60, where=replies_to(request))
            jobs = await until(lambda: blocker.fetch("SELECT status, params->>'prompt' AS prompt FROM courier_jobs "
                                                     "WHERE status = 'succeeded'"), 30, "the job succeeded")
    finally:
        await blocker.close()
    assert [job["prompt"] for job in jobs] == ["survives a crash"]
    assert len([call for call in botapi_bot.outbox if call.method == "sendDocument" and replies_to(request)(call)]) == 1
