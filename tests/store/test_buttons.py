"""Result buttons in PostgreSQL: one token per job, a press that queues counted once even when presses
race on separate connections, the pending edit (one per user and chat, expiring), and delete_result."""

import asyncio

import pytest

from comfyui_courier.store import buttons, jobs, sessions
from comfyui_courier.store.pool import connect
from comfyui_courier.tests.support import jobs as support_jobs

USER, OTHER, CHAT = 101, 202, 9000


async def finished_job(store, user_id: int = USER) -> int:
    job_id, _ = await support_jobs.enqueue(store.pool, user_id=user_id, chat_id=CHAT, command="demo",
                                   params={"prompt": "x", "seed": 1})
    output = {"kind": "image", "file_id": "f", "filename": "a.png", "message_ids": [5, 6], "job_id": job_id}
    assert (await jobs.claim(store.pool, "worker", lease_s=60)).id == job_id
    assert await jobs.succeed(store.pool, job_id, {"outputs": [output], "prompt_id": "p"}, worker="worker")
    return job_id


async def test_a_job_keeps_one_token_and_the_token_finds_the_job(store):
    job_id = await finished_job(store)
    token = await buttons.issue(store.pool, job_id)
    assert await buttons.issue(store.pool, job_id) == token
    assert (await buttons.job_of(store.pool, token)).id == job_id
    assert await buttons.job_of(store.pool, "nosuch") is None


@pytest.mark.timeout(60)
async def test_racing_presses_on_separate_connections_count_once(store, pg_database):
    token = await buttons.issue(store.pool, await finished_job(store))
    connections = [await connect(pg_database) for _ in range(8)]
    try:
        first = await asyncio.gather(*(buttons.press(conn, token, "s") for conn in connections))
    finally:
        for conn in connections:
            await conn.close()
    assert sorted(first) == [False] * 7 + [True]
    assert await buttons.press(store.pool, token, "u")  # another action of the same buttons is its own
    await buttons.unpress(store.pool, token, "s")  # it queued nothing after all: it may come again
    assert await buttons.press(store.pool, token, "s")


async def test_one_edit_waits_per_user_and_chat_until_it_expires(store):
    job_id, other_job = await finished_job(store), await finished_job(store)
    wait = {"user_id": USER, "chat_id": CHAT, "payload": {"file_id": "f"}, "valid_s": 600}
    assert await buttons.wait_for_edit(store.pool, job_id=job_id, **wait) is not None
    assert await buttons.wait_for_edit(store.pool, job_id=job_id, **wait) is None  # waits already
    newer = await buttons.wait_for_edit(store.pool, job_id=other_job, **wait)  # another result replaces it
    assert await buttons.take_edit(store.pool, user_id=OTHER, chat_id=CHAT) is None
    taken = await buttons.take_edit(store.pool, user_id=USER, chat_id=CHAT)
    assert (taken.token, taken.payload) == (newer, {"file_id": "f", "job_id": other_job})
    assert await buttons.take_edit(store.pool, user_id=USER, chat_id=CHAT) is None  # once

    await buttons.wait_for_edit(store.pool, job_id=job_id, **{**wait, "valid_s": 0})
    assert await buttons.take_edit(store.pool, user_id=USER, chat_id=CHAT) is None  # expired
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_pending_actions") == 0  # and gone


async def test_delete_result_removes_the_job_its_buttons_and_its_outputs_in_the_session(store):
    job_id, kept = await finished_job(store), await finished_job(store)
    token = await buttons.issue(store.pool, job_id)
    await buttons.press(store.pool, token, "s")
    outputs = [{"kind": "image", "file_id": "a", "job_id": job_id}, {"kind": "image", "file_id": "b", "job_id": kept}]
    await sessions.set_last_outputs(store.pool, CHAT, USER, outputs)
    assert (await buttons.delete_result(store.pool, job_id, OTHER)).jobs == 0  # only the job's user's
    left = await buttons.delete_result(store.pool, job_id, USER)
    assert (left.jobs, left.messages) == (1, [(CHAT, 5), (CHAT, 6)])
    assert (await buttons.delete_result(store.pool, job_id, USER)).jobs == 0
    assert await jobs.get_job(store.pool, job_id) is None and await buttons.job_of(store.pool, token) is None
    assert (await sessions.get_session(store.pool, CHAT, USER)).last_outputs == outputs[1:]
