"""Two real ComfyUI backends behind one bot (Bot API emulator, real PostgreSQL): a backend killed
under a job hands it to the other, and a job naming a model goes only to the backend that has it.
"""

import asyncio
import signal

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.jobs import backends as backend_health
from comfyui_courier.store import backends, commands
from comfyui_courier.tests.support.courier import replies_to, running_courier
from comfyui_courier.tests.support.graphs import cpu_bound
from comfyui_courier.tests.support.polling import job_rows, until

USER, OTHER = 111, 222
MODEL = "courier-test-tiny.safetensors"  # an empty file: listed by /object_info, never loaded here


@pytest.fixture(autouse=True)
def quick_checks(monkeypatch):
    monkeypatch.setattr(backend_health, "INTERVAL_S", 0.5)


@pytest.fixture
async def two_comfyuis(comfyui_factory, pg_database):
    """Two ComfyUIs with the pack (on the test's database, no bot of their own); the first has MODEL."""
    servers = [comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database}) for _ in range(2)]
    checkpoints = servers[0].base_directory / "models" / "checkpoints"
    checkpoints.mkdir(parents=True)
    (checkpoints / MODEL).write_bytes(b"")
    await asyncio.gather(*(asyncio.to_thread(server.start) for server in servers))
    return servers


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, two_comfyuis, tmp_path):
    first, second = two_comfyuis
    async with running_courier(botapi, botapi_bot, pg_database, first.url, tmp_path,
                               COURIER_BACKENDS=f"{first.url},{second.url}",
                               COURIER_ALLOWED_USERS=f"{USER},{OTHER}") as service:
        yield service


async def running_on(courier, url: str, command_user: int):
    return next((job for job in await job_rows(courier.store.pool)
                 if job["status"] == "running" and job["backend"] == url and job["user_id"] == command_user), None)


@pytest.mark.timeout(240)
async def test_a_backend_killed_under_a_job_hands_it_to_the_other(courier, two_comfyuis, botapi_bot):
    first, second = two_comfyuis
    pool = courier.store.pool
    await commands.put_command(pool, "slow", workflow=cpu_bound(1536, 31))
    rows = {row.url: row for row in await backends.list_backends(pool)}
    await backends.set_backend(pool, rows[second.url].id, draining=True)  # so the job starts on the first
    request = botapi_bot.inject_text(USER, "/slow a lighthouse")
    await until(lambda: running_on(courier, first.url, USER), 60, "the job running on the first backend")
    await until(lambda: asyncio.to_thread(lambda: first.get_json("/queue")["queue_running"]), 30,
                "the prompt executing on the first backend")
    await backends.set_backend(pool, rows[second.url].id, draining=False)
    await asyncio.to_thread(first.stop, signal.SIGKILL)

    await botapi_bot.wait_for_call("sendDocument", timeout=120, where=replies_to(request))
    (job,) = await until(lambda: _ended(pool), 10, "the job recorded")
    assert (job["status"], job["backend"], job["attempts"]) == ("succeeded", second.url, 2)
    (dead,) = await backends.list_backends(pool, [first.url])
    assert not dead.healthy and "not reachable" in dead.last_error
    results = [c for c in botapi_bot.outbox if c.method == "sendDocument" and replies_to(request)(c)]
    assert len(results) == 1
    said = [c.params.get("text") for c in botapi_bot.outbox if c.method == "editMessageText"]
    assert i18n.text("en", "backend_retrying") in said


@pytest.mark.timeout(240)
async def test_a_job_naming_a_model_waits_for_the_backend_that_has_it(courier, two_comfyuis, botapi_bot):
    first, second = two_comfyuis
    pool = courier.store.pool
    await until(lambda: _models(pool, first.url), 20, "the first backend's model list")
    assert MODEL in await _models(pool, first.url) and MODEL not in (await backends.list_backends(
        pool, [second.url]))[0].models
    loader = {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": MODEL}}  # not wired: never runs
    await commands.put_command(pool, "slow", workflow=cpu_bound(1024, 31))
    await commands.put_command(pool, "withmodel", workflow={**cpu_bound(256, 1), "9": loader})
    rows = {row.url: row for row in await backends.list_backends(pool)}
    await backends.set_backend(pool, rows[second.url].id, draining=True)  # so the slow job holds the first
    busy = botapi_bot.inject_text(USER, "/slow a lighthouse")
    await until(lambda: running_on(courier, first.url, USER), 60, "the slow job running on the first backend")
    await backends.set_backend(pool, rows[second.url].id, draining=False)  # idle, but without the model
    needs_model = botapi_bot.inject_text(OTHER, "/withmodel a lighthouse")
    model_result = await botapi_bot.wait_for_call("sendDocument", timeout=120, where=replies_to(needs_model))
    slow_result = await botapi_bot.wait_for_call("sendDocument", timeout=10, where=replies_to(busy))
    assert botapi_bot.outbox.index(slow_result) < botapi_bot.outbox.index(model_result)  # it waited
    slow_job, model_job = await until(lambda: _ended(pool), 10, "both jobs recorded")
    assert [(job["backend"], job["status"], job["attempts"]) for job in (slow_job, model_job)] == [
        (first.url, "succeeded", 1), (first.url, "succeeded", 1)]


async def _models(pool, url):
    return (await backends.list_backends(pool, [url]))[0].models


async def _ended(pool):
    rows = await job_rows(pool)
    return rows if rows and all(job["status"] in ("succeeded", "failed", "cancelled") for job in rows) else None
