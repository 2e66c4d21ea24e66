"""/cancel taken by one Courier process (the bot) stops the job another, real process runs
(``python <pack> run`` with ``COURIER_RECEIVE_UPDATES=0``) on the same PostgreSQL: its lease
keeper sees the job is no longer its own, takes the prompt off the backend, and sends nothing.
Real python-telegram-bot on the Bot API emulator, a fake ComfyUI held paused."""

import aiohttp
import pytest

from comfyui_courier.runtime import Courier
from comfyui_courier.store import jobs
from comfyui_courier.tests.bot.test_update_inbox import settings, started
from comfyui_courier.tests.support.courier import standalone_courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(120)

USER = 611
STOPPED_S = 10  # the lease keeper looks every 2 s


async def pending_prompts(url: str) -> list:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/queue") as reply:
        state = await reply.json()
    return state["queue_running"] + state["queue_pending"]


async def test_a_cancel_taken_by_the_bot_stops_the_job_another_process_runs(botapi, botapi_bot, pg_database,
                                                                             fake_comfy, tmp_path):
    fake_comfy.pause()  # the prompt waits in the backend's queue: the job stays running
    bot_only = Courier(settings(botapi, botapi_bot, pg_database), tmp_path / "bot", None)  # runs no jobs
    async with started(bot_only) as bot, \
            standalone_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path / "worker",
                               COURIER_RECEIVE_UPDATES="0") as worker:
        pool = bot.store.pool
        botapi_bot.inject_text(USER, "/demo stopped elsewhere")

        async def running_on_the_worker():
            job = next(iter(await jobs.list_queue(pool)), None)
            return job if job is not None and job.status == "running" and f":{worker.pid}:" in (job.worker or "") \
                else None

        job = await until(running_on_the_worker, 60, "the job running in the other process")
        await until(lambda: pending_prompts(fake_comfy.url), 30, "the prompt at the backend")
        botapi_bot.inject_text(USER, "/cancel")
        await until(lambda: _none_left(fake_comfy.url), STOPPED_S, "the prompt taken off the backend")
        fake_comfy.resume()
        assert (await jobs.get_job(pool, job.id)).status == "cancelled"
        await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith("Cancelled"),
                                       timeout=30)
    assert worker.returncode == 0, worker.output()
    assert not [c for c in botapi_bot.calls if c.method == "sendDocument"]  # its result never went
    assert not fake_comfy.prompts[1:], "the job ran again"


async def _none_left(url: str) -> bool:
    return not await pending_prompts(url)
