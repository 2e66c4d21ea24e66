"""Retention: jobs made old in real PostgreSQL are purged in bounded rounds, with their files on a real
ComfyUI (through Courier's route there); recent jobs, other folders and the quota counters of the last
day stay."""

import asyncio

import pytest

from comfyui_courier.jobs import retention
from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.tests.support.requires import require_comfyui

USER = 111


@pytest.fixture
def comfyui(request):
    require_comfyui()
    return request.getfixturevalue("comfyui")


async def make_job(conn, backend: str, filename: str, age_days: int, status: str = "succeeded") -> int:
    return await conn.fetchval(
        "INSERT INTO courier_jobs (user_id, chat_id, command, status, backend, params, result, created_at) "
        "VALUES ($1, $1, 'demo', $2, $3, $4, $5, now() - make_interval(days => $6)) RETURNING id",
        USER, status, backend, {"prompt": "x", "image_file_id": None},
        {"prompt_id": f"p-{filename}", "outputs": [{"filename": filename, "subfolder": "courier", "type": "output",
                                                     "message_ids": [1]}]}, age_days)


async def test_old_jobs_and_their_files_go_in_bounded_rounds(store, comfyui):
    folder = comfyui.base_directory / "output" / "courier"
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"retention-{i}.png" for i in range(6)]
    for name in names:
        (folder / name).write_bytes(b"png")
    async with store.pool.acquire() as conn:
        await conn.execute("INSERT INTO courier_users (user_id) VALUES ($1)", USER)
        old = [await make_job(conn, comfyui.url, name, 31) for name in names[:5]]
        recent = await make_job(conn, comfyui.url, names[5], 29)
        running = await conn.fetchval("INSERT INTO courier_jobs (user_id, chat_id, command, status, created_at) "
                                      "VALUES ($1, $1, 'demo', 'running', now() - interval '40 days') RETURNING id",
                                      USER)
        await conn.execute("INSERT INTO courier_quota_events (user_id, at) VALUES ($1, now() - interval '25 hours'),"
                           " ($1, now() - interval '23 hours')", USER)
        await conn.execute("INSERT INTO courier_chat_sessions (chat_id, user_id, updated_at) VALUES "
                           "($1, $1, now() - interval '31 days'), ($1 + 1, $1, now())", USER)
        await conn.execute("INSERT INTO courier_pending_actions (token, user_id, chat_id, action, expires_at) VALUES "
                           "('old', $1, $1, 'forget', now() - interval '1 second'), "
                           "('new', $1, $1, 'forget', now() + interval '1 hour')", USER)

    async with ComfyClient(comfyui.url) as client:
        first = await retention.purge(store.pool, [client], 30, batch=2, max_batches=2)
        assert first.jobs == 4  # a round stops after max_batches
        async with store.pool.acquire() as conn:
            assert sorted(r["id"] for r in await conn.fetch("SELECT id FROM courier_jobs")) == sorted(
                [old[4], recent, running])
        assert [name for name in names if (folder / name).exists()] == names[4:]
        second = await retention.purge(store.pool, [client], 30, batch=2, max_batches=2)
        assert second.jobs == 1

    assert [name for name in names if (folder / name).exists()] == names[5:]
    async with store.pool.acquire() as conn:
        assert sorted(r["id"] for r in await conn.fetch("SELECT id FROM courier_jobs")) == sorted([recent, running])
        assert await conn.fetchval("SELECT count(*) FROM courier_quota_events") == 1
        assert [r["chat_id"] for r in await conn.fetch("SELECT chat_id FROM courier_chat_sessions")] == [USER + 1]
        assert [r["token"] for r in await conn.fetch("SELECT token FROM courier_pending_actions")] == ["new"]


async def test_the_task_purges_once_started(store):
    async with store.pool.acquire() as conn:
        await conn.execute("INSERT INTO courier_users (user_id) VALUES ($1)", USER)
        await conn.execute("INSERT INTO courier_jobs (user_id, chat_id, command, status, created_at) "
                           "VALUES ($1, $1, 'demo', 'failed', now() - interval '2 days')", USER)
    task = retention.Retention(store.pool, [], days=1)
    task.start()
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while await store.pool.fetchval("SELECT count(*) FROM courier_jobs"):
            assert asyncio.get_running_loop().time() < deadline, "the old job is still there"
            await asyncio.sleep(0.05)
    finally:
        await task.stop()
