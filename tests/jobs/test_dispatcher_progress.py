"""A running job's progress in PostgreSQL (jobs/progress_record.py): what ``GET /courier/jobs`` answers
and the panel shows as "running N%", written while the job runs, throttled.

Real python-telegram-bot against the Bot API emulator, real PostgreSQL, the fake ComfyUI's progress
frames (``steps``, ``step_delay``)."""

from __future__ import annotations

import asyncio
import time

import pytest

from comfyui_courier.store import jobs
from comfyui_courier.tests.support.courier import running_courier

USER = 641
STEPS = 20


@pytest.mark.timeout(120)
async def test_a_running_job_s_percent_is_written_while_it_runs(botapi, botapi_bot, pg_database, fake_comfy,
                                                                 tmp_path):
    fake_comfy.steps, fake_comfy.step_delay = STEPS, 0.3  # six seconds of frames, 5 % apart
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as courier:
        pool = courier.store.pool
        botapi_bot.inject_text(USER, "/demo a fox")
        ran, percents = False, []
        deadline = time.monotonic() + 60
        while (listed := await jobs.list_queue(pool)) or not ran:  # until the job has ended
            assert time.monotonic() < deadline, "the job did not run and end in time"
            if listed and listed[0].status == "running":
                ran = True
                if listed[0].progress is not None:
                    percents.append(listed[0].progress["percent"])
            await asyncio.sleep(0.05)
    assert percents, "no progress was written while the job ran"
    assert all(0 < percent <= 100 and percent % 5 == 0 for percent in percents), percents
    assert sorted(percents) == percents and len(set(percents)) < STEPS, percents  # throttled: not every frame
