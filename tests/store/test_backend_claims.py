"""The claim reads the backends table: health, drain and model lists."""

import pytest

from comfyui_courier.store import backends, jobs
from comfyui_courier.tests.support import jobs as support_jobs

A, B = 101, 202
SDXL, FLUX = "sd_xl_base_1.0.safetensors", "flux1-schnell.safetensors"
GPU, CPU = "http://127.0.0.1:9001", "http://127.0.0.1:9002"


def workflow(model: str | None = None) -> dict:
    loader = {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": model}} if model else None
    graph = {"2": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0}}}
    return {**graph, "1": loader} if loader else graph


async def enqueue(store, user_id: int = A, model: str | None = None) -> int:
    job_id, _ = await support_jobs.enqueue(store.pool, user_id=user_id, chat_id=user_id, command="draw",
                                   params={"workflow": workflow(model), "seed": 1})
    return job_id


@pytest.fixture
async def two(store):
    """Two registered backends: GPU has SDXL, CPU has no model."""
    gpu, cpu = await backends.register_backends(store.pool, [GPU, CPU])
    await backends.record_check(store.pool, GPU, models=[SDXL])
    return gpu, cpu


async def test_an_unhealthy_or_draining_or_unknown_backend_claims_nothing(store, two):
    gpu, _ = two
    job_id = await enqueue(store)
    await backends.record_check(store.pool, GPU, error="connection refused")
    assert await jobs.claim(store.pool, "w", 60, backend=GPU) is None
    await backends.record_check(store.pool, GPU)
    await backends.set_backend(store.pool, gpu.id, draining=True)
    assert await jobs.claim(store.pool, "w", 60, backend=GPU) is None
    assert await jobs.claim(store.pool, "w", 60, backend="http://127.0.0.1:1") is None  # not registered
    await backends.set_backend(store.pool, gpu.id, draining=False)
    assert (await jobs.claim(store.pool, "w", 60, backend=GPU)).id == job_id


async def test_a_draining_backend_keeps_its_running_job(store, two):
    gpu, _ = two
    await enqueue(store)
    running = await jobs.claim(store.pool, "w", 60, backend=GPU)
    await enqueue(store, B)
    await backends.set_backend(store.pool, gpu.id, draining=True)
    assert await jobs.claim(store.pool, "w", 60, backend=GPU) is None
    assert await jobs.extend_lease(store.pool, running.id, "w", 60)
    assert await jobs.succeed(store.pool, running.id, {}, worker="w")
    (listed,) = await backends.list_backends(store.pool, [GPU])
    assert (listed.draining, listed.running) == (True, 0)


async def test_a_job_naming_a_model_waits_for_a_backend_that_has_it(store, two):
    sdxl_job = await enqueue(store, A, model=SDXL)
    plain_job = await enqueue(store, B)
    assert (await jobs.claim(store.pool, "cpu", 60, backend=CPU)).id == plain_job  # SDXL's job skipped
    assert await jobs.claim(store.pool, "cpu", 60, backend=CPU) is None
    assert (await jobs.claim(store.pool, "gpu", 60, backend=GPU)).id == sdxl_job


async def test_a_model_that_no_backend_taking_jobs_has_does_not_hold_the_job(store, two):
    gpu, _ = two
    nobody_has = await enqueue(store, A, model=FLUX)  # runs anywhere, and fails there with a clear reason
    assert (await jobs.claim(store.pool, "cpu", 60, backend=CPU)).id == nobody_has
    sdxl_job = await enqueue(store, B, model=SDXL)
    await backends.set_backend(store.pool, gpu.id, draining=True)  # the only one with SDXL takes nothing
    assert (await jobs.claim(store.pool, "cpu", 60, backend=CPU)).id == sdxl_job


async def test_a_job_pinned_to_a_backend_is_claimed_there_only(store, two):
    """``/bench … @backend``: the job's params name the one backend that may claim it; others pass it by."""
    pinned, _ = await support_jobs.enqueue(store.pool, user_id=A, chat_id=A, command="bench",
                                   params={"workflow": workflow(), "seed": 1, "backend": CPU})
    plain = await enqueue(store, A)
    assert (await jobs.claim(store.pool, "gpu", 60, backend=GPU)).id == plain
    assert await jobs.claim(store.pool, "gpu", 60, backend=GPU) is None
    assert (await jobs.claim(store.pool, "cpu", 60, backend=CPU)).id == pinned
