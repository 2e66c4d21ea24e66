"""The job queue: no double claims, fair turns, leases, cancel, and wake-ups."""

import asyncio

import pytest

from comfyui_courier.store import StoreError, backends, jobs, queue_messages
from comfyui_courier.store.pool import connect
from comfyui_courier.tests.support import jobs as support_jobs

A, B, C = 101, 202, 303
CHAT = 9000


async def enqueue(store, user_id: int, prompt: str = "a cat", **kw) -> int:
    job_id, _ = await support_jobs.enqueue(store.pool, user_id=user_id, chat_id=CHAT + user_id,
                                   command="draw", params={"prompt": prompt}, **kw)
    return job_id


async def test_enqueue_returns_id_and_position(store):
    first = await support_jobs.enqueue(store.pool, user_id=A, chat_id=CHAT, command="draw",
                               params={"prompt": "a cat", "seed": 7}, reply_to_message_id=55)
    second = await support_jobs.enqueue(store.pool, user_id=A, chat_id=CHAT, command="draw", params={})
    assert first.position == 1 and second.position == 2
    job = await jobs.get_job(store.pool, first.job_id)
    assert job.status == "queued" and job.params == {"prompt": "a cat", "seed": 7}
    assert (job.user_id, job.chat_id, job.command, job.reply_to_message_id) == (A, CHAT, "draw", 55)
    assert job.attempts == 0 and job.max_attempts == 3
    assert await jobs.queue_position(store.pool, second.job_id) == 2


@pytest.mark.timeout(60)
async def test_four_concurrent_claimers_never_claim_a_job_twice(store, pg_database):
    ids = {await enqueue(store, user_id=user, prompt=str(n)) for n in range(50) for user in (A, B, C, 404)}
    assert len(ids) == 200
    connections = [await connect(pg_database) for _ in range(4)]

    async def claimer(conn, worker: str) -> list[int]:
        claimed = []
        while (job := await jobs.claim(conn, worker, lease_s=60)) is not None:
            assert job.worker == worker and job.status == "running" and job.attempts == 1
            claimed.append(job.id)
        return claimed

    try:
        results = await asyncio.gather(*(claimer(c, f"w{i}") for i, c in enumerate(connections)))
    finally:
        for conn in connections:
            await conn.close()
    everything = [job_id for claimed in results for job_id in claimed]
    assert sorted(everything) == sorted(ids)  # each exactly once
    assert all(results), "some claimer got nothing: the test did not exercise concurrency"


async def test_users_take_turns_least_recently_served_first(store):
    a_jobs = [await enqueue(store, A) for _ in range(5)]
    b_job = await enqueue(store, B)
    predicted = [job.id for job in await jobs.list_queue(store.pool)]
    assert [job.position for job in await jobs.list_queue(store.pool)] == [1, 2, 3, 4, 5, 6]

    claimed = []
    while (job := await jobs.claim(store.pool, "w", lease_s=60)) is not None:
        claimed.append(job.id)
    assert claimed[:2] == [a_jobs[0], b_job]  # B's only job goes second
    assert claimed == predicted == [a_jobs[0], b_job, *a_jobs[1:]]


async def test_a_returning_user_goes_before_a_user_just_served(store):
    await enqueue(store, A)
    await jobs.claim(store.pool, "w", 60)  # A served
    await enqueue(store, B)
    await jobs.claim(store.pool, "w", 60)  # B served after A
    a_next, b_next = await enqueue(store, A), await enqueue(store, B)
    c_new = await enqueue(store, C)  # never served: first
    assert [await jobs.queue_position(store.pool, j) for j in (c_new, a_next, b_next)] == [1, 2, 3]
    order = [(await jobs.claim(store.pool, "w", 60)).id for _ in range(3)]
    assert order == [c_new, a_next, b_next]


