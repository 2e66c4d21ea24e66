"""The ``/bench`` use case (jobs/queueing.py) on real PostgreSQL: what the bot's ``/bench`` and
``POST /courier/benchmarks/run`` both get, as values, with no chat and no HTTP."""

import json

from comfyui_courier.core.config import Settings
from comfyui_courier.jobs import bench
from comfyui_courier.jobs.queueing import (
    BackendOff,
    BadBenchmark,
    Benchmark,
    BenchRequest,
    NotAdmin,
    UnknownBackend,
    UnknownCommand,
    plan_benchmark,
    queue_benchmark,
)
from comfyui_courier.jobs.seed import SEED_DIR
from comfyui_courier.jobs.submit import Queued
from comfyui_courier.store import backends, commands, jobs

ADMIN, OWNER, STRANGER = 77, 4343, 5
DEMO = json.loads((SEED_DIR / "demo.json").read_text())
SETTINGS = Settings(admin_users=[ADMIN])


async def test_a_benchmark_is_planned_for_an_admin_with_the_params_the_runner_takes(store):
    await commands.put_command(store.pool, "demo", workflow=DEMO)
    async with store.pool.acquire() as conn:  # the owner made with the console's code
        await conn.execute("INSERT INTO courier_users (user_id, is_admin) VALUES ($1, true)", OWNER)
    for admin in (ADMIN, OWNER):
        planned = await plan_benchmark(store.pool, SETTINGS, BenchRequest("demo", 2), user_id=admin, language="de")
        assert planned == Benchmark("demo", bench.job_params("demo", DEMO, 2, "de"), None)
    queued = await queue_benchmark(store.pool, planned, user_id=OWNER, chat_id=OWNER)
    assert isinstance(queued, Queued)
    job = await jobs.get_job(store.pool, queued.job_id)
    assert (job.command, job.params, job.chat_id) == ("bench", planned.params, OWNER)
    assert planned.queued_text("en", 1).startswith("Benchmark of /demo")


async def test_what_cannot_run_is_refused_before_anything_is_queued(store):
    await commands.put_command(store.pool, "demo", workflow=DEMO)
    await commands.put_command(store.pool, "bare", workflow={"1": {"class_type": "X", "inputs": {}}})
    up, down = await backends.register_backends(store.pool, ["http://127.0.0.1:1", "http://user:pw@10.0.0.2:8188"])
    await backends.record_check(store.pool, up.url)
    await backends.record_check(store.pool, down.url, error="refused")

    async def plan(request: BenchRequest, user_id: int = ADMIN):
        return await plan_benchmark(store.pool, SETTINGS, request, user_id=user_id, language=None)

    assert await plan(BenchRequest("demo"), user_id=STRANGER) == NotAdmin()
    assert await plan(BenchRequest("nosuch")) == UnknownCommand("nosuch")
    assert isinstance(await plan(BenchRequest("demo", 0)), BadBenchmark)
    assert isinstance(await plan(BenchRequest("bare")), BadBenchmark)
    unknown = await plan(BenchRequest("demo", backend="#9"))
    assert isinstance(unknown, UnknownBackend) and [b.id for b in unknown.listed] == [up.id, down.id]
    assert await plan(BenchRequest("demo", backend="10.0.0.2:8188")) == BackendOff(
        (await backends.list_backends(store.pool, [down.url]))[0])
    on_up = await plan(BenchRequest("demo", backend=f"#{up.id}"))
    assert isinstance(on_up, Benchmark) and on_up.params["backend"] == up.url
    assert await jobs.list_queue(store.pool) == []
