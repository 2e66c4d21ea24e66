"""The embedded PostgreSQL hung (every process of it stopped by SIGSTOP, as a stalled disk or a frozen
VM leaves it: no answer, not even an error) while a job renders (issue 28, items 2 and 3): within a
few seconds the job's status says that it waits for the database, and its step edits go on once the
database answers; the hang outlasts the job's lease, which its live worker renews before anyone
takes it as expired, so the job is not run again; the result is recorded and sent once. Real
python-telegram-bot on the Bot API emulator, the pack's own embedded PostgreSQL, the fake ComfyUI
sending a step every half second."""

import asyncio
import contextlib
import os
import re
import signal
from pathlib import Path

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.core.config import load_settings
from comfyui_courier.jobs.db_wait import SLOW_S
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import job_rows, until

pytestmark = pytest.mark.timeout(180)

USER = 2301
HANG_S = 20.0
LEASE_S = 10.0
"""Shorter than the hang: a lease that runs out while the database hangs is not taken as expired."""
STEP = re.compile(r"step (\d+) of")


def server_pids(postmaster: int) -> list[int]:
    """The postmaster and its children (the backends serving our connections), postmaster first."""
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    return [postmaster, *map(int, children)]


@contextlib.contextmanager
def hung(postmaster: int):
    """Every process of the server stopped (SIGSTOP) until the block ends (SIGCONT)."""
    pids = server_pids(postmaster)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in reversed(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def steps(calls) -> list[int]:
    """The step numbers the job's status showed in ``calls``."""
    return [int(m.group(1)) for call in calls if (m := STEP.search(call.params.get("text") or ""))]


async def test_a_hung_database_is_told_and_the_progress_goes_on_once_it_answers(botapi, botapi_bot, tmp_path):
    async with FakeComfyUI(steps=120, step_delay=0.5) as fake:  # a minute of steps
        courier = Courier(load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_ALLOWED_USERS": str(USER), "COURIER_PROGRESS_INTERVAL_S": "0",
            "COURIER_JOB_LEASE_S": str(LEASE_S)}), tmp_path / "data", fake.url)
        await courier.start()
        try:
            await courier.booted()
            assert courier.health.state("dispatcher") == "ok", courier.health_report()
            botapi_bot.inject_text(USER, "/demo through a hang")
            await botapi.wait_for(lambda: steps(botapi_bot.outbox), timeout=60)
            with hung(courier.store.embedded.pid):
                hang_began = len(botapi_bot.outbox)
                waits = i18n.text("en", "database_waiting", name="demo")
                told = await botapi_bot.wait_for_call("editMessageText", timeout=SLOW_S + 7,
                                                      where=lambda call: call.params.get("text") == waits)
                assert told.status == 200
                await asyncio.sleep(HANG_S - SLOW_S)  # the outage's length: it waits for nothing
                held = botapi_bot.outbox[botapi_bot.outbox.index(told) + 1:]
                assert not steps(held), "the status went back to steps while the database hung"
            last = max(steps(botapi_bot.outbox[:hang_began]))
            answered = len(botapi_bot.outbox)
            await botapi.wait_for(lambda: [s for s in steps(botapi_bot.outbox[answered:]) if s > last], timeout=30)
            await botapi_bot.wait_for_call("sendDocument", timeout=90)
            async def ended():
                rows = await job_rows(courier.store.pool)
                return rows if rows[0]["status"] != "running" else None

            rows = await until(ended, 30, "job recorded")
            assert [(row["status"], row["attempts"]) for row in rows] == [("succeeded", 1)]
            assert len([call for call in botapi_bot.outbox if call.method == "sendDocument"]) == 1
        finally:
            await courier.stop()