async def test_expired_lease_requeues_then_fails_out_of_attempts(store):
    job_id = await enqueue(store, A, max_attempts=2)
    job = await jobs.claim(store.pool, "dead-worker", lease_s=0)
    assert job.id == job_id
    [requeued] = await jobs.requeue_expired(store.pool)
    assert (requeued.id, requeued.status, requeued.attempts, requeued.worker) == (job_id, "queued", 1, None)
    assert not await jobs.extend_lease(store.pool, job_id, "dead-worker", 60)  # it lost the job
    assert not await jobs.succeed(store.pool, job_id, {"late": True})

    await jobs.claim(store.pool, "dead-worker", lease_s=0)
    [failed] = await jobs.requeue_expired(store.pool)
    assert (failed.status, failed.attempts, failed.error) == ("failed", 2, "lease expired")
    assert failed.finished_at is not None
    assert await jobs.requeue_expired(store.pool) == []


async def test_a_live_lease_is_left_alone(store):
    job_id = await enqueue(store, A)
    job = await jobs.claim(store.pool, "w", lease_s=60)
    assert await jobs.extend_lease(store.pool, job_id, "w", 120)
    assert not await jobs.extend_lease(store.pool, job_id, "someone-else", 120)
    assert await jobs.requeue_expired(store.pool) == []
    assert (await jobs.get_job(store.pool, job_id)).lease_until > job.lease_until


async def test_progress_then_success(store):
    job_id = await enqueue(store, A)
    assert not await jobs.set_progress(store.pool, job_id, {"value": 1})  # not running yet
    await backends.register_backends(store.pool, ["http://127.0.0.1:8188"])
    await jobs.claim(store.pool, "w", 60, backend="http://127.0.0.1:8188")
    assert await jobs.set_progress(store.pool, job_id, {"value": 3, "max": 20})
    assert (await jobs.adopt_status_message(store.pool, job_id, 77)).message_id == 77
    assert (await jobs.adopt_status_message(store.pool, job_id, 78)).message_id == 77  # the first one stays
    assert not await jobs.succeed(store.pool, job_id, {"x": 1}, worker="someone-else")
    assert await jobs.succeed(store.pool, job_id, {"outputs": [{"file_id": "f"}]}, worker="w")
    job = await jobs.get_job(store.pool, job_id)
    assert (job.status, job.progress, job.result) == ("succeeded", {"value": 3, "max": 20},
                                                      {"outputs": [{"file_id": "f"}]})
    assert (job.backend, job.status_message_id, job.lease_until) == ("http://127.0.0.1:8188", 77, None)
    assert job.started_at <= job.finished_at
    assert not await jobs.fail(store.pool, job_id, "too late")


async def test_fail(store):
    job_id = await enqueue(store, A)
    await jobs.claim(store.pool, "w", 60)
    assert await jobs.fail(store.pool, job_id, "ComfyUI said no")
    job = await jobs.get_job(store.pool, job_id)
    assert (job.status, job.error) == ("failed", "ComfyUI said no")


async def test_release_gives_the_job_back_without_counting_the_attempt(store):
    job_id = await enqueue(store, A)
    await jobs.claim(store.pool, "w", 60)
    assert not await jobs.release(store.pool, job_id, "someone-else", "backend down")
    assert await jobs.release(store.pool, job_id, "w", "backend down")
    job = await jobs.get_job(store.pool, job_id)
    assert (job.status, job.attempts, job.worker, job.error) == ("queued", 0, None, "backend down")
    assert (await jobs.claim(store.pool, "w2", 60)).id == job_id
    assert await jobs.release(store.pool, job_id, "w2", "its backend died", count_attempt=True)
    assert (await jobs.get_job(store.pool, job_id)).attempts == 1  # that attempt counts


