"""When a queued job starts (issue 31, item 3): from the run times of its own command and of the
commands of the jobs ahead of it, over the backends' slots; the chat's queue message and the
panel's queue read the same figure. Real PostgreSQL."""

import pytest

from comfyui_courier.store import backends, jobs, queue_messages
from comfyui_courier.tests.support.jobs import enqueue, seed_runs

A, B = 3101, 3102


async def queue(pool, user_id: int, *commands: str) -> list[int]:
    return [(await enqueue(pool, user_id=user_id, chat_id=user_id, command=command, params={})).job_id
            for command in commands]


async def estimates(pool, chat_id: int) -> dict[int, float | None]:
    return {job.id: job.starts_in_s for job in (await queue_messages.hold(pool, chat_id, 0, 100)).queued}


@pytest.mark.timeout(60)
async def test_demo_jobs_behind_an_img_job_start_by_their_own_run_times(store):
    """The recent runs are /img (30 s), /demo's are older (2 s): a global median told each /demo 30 s
    more than the one before it."""
    pool = store.pool
    await backends.register_backends(pool, ["http://127.0.0.1:1"], capacity=1)
    await seed_runs(pool, "demo", 2.0, 10, ended_ago_s=7200)
    await seed_runs(pool, "img", 30.0, 40, ended_ago_s=60)
    await queue(pool, A, "img")
    assert (await jobs.claim(pool, "w", 60)).command == "img"  # it runs now: about 30 s left
    demos = await queue(pool, A, "demo", "demo", "demo")
    told = await estimates(pool, A)
    assert list(told) == demos
    for ahead, job_id in enumerate(demos):  # the running /img's time left, then 2 s per /demo ahead
        assert 30 + 2 * ahead - 5 <= told[job_id] <= 30 + 2 * ahead, told


@pytest.mark.timeout(60)
async def test_a_command_without_history_has_no_estimate_nor_do_jobs_behind_it(store):
    pool = store.pool
    await backends.register_backends(pool, ["http://127.0.0.1:1"], capacity=2)
    await seed_runs(pool, "demo", 4.0, 5)
    first, new, after = await queue(pool, B, "demo", "brand_new", "demo")
    told = await estimates(pool, B)
    assert told[first] == 0  # two free slots: it starts at once
    assert told[new] is None and told[after] is None  # nobody knows how long /brand_new runs
    await seed_runs(pool, "brand_new", 10.0, 1)
    assert (await estimates(pool, B))[after] == pytest.approx((4.0 + 10.0) / 2)


@pytest.mark.timeout(60)
async def test_the_panels_queue_shows_the_queue_messages_figures(store):
    pool = store.pool
    await backends.register_backends(pool, ["http://127.0.0.1:1"], capacity=1)
    await seed_runs(pool, "demo", 3.0, 5)
    await seed_runs(pool, "img", 20.0, 5)
    await queue(pool, A, "img", "demo", "img")
    await queue(pool, B, "demo", "img")
    told = {**await estimates(pool, A), **await estimates(pool, B)}
    listed = {job.id: job.starts_in_s for job in await jobs.list_queue(pool) if job.status == "queued"}
    assert len(listed) == 5 and listed == pytest.approx(told)


@pytest.mark.timeout(60)
async def test_a_run_counts_the_time_it_held_its_backend_not_its_delivery(store):
    """A result that waited 8 s on Telegram's limits did not keep the next job off the backend."""
    pool = store.pool
    await backends.register_backends(pool, ["http://127.0.0.1:1"], capacity=1)
    await seed_runs(pool, "img", 18.0, 5, execution_s=10.0)
    ids = await queue(pool, A, "img", "img")
    assert (await estimates(pool, A))[ids[1]] == pytest.approx(10.0)
