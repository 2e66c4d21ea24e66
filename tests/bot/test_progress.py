"""Status messages (bot/progress.py): they give way to results in the rate limiter, on PTB's real
AIORateLimiter; a job's status is its chat's queue message when that is on its way as the job starts."""

import asyncio

import pytest

from comfyui_courier.bot.limiter import STATUS, STATUS_SLOTS, ResultsFirstLimiter
from comfyui_courier.bot.windows import Limit, Limits
from comfyui_courier.store import backends
from comfyui_courier.tests.support.courier import running_courier


@pytest.mark.timeout(60)
async def test_a_result_overtakes_a_backlog_of_status_messages():
    limiter = ResultsFirstLimiter(limits=Limits(overall=Limit(2, 1.0)), max_retries=0)
    await limiter.initialize()
    order = []

    def request(name: str, rate_limit_args):
        async def callback():
            order.append(name)
            return True
        return limiter.process_request(callback, (), {}, "sendMessage", {"chat_id": 1}, rate_limit_args)

    backlog = [asyncio.create_task(request(f"status {i}", STATUS)) for i in range(12)]
    await asyncio.sleep(0)  # one turn of the loop: the backlog reaches the limiter first
    await request("result", None)
    for task in backlog:
        task.cancel()
    await asyncio.gather(*backlog, return_exceptions=True)
    await limiter.shutdown()
    assert order[-1] == "result" and 2 <= len(order) - 1 <= 2 + STATUS_SLOTS, order


@pytest.mark.timeout(120)
async def test_a_job_started_while_its_queue_message_is_on_its_way_edits_that_message(botapi, botapi_bot, pg_database,
                                                                                     fake_comfy, tmp_path):
    """The dispatcher starts the job before Telegram answered its chat's queue message: the job's
    status is that message, edited, not a second message posted and one of the two deleted."""
    user = 616
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(user)) as courier:
        pool = courier.store.pool
        (backend,) = await backends.list_backends(pool)
        await backends.set_backend(pool, backend.id, draining=True)  # the job waits: its chat's queue message goes
        queue_message = botapi_bot.hold("sendMessage")
        request = botapi_bot.inject_text(user, "/demo a fox")
        await botapi.wait_for(lambda: any(c.method == "sendMessage" for c in botapi_bot.calls), timeout=30)
        await backends.set_backend(pool, backend.id, draining=False)
        await botapi.wait_for(lambda: fake_comfy.prompts, timeout=30)  # the job runs, its first status due
        queue_message.set()
        done = await botapi_bot.wait_for_call("editMessageText", timeout=60,
                                              where=lambda c: c.params["text"].startswith("Done"))
    posts = [c for c in botapi_bot.outbox if c.method == "sendMessage"]
    assert [c.params["text"].split()[0] for c in posts] == ["Queued"]
    assert "deleteMessage" not in [c.method for c in botapi_bot.outbox]
    status = posts[0].result["message_id"]
    assert posts[0].result["reply_to_message"]["message_id"] == request["message_id"]
    edits = [c.params["text"].split()[0] for c in botapi_bot.outbox
             if c.method == "editMessageText" and c.params["message_id"] == status]
    assert edits[0] == "Rendering" and done.params["message_id"] == status
