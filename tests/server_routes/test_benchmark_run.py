"""POST /courier/benchmarks/run: queue /bench from the panel or a script, results to an admin's chat."""

from pathlib import Path

import pytest

from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.store import jobs
from comfyui_courier.tests.server_routes.helpers import TOKEN
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI

ADMIN = 77
OWNER = 4343


@pytest.fixture
async def running(courier_api, botapi, botapi_bot, pg_database, tmp_path):
    async with FakeComfyUI() as comfy:
        comfy.pause()  # the fake cannot run the Benchmark node: keep the job queued
        settings = load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN,
            "COURIER_ADMIN_USERS": str(ADMIN)})
        courier = Courier(settings, Path(tmp_path), comfy.url)
        await courier.start()
        await courier.booted()
        try:
            yield courier, await courier_api(courier=courier)
        finally:
            await courier.stop()


async def test_run_queues_a_benchmark_job_and_tells_the_admin(running, botapi, botapi_bot):
    courier, api = running
    status, reply, _ = await api.send("POST", "/courier/benchmarks/run", json={"command": "demo", "chat_id": ADMIN})
    assert (status, reply["error"]["code"]) == (502, "telegram_error")  # the admin never wrote to the bot
    assert await jobs.list_queue(courier.store.pool) == []  # ... so nothing was queued
    assert [call.method for call in botapi_bot.calls if call.params.get("chat_id") == ADMIN] == ["getChat"]
    botapi.add_user(ADMIN)
    botapi_bot.inject_text(ADMIN, "/start")
    greeting = await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith("Hi "))
    status, reply, _ = await api.send("POST", "/courier/benchmarks/run",
                                      json={"command": "demo", "repeats": 2, "chat_id": ADMIN})
    assert status == 202, reply
    job = await jobs.get_job(courier.store.pool, reply["job_id"])
    assert (job.params["kind"], job.params["repeats"], job.chat_id) == ("benchmark", 2, ADMIN)
    # the admin is told: this "Benchmark of /demo queued", or the dispatcher's status if it came first
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.result["message_id"] > greeting.result["message_id"]
                                   and ("Benchmark of /demo" in c.params["text"] or "/bench" in c.params["text"]),
                                   timeout=30)


async def test_a_lost_answer_to_the_queued_reply_leaves_the_job_queued(running, botapi, botapi_bot):
    courier, api = running
    botapi.add_user(ADMIN)
    botapi_bot.inject_text(ADMIN, "/start")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"].startswith("Hi "))
    botapi_bot.hang("sendMessage", perform=True)  # the "queued" reply reaches the chat; its answer does not come
    status, reply, _ = await api.send("POST", "/courier/benchmarks/run", json={"command": "demo", "chat_id": ADMIN})
    assert status == 202, reply
    job = await jobs.get_job(courier.store.pool, reply["job_id"])
    # not cancelled as if the chat had refused the reply (the fake has no Benchmark node: it may fail on it)
    assert job.status != "cancelled" and "status reply" not in (job.error or ""), job


@pytest.mark.parametrize("body, status, code", [
    ({"command": "demo", "chat_id": 5}, 403, "not_admin"),
    ({"command": "nosuch", "chat_id": ADMIN}, 404, "unknown_command"),
    ({"command": "demo", "chat_id": ADMIN, "repeats": 0}, 400, "bad_benchmark"),
    ({"command": "demo", "chat_id": ADMIN, "repeats": 500}, 400, "bad_benchmark"),
    ({"command": "demo", "chat_id": "77"}, 400, "bad_body"),
    ({"command": "../etc", "chat_id": ADMIN, "extra": 1}, 400, "bad_body"),
])
async def test_run_refuses_bad_requests(running, body, status, code):
    _, api = running
    got, reply, _ = await api.send("POST", "/courier/benchmarks/run", json=body)
    assert (got, reply["error"]["code"]) == (status, code)


async def test_run_needs_the_admin_token(running):
    _, api = running
    status, _, _ = await api.send("POST", "/courier/benchmarks/run", token=None,
                                  json={"command": "demo", "chat_id": ADMIN})
    assert status == 401


async def test_the_owner_made_in_postgresql_is_an_admin_here_too(running, botapi, botapi_bot):
    courier, api = running
    status, reply, _ = await api.send("POST", "/courier/benchmarks/run", json={"command": "demo", "chat_id": OWNER})
    assert (status, reply["error"]["code"]) == (403, "not_admin")
    async with courier.store.pool.acquire() as conn:  # what /start <owner code> stores
        await conn.execute("INSERT INTO courier_users (user_id, is_admin) VALUES ($1, true)", OWNER)
    botapi.add_user(OWNER)
    botapi_bot.inject_text(OWNER, "/start")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["chat_id"] == OWNER
                                   and c.params["text"].startswith("Hi "))
    status, reply, _ = await api.send("POST", "/courier/benchmarks/run", json={"command": "demo", "chat_id": OWNER})
    assert status == 202, reply


async def test_the_route_and_the_bench_command_queue_the_same_job(running, botapi, botapi_bot):
    """One use case (jobs/queueing.py) behind both: the same command and runs make the same params,
    but for the report's language (the admin's in the chat; the route's none: the settings')."""
    courier, api = running
    botapi.add_user(ADMIN)
    botapi_bot.inject_text(ADMIN, "/bench demo 2")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["chat_id"] == ADMIN, timeout=30)
    status, reply, _ = await api.send("POST", "/courier/benchmarks/run",
                                      json={"command": "demo", "repeats": 2, "chat_id": ADMIN})
    assert status == 202, reply
    async with courier.store.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, command, params FROM courier_jobs WHERE user_id = $1 ORDER BY id", ADMIN)
    assert [row["command"] for row in rows] == ["bench", "bench"] and rows[1]["id"] == reply["job_id"]
    from_chat, from_route = [await jobs.get_job(courier.store.pool, row["id"]) for row in rows]
    assert (from_chat.params.pop("language"), from_route.params.pop("language")) == ("en", None)
    assert from_chat.params == from_route.params and from_chat.params["repeats"] == 2
