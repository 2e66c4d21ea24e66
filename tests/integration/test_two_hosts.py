"""Two Courier hosts on one external PostgreSQL (Debian's package, over TCP with a password): two
real ComfyUI processes with the pack, each its own backend; the first takes the Telegram updates
(Bot API emulator), the second only runs jobs and sends their results. Each job is claimed once,
and the jobs of a host killed under them finish on the other once their lease runs out.
"""

import asyncio
import signal

import pytest

from comfyui_courier.store import backends, commands
from comfyui_courier.store.pool import create_pool
from comfyui_courier.tests.support.courier import replies_to
from comfyui_courier.tests.support.graphs import cpu_bound
from comfyui_courier.tests.support.polling import job_rows, until

USERS = (111, 222, 333)
LEASE_S = 6


@pytest.fixture
async def hosts(comfyui_factory, external_pg_database, botapi, botapi_bot):
    common = {"TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
              "COURIER_DATABASE_URL": external_pg_database, "COURIER_ALLOWED_USERS": ",".join(map(str, USERS)),
              "COURIER_PROGRESS_INTERVAL_S": "0", "COURIER_JOB_LEASE_S": str(LEASE_S)}
    first = comfyui_factory(start=False, env=common)
    second = comfyui_factory(start=False, env={**common, "COURIER_RECEIVE_UPDATES": "0"})
    await asyncio.gather(*(asyncio.to_thread(server.start) for server in (first, second)))
    pool = await create_pool(external_pg_database)
    try:
        for server in (first, second):
            await until(lambda s=server: _dispatching(s), 90, f"the dispatcher of {server.url}")
        await botapi.wait_for(lambda: any(c.method == "setMyCommands" and c.ok for c in botapi_bot.calls), 60)
        yield first, second, pool
    finally:
        await pool.close()


async def _dispatching(server) -> bool:
    health = (await asyncio.to_thread(server.get_json, "/courier/health"))["components"]
    return health["dispatcher"]["state"] == "ok"


def host_of(job, first, second) -> str:
    worker = job["worker"] or ""
    return "first" if f":{first.pid}:" in worker else "second" if f":{second.pid}:" in worker else worker


@pytest.mark.timeout(300)
async def test_two_hosts_claim_each_job_once_and_a_killed_hosts_job_finishes_on_the_other(hosts, botapi_bot):
    first, second, pool = hosts
    health = (await asyncio.to_thread(second.get_json, "/courier/health"))["components"]
    assert (health["bot"]["state"], health["bot"]["mode"]) == ("ok", "send-only"), health
    await commands.put_command(pool, "slow", workflow=cpu_bound(1024, 15))
    requests = [botapi_bot.inject_text(user, f"/slow job {n}") for n in range(2) for user in USERS]
    for request in requests:
        await botapi_bot.wait_for_call("sendDocument", timeout=120, where=replies_to(request))
    done = await until(lambda: _ended(pool, len(requests)), 20, "every job recorded")
    assert [(job["status"], job["attempts"]) for job in done] == [("succeeded", 1)] * len(requests)
    assert {host_of(job, first, second) for job in done} == {"first", "second"}  # both hosts claimed
    for request in requests:  # each result sent once
        assert len([c for c in botapi_bot.outbox if c.method == "sendDocument" and replies_to(request)(c)]) == 1

    rows = {row.url: row for row in await backends.list_backends(pool)}
    await backends.set_backend(pool, rows[first.url].id, draining=True)  # so the next job goes to the second
    await commands.put_command(pool, "slow", workflow=cpu_bound(1536, 31))
    doomed = botapi_bot.inject_text(USERS[0], "/slow on the second host")
    job = await until(lambda: _running_on_host(pool, second), 60, "the job running on the second host")
    await until(lambda: asyncio.to_thread(lambda: second.get_json("/queue")["queue_running"]), 30,
                "the prompt executing on the second host")
    await backends.set_backend(pool, rows[first.url].id, draining=False)
    await asyncio.to_thread(second.stop, signal.SIGKILL)  # no cleanup: its lease must run out

    await botapi_bot.wait_for_call("sendDocument", timeout=120, where=replies_to(doomed))
    (finished,) = [row for row in await until(lambda: _ended(pool, len(requests) + 1), 20, "the job recorded")
                   if row["id"] == job["id"]]
    assert (finished["status"], finished["attempts"], finished["backend"]) == ("succeeded", 2, first.url)
    assert host_of(finished, first, second) == "first"
    assert len([c for c in botapi_bot.outbox if c.method == "sendDocument" and replies_to(doomed)(c)]) == 1


async def _running_on_host(pool, server):
    return next((job for job in await job_rows(pool)
                 if job["status"] == "running" and f":{server.pid}:" in (job["worker"] or "")), None)


async def _ended(pool, count: int):
    rows = await job_rows(pool)
    ended = [job for job in rows if job["status"] in ("succeeded", "failed", "cancelled")]
    return rows if len(rows) == count and len(ended) == count else None
