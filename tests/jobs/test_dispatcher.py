"""Pipelining on a real ComfyUI: the dispatcher keeps the next job's prompt in ComfyUI's queue
while the current one runs, and while a finished one is still delivering; /cancel deletes a
pipelined prompt; the per-user round robin holds; a /bench session has its backend alone.

Real python-telegram-bot against the Bot API emulator, real PostgreSQL, real ComfyUI
(``COMFYUI_DIR``), a CPU-bound weight-free command long enough (about a second a run, more
on a loaded machine) that what ComfyUI holds can be read from ``GET /queue`` as it happens.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from comfyui_courier.store import commands
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.graphs import cpu_bound

FIRST, SECOND, THIRD = 301, 302, 303
FLOODER, OTHERS = 310, (311, 312, 313)
ADMIN = 320
TIMEOUT_S = 120.0


@pytest.fixture
async def courier(comfyui, botapi, botapi_bot, pg_database, tmp_path, request):
    env = {"COURIER_ALLOWED_USERS": ",".join(map(str, (FIRST, SECOND, THIRD, FLOODER, *OTHERS, ADMIN))),
           "COURIER_ADMIN_USERS": str(ADMIN), "COURIER_PIPELINE_DEPTH": "2", **getattr(request, "param", {})}
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path, **env) as service:
        await commands.put_command(service.store.pool, "busy", workflow=cpu_bound(1024, 8),
                                   description="CPU-bound test graph")
        await commands.put_command(service.store.pool, "slow", workflow=cpu_bound(2048, 24),
                                   description="CPU-bound test graph, several seconds: long enough under load "
                                               "for the next job to queue behind it")
        yield service


async def comfy_queue(url: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(user id, prompt id) of the running and the pending prompts, from ComfyUI's ``GET /queue``."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/queue") as reply:
        state = await reply.json()

    def users(items):
        return [(int(item[2]["1"]["inputs"]["user_id"] or 0), item[1]) for item in items]

    return users(state["queue_running"]), users(state["queue_pending"])


async def eventually(probe, what: str, timeout: float = TIMEOUT_S):
    """``await probe()`` until it is truthy (every 20 ms); its value."""
    deadline = time.monotonic() + timeout
    while not (value := await probe()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:.0f} s: {what}")
        await asyncio.sleep(0.02)
    return value


def to_chat(chat_id: int, method: str, bot, text: str | None = None):
    return bot.wait_for_call(method, timeout=TIMEOUT_S, where=lambda c: int(c.params.get("chat_id", 0)) == chat_id
                             and (text is None or text in c.params.get("text", "")))


async def job_rows(courier):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch("SELECT id, user_id, status, started_at, finished_at FROM courier_jobs ORDER BY id")


async def pipelined(url: str) -> tuple[int, str, int, str] | None:
    """(running user, prompt, pending user, prompt) while ComfyUI holds one of ours running, one waiting."""
    running, pending = await comfy_queue(url)
    if len(running) == 1 and len(pending) == 1:
        return (*running[0], *pending[0])
    return None


async def running_for(url: str, user_id: int) -> bool:
    running, _ = await comfy_queue(url)
    return any(user == user_id for user, _ in running)


async def test_two_jobs_of_one_backend_are_both_in_comfyuis_queue(courier, comfyui, botapi_bot):
    botapi_bot.inject_text(FIRST, "/busy one")
    botapi_bot.inject_text(SECOND, "/busy two")
    first, _, second, _ = await eventually(lambda: pipelined(comfyui.url), "one prompt running, the next queued")
    assert {first, second} == {FIRST, SECOND}
    for user in (FIRST, SECOND):
        await to_chat(user, "sendDocument", botapi_bot)
        await to_chat(user, "editMessageText", botapi_bot, "Done")
    assert [row["status"] for row in await job_rows(courier)] == ["succeeded", "succeeded"]


async def test_a_job_talking_to_the_chat_leaves_its_slot_to_the_next(courier, comfyui, botapi_bot):
    """The slot is the prompt's, not the delivery's: with two results stuck on their way to
    Telegram, a third job still runs."""
    botapi_bot.hang("sendDocument", times=2)
    for user in (FIRST, SECOND):
        botapi_bot.inject_text(user, "/busy stuck on the way out")
    await eventually(lambda: pipelined(comfyui.url), "the first two jobs on the backend")
    botapi_bot.inject_text(THIRD, "/busy next")
    await to_chat(THIRD, "editMessageText", botapi_bot, "Done")
    rows = {row["user_id"]: row for row in await job_rows(courier)}
    assert rows[THIRD]["status"] == "succeeded"
    for stuck in (FIRST, SECOND):  # the third started while both were still sending (a hung send ends later)
        assert rows[stuck]["finished_at"] is None or rows[stuck]["finished_at"] > rows[THIRD]["started_at"]


async def test_cancel_of_a_pipelined_prompt_deletes_it_from_comfyuis_queue(courier, comfyui, botapi_bot):
    botapi_bot.inject_text(FIRST, "/slow keeps running")  # while the second one is cancelled
    await eventually(lambda: running_for(comfyui.url, FIRST), "the first job running")
    botapi_bot.inject_text(SECOND, "/busy to be cancelled")
    runner, _, waiter, waiting = await eventually(lambda: pipelined(comfyui.url), "the second job queued behind")
    assert (runner, waiter) == (FIRST, SECOND)

    botapi_bot.inject_text(SECOND, "/cancel")
    await to_chat(SECOND, "sendMessage", botapi_bot, "Cancelled 1 job.")
    running, pending = await comfy_queue(comfyui.url)
    assert waiting not in {prompt for _, prompt in running + pending}
    await to_chat(SECOND, "editMessageText", botapi_bot, "/busy was cancelled.")

    await to_chat(FIRST, "sendDocument", botapi_bot)
    await to_chat(FIRST, "editMessageText", botapi_bot, "Done")
    async with aiohttp.ClientSession() as session, session.get(f"{comfyui.url}/history/{waiting}") as reply:
        assert await reply.json() == {}  # it never ran
    assert [(row["user_id"], row["status"]) for row in await job_rows(courier)] == [
        (FIRST, "succeeded"), (SECOND, "cancelled")]
    assert not any(c.method == "sendDocument" and int(c.params["chat_id"]) == SECOND for c in botapi_bot.outbox)


@pytest.mark.parametrize("courier", [{"COURIER_MAX_JOBS_PER_USER": "6"}], indirect=True)
async def test_the_round_robin_holds_with_pipelining(courier, comfyui, botapi_bot):
    """A flooder's jobs already on the backend finish first; then each other user's job comes
    before the flooder's next."""
    for index in range(6):
        botapi_bot.inject_text(FLOODER, f"/busy flood {index}")
    await eventually(lambda: pipelined(comfyui.url), "the flooder's first two jobs on the backend")
    for user in OTHERS:
        botapi_bot.inject_text(user, f"/busy from {user}")
    for user in OTHERS:
        await to_chat(user, "editMessageText", botapi_bot, "Done")
    rows = await job_rows(courier)
    last_other = max(row["finished_at"] for row in rows if row["user_id"] in OTHERS)
    before = [row for row in rows if row["user_id"] == FLOODER and row["finished_at"] is not None
              and row["finished_at"] < last_other]
    assert len(before) <= courier.settings.pipeline_depth, before

    botapi_bot.inject_text(FLOODER, "/cancel")
    await to_chat(FLOODER, "sendMessage", botapi_bot, "Cancelled")


