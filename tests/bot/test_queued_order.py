"""The chat's queue message never says "Queued" of a job after the job showed a later state (issue 28,
item 4): a job whose backend went down as it started goes back to the queue with its own status
("The image server stopped answering…"), and the queue message's round, due a moment after the
start, must not announce it as queued under that. Real python-telegram-bot on the Bot API emulator,
real PostgreSQL, the fake ComfyUI behind a front that answers 502 (a gateway whose ComfyUI died)."""

import asyncio

import pytest
from aiohttp import web

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import replies_to, running_courier, shown_text
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import job_rows, until

USER = 2403
OUTAGE_S = 4.0
"""Longer than the moment after which the chat's queue message goes out (2 s)."""


class Outage:
    """The backend answers 502 from its first prompt on until ``end()``, health checks included."""

    def __init__(self, fake: FakeComfyUI):
        self.on = False
        self.prompts = 0
        post_prompt, system_stats = fake._post_prompt, fake._system_stats  # bound by ``start()``

        async def prompt(request: web.Request) -> web.StreamResponse:
            self.prompts += 1
            self.on = self.on or self.prompts == 1
            return web.Response(status=502, text="Bad Gateway") if self.on else await post_prompt(request)

        async def stats(request: web.Request) -> web.StreamResponse:
            return web.Response(status=502, text="Bad Gateway") if self.on else await system_stats(request)

        fake._post_prompt, fake._system_stats = prompt, stats

    def end(self) -> None:
        self.on = False


@pytest.mark.timeout(120)
async def test_no_queued_reply_comes_after_a_later_state_of_the_job(botapi, botapi_bot, pg_database, tmp_path):
    fake = FakeComfyUI(steps=5, step_delay=0.1)
    outage = Outage(fake)
    async with fake, running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                                     COURIER_ALLOWED_USERS=str(USER), COURIER_PROGRESS_INTERVAL_S="3") as courier:
        request = botapi_bot.inject_text(USER, "/demo as the backend goes down")
        retrying = i18n.text("en", "backend_retrying")
        await botapi.wait_for(lambda: [c for c in botapi_bot.outbox if shown_text(c) == retrying], timeout=60)
        await asyncio.sleep(OUTAGE_S)  # the outage's length: it waits for nothing
        outage.end()
        await botapi_bot.wait_for_call("sendDocument", timeout=90, where=replies_to(request))

        async def ended():
            rows = await job_rows(courier.store.pool)
            return rows if rows[0]["status"] not in ("queued", "running") else None

        (job,) = await until(ended, 30, "the job recorded")
        assert (job["status"], job["attempts"]) == ("succeeded", 2)
    said = [shown_text(call) for call in botapi_bot.outbox if call.method in ("sendMessage", "editMessageText")]
    queued = i18n.text("en", "queued", name="demo", position=1).split(" — ")[0]  # "Queued /demo"
    assert not [text for text in said[said.index(retrying):] if text.startswith(queued)], said
