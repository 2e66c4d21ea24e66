"""A /demo queued behind /img jobs is told when it starts from /demo's own run times (issue 31,
item 3): not from a median of every command's recent runs, which told 40 /demo jobs (19 s each)
"starts in about 173 s ... 604 s" after a run of /img jobs. Real python-telegram-bot on the Bot API
emulator, real PostgreSQL, the fake ComfyUI (held: the /img runs as long as the test needs; what
it renders is not the point). The /img jobs run /demo's workflow under /img's name: on the fake
ComfyUI a real /img fails validation (it has no checkpoint), and only the name picks the run times."""

import re

import pytest

from comfyui_courier.store import backends, jobs
from comfyui_courier.tests.support.courier import running_courier, shown_text
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.jobs import enqueue, seed_runs
from comfyui_courier.tests.support.polling import job_rows, until

USER = 3141
IMG_S, DEMO_S = 30.0, 2.0
SLACK_S = 15
"""How much of the running /img's time may pass before the chat's message is read (a loaded machine)."""
STARTS = re.compile(r"Queued /(\w+) — position (\d+) · starts in about (\d+) s")


@pytest.mark.timeout(120)
async def test_a_demo_behind_img_jobs_is_told_its_start_from_demos_own_runs(botapi, botapi_bot, pg_database,
                                                                            tmp_path):
    fake = FakeComfyUI(steps=2, step_delay=0.05)
    async with fake, running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                                     COURIER_ALLOWED_USERS=str(USER), COURIER_PIPELINE_DEPTH="1") as courier:
        pool = courier.store.pool
        await seed_runs(pool, "demo", DEMO_S, 10, ended_ago_s=7200)  # older
        await seed_runs(pool, "img", IMG_S, 40, ended_ago_s=60)  # the 50 most recent runs: mostly /img
        (backend,) = await backends.list_backends(pool)
        await backends.set_backend(pool, backend.id, draining=True)  # nothing starts while the /img jobs queue
        botapi_bot.inject_text(USER, "/demo a cat")

        async def queued():
            return [row for row in await job_rows(pool) if row["user_id"] == USER]

        (first,) = await until(queued, 30, "the first job")
        async with pool.acquire() as conn:
            await conn.execute("UPDATE courier_jobs SET command = 'img' WHERE id = $1", first["id"])
        params = (await jobs.get_job(pool, first["id"])).params
        await enqueue(pool, user_id=USER, chat_id=USER, command="img", params=params)
        fake.pause()  # the first /img runs until the end of the test
        await backends.set_backend(pool, backend.id, draining=False)

        async def running():
            return (await jobs.get_job(pool, first["id"])).status == "running"

        await until(running, 30, "the first /img running")
        for prompt in ("a fox", "a hen", "an owl"):
            botapi_bot.inject_text(USER, f"/demo {prompt}")

        def told():
            for call in reversed(botapi_bot.outbox):
                lines = [STARTS.match(line) for line in (shown_text(call) or "").splitlines()]
                if len(lines) == 4 and all(lines):
                    return [(m[1], int(m[2]), int(m[3])) for m in lines]
            return None

        said = await botapi.wait_for(told, timeout=60)
        fake.resume()
    # the running /img's time left, then the queued /img's 30 s, then 2 s per /demo ahead
    expected = [("img", 1, IMG_S), ("demo", 2, 2 * IMG_S), ("demo", 3, 2 * IMG_S + DEMO_S),
                ("demo", 4, 2 * IMG_S + 2 * DEMO_S)]
    assert [(name, place) for name, place, _ in said] == [(name, place) for name, place, _ in expected], said
    for (_, _, seconds), (_, _, most) in zip(said, expected, strict=True):
        assert most - SLACK_S <= seconds <= most, said
