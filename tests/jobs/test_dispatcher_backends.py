"""The dispatcher over the backends table, with the bot on the Bot API emulator, real PostgreSQL
and transcript-faithful ComfyUI backends (the fake can refuse websockets, which a real one cannot
be made to do): health checks stop and resume claims, a job whose backend keeps failing it ends
with a clear reason once out of attempts, and admins drain backends by route and by command.
"""

import pytest
from aiohttp import ClientSession

from comfyui_courier.core import i18n
from comfyui_courier.jobs import backends as backend_health
from comfyui_courier.store import backends
from comfyui_courier.tests.server_routes.helpers import TOKEN, Api, serve_routes
from comfyui_courier.tests.support.courier import replies_to, running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import job_rows, until

ADMIN, USER = 111, 222
DEAD = "http://127.0.0.1:1"  # nothing listens there


@pytest.fixture(autouse=True)
def quick_checks(monkeypatch):
    monkeypatch.setattr(backend_health, "INTERVAL_S", 0.3)


@pytest.fixture
async def fakes():
    async with FakeComfyUI(steps=0) as first, FakeComfyUI(steps=0) as second:
        yield first, second


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, fakes, tmp_path):
    first, second = fakes
    async with running_courier(botapi, botapi_bot, pg_database, first.url, tmp_path,
                               COURIER_BACKENDS=f"{first.url},{second.url},{DEAD}",
                               COURIER_ALLOWED_USERS=f"{ADMIN},{USER}", COURIER_ADMIN_USERS=f"{ADMIN}",
                               COURIER_ADMIN_TOKEN=TOKEN) as service:
        yield service


@pytest.fixture
async def routes(courier):
    """The /courier routes of ``courier``, served."""
    runner, url, _ = await serve_routes(lambda url: courier)
    async with ClientSession(trust_env=False) as http:
        yield Api(url, courier, http)
    await runner.cleanup()


async def state(courier, url: str) -> backends.Backend:
    (row,) = await backends.list_backends(courier.store.pool, [url])
    return row


@pytest.mark.timeout(60)
async def test_health_checks_mark_a_dead_backend_down_and_a_lost_one_up_again(courier, fakes):
    first, _ = fakes
    dead = await state(courier, DEAD)  # checked before the first claim
    assert not dead.healthy and "not reachable" in dead.last_error and dead.last_seen_at is None
    assert (await state(courier, first.url)).healthy
    await backends.record_check(courier.store.pool, first.url, error="lost a job")  # as a worker does
    await until(lambda: _healthy(courier, first.url), 10, "first backend healthy again")


async def _healthy(courier, url):
    return (await state(courier, url)).healthy


@pytest.mark.timeout(90)
async def test_a_job_its_backends_keep_losing_fails_clearly_once_out_of_attempts(courier, fakes, botapi_bot):
    for fake in fakes:
        fake.refuse_websockets = True  # up for the health check, lost for every job
    request = botapi_bot.inject_text(USER, "/demo hello")
    reason = i18n.text("en", "backend_gave_up", attempts=3)
    final = await botapi_bot.wait_for_call("editMessageText", timeout=60,
                                           where=lambda c: reason in (c.params.get("text") or ""))
    assert final.params["text"] == i18n.text("en", "failed", name="demo", reason=reason)
    (job,) = await job_rows(courier.store.pool)
    assert (job["status"], job["attempts"], job["error"]) == ("failed", 3, reason)
    assert not [c for c in botapi_bot.outbox if c.method == "sendDocument" and replies_to(request)(c)]
    said = [c.params.get("text") for c in botapi_bot.outbox if c.method == "editMessageText"]
    assert i18n.text("en", "backend_retrying") in said  # the user heard about the retries


