"""Warm placement in the claim (issue 31): a backend takes first the jobs whose model files it holds,
a job waits a bounded time for the backend that holds its model, and fairness across users stays."""

import asyncio

import pytest

from comfyui_courier.store import backends, jobs
from comfyui_courier.store.pool import connect
from comfyui_courier.tests.store.test_backend_claims import enqueue

A, B = 101, 202
SDXL, FLUX = "sd_xl_base_1.0.safetensors", "flux1-schnell.safetensors"
ONE, TWO = "http://127.0.0.1:9011", "http://127.0.0.1:9012"
WAIT_S = 30.0  # no test waits for it: a job past its wait is made older than that


@pytest.fixture
async def warm(store):
    """Two backends with both models; ONE has last loaded SDXL, TWO FLUX (each ran one job)."""
    await backends.register_backends(store.pool, [ONE, TWO])
    for url in (ONE, TWO):
        await backends.record_check(store.pool, url, models=[SDXL, FLUX])
    for url, model in ((ONE, SDXL), (TWO, FLUX)):
        await enqueue(store, 999, model=model)
        ran = await claim(store, url)
        assert await jobs.succeed(store.pool, ran.id, {}, worker=url)
    return store


async def claim(store, url: str, wait_s: float | None = WAIT_S):
    return await jobs.claim(store.pool, url, 60, backend=url, warm_wait_s=wait_s)


async def held(store, url: str) -> list[str]:
    (backend,) = await backends.list_backends(store.pool, [url])
    return backend.warm


async def queued_long_ago(store, job_id: int) -> None:
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE courier_jobs SET created_at = now() - make_interval(secs => $2) WHERE id = $1",
                           job_id, WAIT_S + 1)


async def test_a_backend_holds_the_model_files_of_the_last_job_claimed_on_it_until_a_check_fails(warm):
    assert (await held(warm, ONE), await held(warm, TWO)) == ([SDXL], [FLUX])
    await backends.record_check(warm.pool, ONE, error="connection refused")  # restarted, maybe: nothing held
    assert await held(warm, ONE) == []
    await enqueue(warm, A)  # no model file: ComfyUI's cache keeps only this graph's outputs, no model
    await claim(warm, TWO)
    assert await held(warm, TWO) == []


async def test_a_backend_takes_first_the_job_whose_model_it_holds(warm):
    flux = await enqueue(warm, A, model=FLUX)
    sdxl = await enqueue(warm, A, model=SDXL)
    assert (await claim(warm, ONE)).id == sdxl  # the older FLUX job is TWO's
    assert (await claim(warm, TWO)).id == flux


async def test_a_job_waits_for_the_backend_holding_its_model_then_any_takes_it(warm):
    flux = await enqueue(warm, A, model=FLUX)
    assert await claim(warm, ONE) is None  # TWO holds FLUX: it waits for TWO
    await queued_long_ago(warm, flux)
    assert (await claim(warm, ONE)).id == flux  # waited its bound: ONE takes it
    assert await held(warm, ONE) == [FLUX]


async def test_a_held_job_says_when_its_hold_ends(warm):
    assert await jobs.warm_hold_ends_in(warm.pool, WAIT_S) is None  # nothing queued
    flux = await enqueue(warm, A, model=FLUX)
    assert await claim(warm, ONE) is None  # held for TWO
    assert 0 < await jobs.warm_hold_ends_in(warm.pool, WAIT_S) <= WAIT_S  # when ONE looks again
    await queued_long_ago(warm, flux)
    assert await jobs.warm_hold_ends_in(warm.pool, WAIT_S) is None  # free for any backend now
    assert (await claim(warm, ONE)).id == flux


async def test_a_job_no_backend_holds_the_model_of_goes_anywhere_at_once(warm):
    await backends.record_check(warm.pool, TWO, error="down")
    flux = await enqueue(warm, A, model=FLUX)
    assert (await claim(warm, ONE)).id == flux


async def test_a_heavy_users_warm_backlog_does_not_hold_back_a_light_users_job(warm):
    heavy = [await enqueue(warm, A, model=SDXL) for _ in range(5)]
    assert (await claim(warm, ONE)).id == heavy[0]
    light = await enqueue(warm, B, model=FLUX)
    await queued_long_ago(warm, light)
    assert (await claim(warm, ONE)).id == light  # B was served less recently than A, as today


async def test_without_a_wait_the_claim_is_todays_fair_order(warm):
    flux = await enqueue(warm, A, model=FLUX)
    await enqueue(warm, A, model=SDXL)
    assert (await claim(warm, ONE, wait_s=None)).id == flux


@pytest.mark.timeout(60)
async def test_concurrent_warm_claims_never_claim_a_job_twice(warm, pg_database):
    ids = {await enqueue(warm, user, model=model) for _ in range(10) for user in (A, B) for model in (SDXL, FLUX)}
    connections = [await connect(pg_database) for _ in range(4)]

    async def claimer(conn, url: str) -> list[int]:
        claimed = []
        while (job := await jobs.claim(conn, url, 60, backend=url, warm_wait_s=WAIT_S)) is not None:
            assert job.status == "running" and job.attempts == 1, job
            claimed.append((job.id, url))
        return claimed

    try:
        results = await asyncio.gather(*(claimer(conn, (ONE, TWO)[n % 2]) for n, conn in enumerate(connections)))
    finally:
        for conn in connections:
            await conn.close()
    claimed = [job_id for result in results for job_id, _ in result]
    assert sorted(claimed) == sorted(ids)  # each once, every one: each backend takes its own model's
    models = {job_id: url for result in results for job_id, url in result}
    async with warm.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, params->'workflow'->'1'->'inputs'->>'ckpt_name' AS model"
                                " FROM courier_jobs WHERE id = any($1::bigint[])", list(ids))
    assert {row["model"]: {models[r["id"]] for r in rows if r["model"] == row["model"]} for row in rows} == \
        {SDXL: {ONE}, FLUX: {TWO}}


async def served_ago(store, user: int, seconds: float) -> None:
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE courier_users SET last_served_at = now() - make_interval(secs => $2)"
                           " WHERE user_id = $1", user, seconds)


async def test_a_warm_job_of_a_user_served_a_little_more_recently_goes_first(warm):
    cold = await enqueue(warm, A, model=FLUX)
    warm_job = await enqueue(warm, B, model=SDXL)
    await queued_long_ago(warm, cold)  # no longer waits for TWO
    await served_ago(warm, A, 20)
    await served_ago(warm, B, 10)  # served 10 s after A: within the wait
    assert (await claim(warm, ONE)).id == warm_job


async def test_a_cold_job_of_a_user_served_longer_than_the_wait_before_goes_first(warm):
    cold = await enqueue(warm, A, model=FLUX)
    await enqueue(warm, B, model=SDXL)
    await queued_long_ago(warm, cold)
    await served_ago(warm, A, WAIT_S + 20)
    await served_ago(warm, B, 10)  # A waited longer than the wait more: its turn, cold or not
    assert (await claim(warm, ONE)).id == cold
