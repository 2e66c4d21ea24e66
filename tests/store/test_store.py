"""Store.open: the embedded default, an external URL, and a database that is not there."""

import pytest

from comfyui_courier.core.config import Secret, Settings
from comfyui_courier.store import DatabaseUnavailable, Store, StoreError, embedded
from comfyui_courier.store.migrate import migrations
from comfyui_courier.store.pool import redact


async def test_embedded_by_default_and_close_stops_it(pg_data_dir):
    store = await Store.open(Settings(), pg_data_dir)
    try:
        assert store.embedded is not None and store.embedded.started
        assert store.embedded.pgdata == (pg_data_dir / "postgres").resolve()  # as root: its link's target
        assert await store.ping() > 0
        async with store.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM courier_migrations") == len(migrations())
    finally:
        await store.close()
    assert embedded.postmaster(store.embedded.pgdata) is None

    reopened = await Store.open(Settings(), pg_data_dir)  # warm: the data is there, nothing to apply
    try:
        assert reopened.embedded.started
        assert await reopened.ping() > 0
    finally:
        await reopened.close()


async def test_external_url(pg_database, tmp_path):
    store = await Store.open(Settings(database_url=Secret(pg_database)), tmp_path)
    try:
        assert store.embedded is None
        assert await store.ping() > 0
        assert not (tmp_path / "postgres").exists()
    finally:
        await store.close()


async def test_unreachable_url_names_it_without_the_password(tmp_path):
    url = "postgresql://courier:hunter2@127.0.0.1:1/courier"
    with pytest.raises(DatabaseUnavailable) as caught:
        await Store.open(Settings(database_url=Secret(url)), tmp_path)
    message = str(caught.value)
    assert "hunter2" not in message
    assert "postgresql://courier:***@127.0.0.1:1/courier" in message
    assert isinstance(caught.value, StoreError) and isinstance(caught.value.__cause__, OSError)


async def test_ping_after_close_raises_store_error(store):
    await store.pool.close()
    with pytest.raises(StoreError):
        await store.ping()


@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:pw@h:5/db", "postgresql://u:***@h:5/db"),
    ("postgresql://u@h/db?password=pw&sslmode=require", "postgresql://u@h/db?password=***&sslmode=require"),
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("postgresql://u:pw@[oops/db", "<unparsable database URL>"),
])
def test_redact(url, shown):
    assert redact(url) == shown
