"""The embedded PostgreSQL killed (SIGKILL, as the OOM killer does) while a job renders (issue 21,
item 2): the pack notices, starts it again with a watcher for the new server, and the job's result,
made while the database was away, is recorded and sent once it is back, not rendered again; the
user's status message says that the result waits. Real python-telegram-bot on the Bot API emulator,
the pack's own embedded PostgreSQL, the fake ComfyUI (held, then released during the outage)."""

import contextlib
import fcntl
import os
import signal
from pathlib import Path

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.store.pgwatch import alive, postmaster
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(180)

USER = 2201


def watchers(pgdata: Path) -> list[int]:
    """Pids of pgwatch.py processes watching ``pgdata``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if any(arg.endswith(b"pgwatch.py") for arg in argv) and os.fsencode(pgdata) in argv:
                    found.append(int(entry.name))
    return found


@contextlib.contextmanager
def start_held_back(pgdata: Path):
    """Hold the ``.clients`` lock: nothing can start (or stop) the server on ``pgdata`` meanwhile."""
    with open(pgdata.with_name(pgdata.name + ".clients"), "a+") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        yield


async def test_a_killed_embedded_postgresql_is_started_again_and_the_running_job_keeps_its_result(
        botapi, botapi_bot, fake_comfy, tmp_path):
    courier = Courier(load_settings(None, {
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_ALLOWED_USERS": str(USER), "COURIER_PROGRESS_INTERVAL_S": "0", "COURIER_JOB_LEASE_S": "60"}),
        tmp_path / "data", fake_comfy.url)
    await courier.start()
    try:
        await courier.booted()
        assert courier.health.state("dispatcher") == "ok", courier.health_report()
        server = courier.store.embedded
        assert server is not None and server.started
        first_pid = server.pid
        assert len(watchers(server.pgdata)) == 1

        fake_comfy.pause()  # the prompt waits in the fake's queue until the database is gone
        request = botapi_bot.inject_text(USER, "/demo through an outage")
        async def queued():
            return fake_comfy.prompts

        await until(queued, 30, "prompt at the backend")
        # the job's status (posted once the job has run a moment, or its queue message edited) is what
        # the outage edits: it must be in the chat before PostgreSQL dies
        await botapi_bot.emulator.wait_for(lambda: [c for c in botapi_bot.outbox if c.params.get("text", "").startswith(
            "Rendering")], timeout=30)
        with start_held_back(server.pgdata):  # the outage lasts until the result is made
            os.kill(first_pid, signal.SIGKILL)

            async def noticed():
                return courier.health.state("database") == "error"

            await until(noticed, 30, "health telling the database died")
            fake_comfy.resume()
            waits = i18n.text("en", "database_down_result", name="demo")
            await botapi_bot.wait_for_call("editMessageText", timeout=30,
                                           where=lambda call: call.params.get("text") == waits)
            assert not [c for c in botapi_bot.outbox if c.method == "sendDocument"]  # nothing sent meanwhile

        async def back():
            return courier.health.state("database") == "ok" and postmaster(server.pgdata)

        running = await until(back, 60, "embedded PostgreSQL started again")
        assert running[0] == server.pid != first_pid and running[1] == server.socket_dir
        await botapi_bot.wait_for_call("sendDocument", timeout=60, where=lambda c: c.params.get("chat_id") == USER)
        async with courier.store.pool.acquire() as conn:
            job = await until(lambda: conn.fetchrow(
                "SELECT status, attempts FROM courier_jobs WHERE status = 'succeeded'"), 30, "job recorded")
        assert job["attempts"] == 1
        assert len(fake_comfy.prompts) == 1  # rendered once
        assert len([c for c in botapi_bot.outbox if c.method == "sendDocument"]) == 1
        assert watchers(server.pgdata) == [server._watcher.pid]  # a watcher for the new server, the old one gone
        new_pid, pgdata = server.pid, server.pgdata
    finally:
        await courier.stop()
    assert request["text"] == "/demo through an outage"
    assert not alive(new_pid) and postmaster(pgdata) is None  # stopped with the pack: its last user
