"""The generated webhook secret: one per bot, the same for every host, even when hosts race."""

import asyncio

import asyncpg
import pytest

from comfyui_courier.store.webhook_secrets import webhook_secret


async def test_the_first_secret_stays_and_each_bot_has_its_own(store):
    first = await webhook_secret(store.pool, 1)
    assert len(first) == 43 and first.replace("-", "").replace("_", "").isalnum()
    assert await webhook_secret(store.pool, 1) == first
    assert await webhook_secret(store.pool, 2) != first


@pytest.mark.timeout(30)
async def test_hosts_racing_an_uncommitted_insert_get_its_secret(store, pg_database):
    blocker, watcher = await asyncpg.connect(pg_database), await asyncpg.connect(pg_database)
    try:
        insert = blocker.transaction()
        await insert.start()
        await blocker.execute("INSERT INTO courier_webhook_secrets (bot_id, secret) VALUES (7, 'the-first-host')")
        racing = asyncio.gather(*(webhook_secret(store.pool, 7) for _ in range(3)))
        # watched from outside the blocker's transaction, which sees pg_stat_activity as it began
        while await watcher.fetchval("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                     "AND datname = current_database()") < 3:
            await asyncio.sleep(0.01)  # polls for the precondition (all three wait on the insert), times nothing
        await insert.commit()
        assert await racing == ["the-first-host"] * 3
    finally:
        await blocker.close()
        await watcher.close()
