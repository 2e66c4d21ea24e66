"""A job run again after its backend restarted says which attempt it is (issue 28, item 4): the line
is shown at once, not replaced by the progress that follows within the moment a first status waits.
Real python-telegram-bot on the Bot API emulator, real PostgreSQL, the fake ComfyUI restarted under
the job (queue and history forgotten, as a real restart does) with a step every 0.1 s."""

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.jobs import backends as backend_health
from comfyui_courier.tests.support.courier import replies_to, running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import job_rows, until

USER = 2402


@pytest.fixture(autouse=True)
def quick_checks(monkeypatch):
    monkeypatch.setattr(backend_health, "INTERVAL_S", 0.5)


@pytest.mark.timeout(120)
async def test_a_rerun_says_its_attempt_though_its_progress_follows_at_once(botapi, botapi_bot, pg_database,
                                                                            tmp_path):
    async with FakeComfyUI(steps=30, step_delay=0.1) as fake, running_courier(
            botapi, botapi_bot, pg_database, fake.url, tmp_path, COURIER_ALLOWED_USERS=str(USER),
            COURIER_PROGRESS_INTERVAL_S="1") as courier:  # a first status waits a moment (1 s)
        request = botapi_bot.inject_text(USER, "/demo twice")
        await botapi.wait_for(lambda: [c for c in botapi_bot.outbox if "step" in (c.params.get("text") or "")],
                              timeout=60)
        await fake.restart()
        await botapi_bot.wait_for_call("sendDocument", timeout=90, where=replies_to(request))

        async def ended():
            rows = await job_rows(courier.store.pool)
            return rows if rows[0]["status"] != "running" else None

        (job,) = await until(ended, 30, "the job recorded")
        assert (job["status"], job["attempts"]) == ("succeeded", 2)
    said = [c.params.get("text") for c in botapi_bot.outbox if c.method in ("editMessageText", "sendMessage")]
    told = said.index(i18n.text("en", "backend_retrying"))
    assert said[told + 1] == i18n.text("en", "running_again", name="demo", attempt=2, attempts=3), said