@pytest.mark.timeout(60)
async def test_admins_drain_and_undrain_a_backend_by_command(courier, fakes, botapi_bot):
    first, _ = fakes
    row = await state(courier, first.url)
    botapi_bot.inject_text(USER, "/backends")
    refusal = i18n.text("en", "admin_only", name="backends")
    await botapi_bot.wait_for_call("sendMessage", timeout=10, where=lambda c: c.params.get("text") == refusal)

    botapi_bot.inject_text(ADMIN, "/backends")
    listing = await botapi_bot.wait_for_call("sendMessage", timeout=10, where=lambda c: first.url in c.params["text"])
    assert i18n.text("en", "backends_line", id=row.id, url=first.url, state=i18n.text("en", "backend_ready"),
                     running=0, capacity=row.capacity) in listing.params["text"]
    assert i18n.text("en", "backend_down") in listing.params["text"]  # the dead one

    botapi_bot.inject_text(ADMIN, f"/backends drain {row.id}")
    drained = i18n.text("en", "backend_drained", id=row.id, running=0)
    await botapi_bot.wait_for_call("sendMessage", timeout=10, where=lambda c: c.params.get("text") == drained)
    assert (await state(courier, first.url)).draining
    botapi_bot.inject_text(ADMIN, f"/backends undrain {row.id}")
    undrained = i18n.text("en", "backend_undrained", id=row.id)
    await botapi_bot.wait_for_call("sendMessage", timeout=10, where=lambda c: c.params.get("text") == undrained)
    assert not (await state(courier, first.url)).draining

    for text, key in ((f"/backends drain {row.id} now", "backends_usage"), ("/backends melt 1", "backends_usage"),
                      ("/backends drain 99999", "backend_unknown")):
        botapi_bot.inject_text(ADMIN, text)
        wanted = i18n.text("en", key, id=99999)
        await botapi_bot.wait_for_call("sendMessage", timeout=10, where=lambda c, w=wanted: c.params.get("text") == w)


@pytest.mark.timeout(60)
async def test_a_drained_backend_finishes_its_job_and_takes_no_new_one(courier, fakes, routes, botapi_bot):
    first, second = fakes
    api = routes
    rows = {row.url: row for row in await backends.list_backends(courier.store.pool)}
    status, reply, _ = await api.send("PATCH", f"/courier/backends/{rows[first.url].id}", json={"draining": True},
                                      token=None)
    assert status in (401, 403)  # an admin route
    status, reply, _ = await api.send("PATCH", f"/courier/backends/{rows[second.url].id}", json={"draining": True})
    assert status == 200 and reply["backend"]["draining"] is True
    first.pause()  # the job holds first while it is drained
    held = botapi_bot.inject_text(USER, "/demo held")
    await until(lambda: _running_on(courier, first.url), 20, "the job running on the first backend")
    status, reply, _ = await api.send("PATCH", f"/courier/backends/{rows[first.url].id}", json={"draining": True})
    assert (status, reply["backend"]["draining"], reply["backend"]["running"]) == (200, True, 1)
    await api.send("PATCH", f"/courier/backends/{rows[second.url].id}", json={"draining": False})
    second.pause()
    after = botapi_bot.inject_text(ADMIN, "/demo after")
    await until(lambda: _running_on(courier, second.url), 20, "the next job running on the second backend")
    first.resume()
    await botapi_bot.wait_for_call("sendDocument", timeout=20, where=replies_to(held))  # finished where it ran
    second.resume()
    await botapi_bot.wait_for_call("sendDocument", timeout=20, where=replies_to(after))
    done = await until(lambda: _all_ended(courier), 10, "both jobs recorded")
    assert [(job["backend"], job["status"], job["attempts"]) for job in done] == [
        (first.url, "succeeded", 1), (second.url, "succeeded", 1)]

    status, reply, _ = await api.get("/courier/backends")
    listed = {entry["url"]: entry["state"] for entry in reply["backends"]}
    assert (listed[first.url]["draining"], listed[first.url]["running"], listed[DEAD]["healthy"]) == (True, 0, False)
    for body, code in (({}, 400), ({"capacity": 0}, 400), ({"draining": "yes"}, 400), ({"size": 1}, 400)):
        status, _, _ = await api.send("PATCH", f"/courier/backends/{rows[first.url].id}", json=body)
        assert status == code, body
    status, reply, _ = await api.send("PATCH", "/courier/backends/99999", json={"capacity": 2})
    assert (status, reply["error"]["code"]) == (404, "no_such_backend")


async def _running_on(courier, url):
    return any(job["status"] == "running" and job["backend"] == url for job in await job_rows(courier.store.pool))


async def _all_ended(courier):
    rows = await job_rows(courier.store.pool)
    return rows if all(job["status"] in ("succeeded", "failed", "cancelled") for job in rows) else None
