"""A real ComfyUI killed under a job and restarted on the same port (the only backend), behind the
bot on the Bot API emulator and real PostgreSQL: the job runs again, is delivered once, and the
user is told that it will retry.
"""

import asyncio
import signal

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.jobs import backends as backend_health
from comfyui_courier.store import commands
from comfyui_courier.tests.support.courier import replies_to, running_courier
from comfyui_courier.tests.support.graphs import cpu_bound
from comfyui_courier.tests.support.polling import job_rows, until

USER = 111


@pytest.fixture(autouse=True)
def quick_checks(monkeypatch):
    monkeypatch.setattr(backend_health, "INTERVAL_S", 0.5)


async def _ended(pool):
    rows = await job_rows(pool)
    return rows if rows and all(row["status"] not in ("queued", "running") for row in rows) else None


@pytest.mark.timeout(300)
async def test_comfyui_killed_mid_job_and_restarted_runs_it_again_delivered_once(comfyui_factory, pg_database,
                                                                                  botapi, botapi_bot, tmp_path):
    env = {"COURIER_DATABASE_URL": pg_database}
    server = comfyui_factory(start=False, env=env)
    await asyncio.to_thread(server.start)
    async with running_courier(botapi, botapi_bot, pg_database, server.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as courier:
        pool = courier.store.pool
        await commands.put_command(pool, "slow", workflow=cpu_bound(1024, 24))
        request = botapi_bot.inject_text(USER, "/slow a lighthouse")
        await until(lambda: asyncio.to_thread(lambda: server.get_json("/queue")["queue_running"]), 60,
                    "the prompt executing")
        await asyncio.to_thread(server.stop, signal.SIGKILL)
        again = comfyui_factory(start=False, env=env, base_directory=server.base_directory, port=server.port)
        await asyncio.to_thread(again.start)  # the same port, an empty queue and history

        await botapi_bot.wait_for_call("sendDocument", timeout=120, where=replies_to(request))
        (job,) = await until(lambda: _ended(pool), 20, "the job recorded")
        assert (job["status"], job["attempts"]) == ("succeeded", 2)
        assert len([c for c in botapi_bot.outbox if c.method == "sendDocument" and replies_to(request)(c)]) == 1
        said = [c.params.get("text") for c in botapi_bot.outbox if c.method == "editMessageText"]
        told = said.index(i18n.text("en", "backend_retrying"))
        # once the job runs again it says which attempt this is; the first run's text never comes back
        assert said[told + 1] == i18n.text("en", "running_again", name="slow", attempt=2, attempts=3), said
        assert i18n.text("en", "running", name="slow") not in said[told:], said
