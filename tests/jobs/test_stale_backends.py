"""A backend of an earlier run (another port, the same database, long gone) is marked down: no host
serves it and none has seen it answer for 10 minutes, so it takes no job, ``/bench … @it`` included,
and ``/backends`` says why (issue 21, item 3). A backend another host still checks stays as it is.
Real python-telegram-bot on the Bot API emulator, real PostgreSQL, the fake ComfyUI."""

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.store import backends as backend_table
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(90)

ADMIN = 2111
GONE = "http://127.0.0.1:1"  # an earlier run's ComfyUI
ELSEWHERE = "http://10.0.0.7:8188"  # another host's, checked a minute ago


async def test_a_backend_no_host_serves_is_marked_down_takes_no_bench_and_backends_says_why(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(ADMIN), COURIER_ADMIN_USERS=str(ADMIN)) as courier:
        pool = courier.store.pool
        async with pool.acquire() as conn:
            gone = await conn.fetchval(
                "INSERT INTO courier_backends (url, created_at, last_seen_at, checked_at) "
                "VALUES ($1, now() - interval '2 days', now() - interval '11 minutes', "
                "now() - interval '11 minutes') RETURNING id", GONE)
            await conn.execute("INSERT INTO courier_backends (url, last_seen_at, checked_at) "
                               "VALUES ($1, now() - interval '1 minute', now() - interval '1 minute')", ELSEWHERE)

        async def marked_down():
            rows = {b.url: b for b in await backend_table.list_backends(pool)}
            return rows if not rows[GONE].healthy else None

        rows = await until(marked_down, 30, "stale backend marked down")
        assert rows[GONE].last_error == backend_table.STALE
        assert rows[ELSEWHERE].healthy and rows[fake_comfy.url].healthy

        stale = i18n.text("en", "backend_stale", minutes=10)
        botapi_bot.inject_text(ADMIN, "/backends")
        listing = await botapi_bot.wait_for_call("sendMessage", timeout=15,
                                                 where=lambda call: f"#{gone} " in (call.params.get("text") or ""))
        assert f"#{gone} {GONE}: {stale}" in listing.params["text"], listing.params["text"]
        assert "10.0.0.7:8188: " + i18n.text("en", "backend_ready") in listing.params["text"]

        botapi_bot.inject_text(ADMIN, f"/bench demo 1 @{gone}")
        refused = await botapi_bot.wait_for_call(
            "sendMessage", timeout=15, where=lambda call: f"#{gone} ({GONE})" in (call.params.get("text") or ""))
        assert refused.params["text"] == i18n.text("en", "bench_backend_off", id=gone, url=GONE, state=stale)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM courier_jobs") == 0
