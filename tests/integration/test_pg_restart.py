"""PostgreSQL stopped and started again (the same data, the same socket) while a stream of commands
comes in, by long polling and by webhook: every command makes one job and one result, and whoever
writes while the database is down is told their command waits. Real PostgreSQL (an embedded
server of the test's own), real python-telegram-bot on the Bot API emulator, a fake ComfyUI."""

import asyncio
import contextlib
from pathlib import Path

import asyncpg
import pytest

from comfyui_courier.core import i18n
from comfyui_courier.core.config import load_settings
from comfyui_courier.runtime import Courier
from comfyui_courier.store import embedded
from comfyui_courier.store.pgwatch import postmaster
from comfyui_courier.tests.bot.test_update_inbox import started
from comfyui_courier.tests.server_routes.helpers import serve_routes
from comfyui_courier.tests.support.courier import replies_to, running_courier
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tests.support.postgres import dsn_for

pytestmark = pytest.mark.timeout(240)

USERS = tuple(range(501, 521))
COMMANDS = 40
PACE_S = 0.15  # between two commands of the stream
DOWN_S = 4.0  # how long the server stays down


@pytest.fixture
def own_server(pg_data_dir):
    server = embedded.start_sync(pg_data_dir / "postgres")
    yield server
    server.stop_sync()


def stop(server) -> None:
    server._runner.stop()  # pg_ctl stop -m fast, as the account the server runs as


def start_again(server, socket_dir) -> None:
    """pg_ctl start on the same data and socket directory: the DSN the bot holds works again."""
    server._runner.run("pg_ctl", "start", "-w", "-t", "60", "-D", str(server.pgdata),
                       "-l", str(server.pgdata / "postgres.log"), "-o", f"-h '' -k {socket_dir}")


@contextlib.asynccontextmanager
async def courier_taking_updates(mode: str, botapi, botapi_bot, dsn: str, backend: str, data_dir: Path, **env):
    if mode == "polling":
        async with running_courier(botapi, botapi_bot, dsn, backend, data_dir, **env) as courier:
            yield courier
        return

    def make_courier(url: str) -> Courier:
        return Courier(load_settings(None, {
            "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
            "COURIER_DATABASE_URL": dsn, "COURIER_WEBHOOK_URL": f"{url}/courier/telegram/webhook", **env}),
            data_dir, backend)

    runner, _, courier = await serve_routes(make_courier)
    try:
        async with started(courier):
            yield courier
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_postgres_restarted_while_commands_stream_in_loses_none_and_duplicates_none(
        own_server, botapi, botapi_bot, fake_comfy, tmp_path, mode):
    admin = await asyncpg.connect(own_server.dsn)
    await admin.execute("CREATE DATABASE stream")
    await admin.close()
    dsn = dsn_for(own_server, "stream")
    socket_dir = postmaster(own_server.pgdata)[1]
    requests, while_down = [], []
    down = False

    async def stream(count: int) -> None:
        for n in range(count):
            request = botapi_bot.inject_text(USERS[n % len(USERS)], f"/demo stream {n}")
            requests.append(request)
            if down:
                while_down.append(request)
            await asyncio.sleep(PACE_S)

    async with courier_taking_updates(mode, botapi, botapi_bot, dsn, fake_comfy.url, tmp_path, COURIER_JOB_LEASE_S="6",
                                      COURIER_MAX_JOBS_PER_USER=str(COMMANDS), COURIER_ALLOWED_USERS="*") as courier:
        streaming = asyncio.create_task(stream(COMMANDS))
        await botapi.wait_for(lambda: len(requests) >= 10, timeout=30)
        await asyncio.to_thread(stop, own_server)
        down = True
        await asyncio.sleep(DOWN_S)  # the outage itself: commands keep coming meanwhile
        down = False
        await asyncio.to_thread(start_again, own_server, socket_dir)
        await streaming
        for request in requests:
            await botapi_bot.wait_for_call("sendDocument", timeout=90, where=replies_to(request))
        async with courier.store.pool.acquire() as conn:
            jobs = await until(lambda: _all_ended(conn, len(requests)), 60, "every job ended")
    assert while_down, "no command came in while the database was down"
    assert sorted(job["prompt"] for job in jobs) == sorted(f"stream {n}" for n in range(len(requests)))  # once each
    assert {job["status"] for job in jobs} == {"succeeded"}
    for request in requests:  # one result each, never two
        assert len([c for c in botapi_bot.outbox if c.method == "sendDocument" and replies_to(request)(c)]) == 1
    waiting = i18n.text("en", "database_down")
    told = {call.params["chat_id"] for call in botapi_bot.outbox
            if call.method == "sendMessage" and call.params.get("text") == waiting}
    assert told & {request["chat"]["id"] for request in while_down}  # the rest came in while polling backed off


async def _all_ended(conn, count: int):
    rows = await conn.fetch("SELECT params->>'prompt' AS prompt, status FROM courier_jobs")
    return rows if len(rows) >= count and all(row["status"] not in ("queued", "running") for row in rows) else None