async def test_a_bench_session_has_its_backend_alone(courier, comfyui, botapi_bot):
    """The session waits for the job before it and the job after it waits for the session:
    ComfyUI never holds a prompt of the session beside another job's."""
    botapi_bot.inject_text(FIRST, "/busy before")
    await eventually(lambda: running_for(comfyui.url, FIRST), "the first job running")
    botapi_bot.inject_text(ADMIN, "/bench busy 1")
    await eventually(lambda: admin_claimed(courier), "the session claimed")
    botapi_bot.inject_text(SECOND, "/busy after")
    mixed = []

    async def watch() -> None:
        while True:
            running, pending = await comfy_queue(comfyui.url)
            users = {user for user, _ in running + pending}
            if ADMIN in users and users - {ADMIN}:
                mixed.append((running, pending))
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    try:
        await to_chat(ADMIN, "sendMessage", botapi_bot, "Benchmark: busy")
        await to_chat(SECOND, "editMessageText", botapi_bot, "Done")
    finally:
        watcher.cancel()
    assert not mixed, mixed
    assert [(row["user_id"], row["status"]) for row in await job_rows(courier)] == [
        (FIRST, "succeeded"), (ADMIN, "succeeded"), (SECOND, "succeeded")]


async def admin_claimed(courier) -> bool:
    return any(row["user_id"] == ADMIN and row["status"] == "running" for row in await job_rows(courier))