async def test_cancel_user_jobs_returns_the_running_ones(store):
    running_id = await enqueue(store, A)
    await backends.register_backends(store.pool, ["http://b"])
    await jobs.claim(store.pool, "w", 60, backend="http://b")
    queued_ids = [await enqueue(store, A), await enqueue(store, A)]
    other_user = await enqueue(store, B)
    done = await enqueue(store, A)
    await jobs.cancel_job(store.pool, done)

    queued, running = await jobs.cancel_user_jobs(store.pool, A)
    assert [job.id for job in queued] == queued_ids
    assert [(job.id, job.worker, job.backend, job.status) for job in running] == \
        [(running_id, "w", "http://b", "cancelled")]
    assert not await jobs.extend_lease(store.pool, running_id, "w", 60)  # the worker learns it
    assert not await jobs.succeed(store.pool, running_id, {})
    assert [job.id for job in await jobs.list_queue(store.pool)] == [other_user]
    assert await jobs.cancel_user_jobs(store.pool, A) == ([], [])


async def test_cancel_job(store):
    job_id = await enqueue(store, A)
    assert await jobs.cancel_job(store.pool, job_id, reason="user asked")
    assert not await jobs.cancel_job(store.pool, job_id)
    job = await jobs.get_job(store.pool, job_id)
    assert (job.status, job.error) == ("cancelled", "user asked")


async def test_list_queue_and_count_active(store):
    first = await enqueue(store, A)
    second = await enqueue(store, B)
    third = await enqueue(store, A)
    await jobs.claim(store.pool, "w", 60)  # first
    listed = await jobs.list_queue(store.pool)
    assert [(j.id, j.status, j.position) for j in listed] == \
        [(first, "running", None), (second, "queued", 1), (third, "queued", 2)]
    mine = await jobs.list_queue(store.pool, user_id=A)
    assert [(j.id, j.position) for j in mine] == [(first, None), (third, 2)]
    assert await jobs.count_active(store.pool, A) == 2
    assert await jobs.queue_position(store.pool, first) is None
    assert await jobs.get_job(store.pool, 123456789) is None


@pytest.mark.timeout(30)
async def test_listener_wakes_on_enqueue_and_requeue(store):
    woken = asyncio.Event()
    listener = await store.listen_jobs(woken.set)
    try:
        assert not await listener.wait(timeout=0)
        job_id = await enqueue(store, A)
        assert await listener.wait(timeout=10)
        assert woken.is_set()
        await jobs.claim(store.pool, "w", lease_s=0)
        await jobs.requeue_expired(store.pool)
        assert await listener.wait(timeout=10)
        assert (await jobs.get_job(store.pool, job_id)).status == "queued"
    finally:
        await listener.close()


async def test_one_jobs_position_is_the_queue_views(store):
    """queue_position computes courier_queue's position for one job; they must agree."""
    for user, count in ((A, 4), (B, 1), (C, 3), (A, 2)):
        for _ in range(count):
            await enqueue(store, user)
    await jobs.claim(store.pool, "w", 60)  # A has been served: it goes last now
    listed = [job for job in await jobs.list_queue(store.pool) if job.status == "queued"]
    assert len(listed) == 9 and len({job.position for job in listed}) == 9
    assert [await jobs.queue_position(store.pool, job.id) for job in listed] == [job.position for job in listed]


async def chat_queue(pool, chat_id: int, limit: int) -> list[queue_messages.QueuedJob]:
    """The chat's queued jobs as its queue message's update reads them (held for no time)."""
    return (await queue_messages.hold(pool, chat_id, 0, limit)).queued


async def test_a_chats_queue_has_the_queue_views_positions(store):
    """hold_queue_message computes courier_queue's positions for one chat's jobs alone; they must agree, in a
    group chat of two users and in private chats, with one user served already."""
    group = -100777
    for user, chat, count in ((A, A, 3), (B, group, 2), (A, group, 2), (C, C, 1), (B, B, 2), (A, A, 1)):
        for _ in range(count):
            await support_jobs.enqueue(store.pool, user_id=user, chat_id=chat, command="demo", params={})
    await jobs.claim(store.pool, "w", 60)  # A's first job: A has been served, it goes last now
    expected = {job.id: job.position for job in await jobs.list_queue(store.pool) if job.status == "queued"}
    assert len(expected) == 10 and len(set(expected.values())) == 10
    for chat, count in ((A, 3), (group, 4), (B, 2), (C, 1)):
        listed = await chat_queue(store.pool, chat, 100)
        assert len(listed) == count
        assert [(job.id, job.position) for job in listed] == sorted(
            ((job.id, expected[job.id]) for job in listed), key=lambda pair: pair[1])
    assert [job.position for job in await chat_queue(store.pool, group, 2)] == sorted(
        expected[job.id] for job in await chat_queue(store.pool, group, 100))[:2]


async def test_adopting_a_status_message_wakes_the_dispatchers_while_the_job_is_queued(store):
    """The adoption's UPDATE holds the job's row for a moment, and a claim then skips it (SKIP
    LOCKED): the job, still queued, is announced again, so a dispatcher woken by its first NOTIFY
    does not wait for the next job or the idle poll to take it."""
    job_id = await enqueue(store, A)
    notified = []
    async with await store.listen_jobs(lambda: notified.append(1)) as listener:
        assert (await jobs.adopt_status_message(store.pool, job_id, 77)).message_id == 77
        assert await listener.wait(timeout=10) and len(notified) == 1
        await backends.register_backends(store.pool, ["http://127.0.0.1:8188"])
        await jobs.claim(store.pool, "w", 60, backend="http://127.0.0.1:8188")
        assert (await jobs.adopt_status_message(store.pool, job_id, 78)).message_id == 77
        async with store.pool.acquire() as conn:
            await conn.execute("SELECT pg_notify('courier_jobs', 'marker')")  # NOTIFYs arrive in commit order
        assert await listener.wait(timeout=10)
    assert len(notified) == 2  # and the marker: a running job's adoption woke no one


async def test_jobs_submitted_at_once_are_queued_by_one_statement_with_the_cap_and_duplicates_kept(store):
    """Submits that come while one is under way go together (one transaction), and each still sees
    the ones before it: the per-user cap and an update's second delivery hold within the group."""
    def submit(user_id: int, update_id: int, max_active: int | None = None):
        return jobs.submit(store.pool, user_id=user_id, chat_id=CHAT + user_id, command="draw",
                           params={"prompt": f"{user_id}-{update_id}"}, max_active=max_active,
                           update=(1, update_id, 0))

    capped = [submit(A, n, max_active=3) for n in range(6)]
    duplicated = [submit(B, 100), submit(B, 100), submit(B, 101)]
    results = await asyncio.gather(*capped, *duplicated)
    a, b = results[:6], results[6:]
    assert [r.job_id is not None for r in a] == [True] * 3 + [False] * 3
    assert [r.active for r in a[3:]] == [3, 3, 3]
    assert [(r.job_id is not None, r.duplicate) for r in b] == [(True, False), (False, True), (True, False)]
    async with store.pool.acquire() as conn:
        transactions = await conn.fetchval("SELECT count(DISTINCT xmin::text) FROM courier_jobs")
        prompts = await conn.fetch("SELECT id, params->>'prompt' AS prompt FROM courier_jobs ORDER BY id")
    assert transactions == 1, "the group went in more than one statement"
    assert [row["prompt"] for row in prompts] == ["101-0", "101-1", "101-2", "202-100", "202-101"]
    assert {row["id"] for row in prompts} == {r.job_id for r in results if r.job_id is not None}


async def test_a_job_the_database_refuses_fails_alone_in_its_group(store):
    def submit(command: str):
        return jobs.submit(store.pool, user_id=A, chat_id=CHAT, command=command, params={})

    results = await asyncio.gather(submit("draw"), submit("bad\x00name"), submit("draw"), return_exceptions=True)
    assert isinstance(results[1], StoreError)
    assert all(isinstance(r, jobs.Submitted) and r.job_id is not None for r in (results[0], results[2]))
    assert [job.command for job in await jobs.list_queue(store.pool)] == ["draw", "draw"]
