"""``is_outage`` tells a database that cannot be reached from a query the database refused and
from a connection refused by something else (a backend). Real asyncpg against real PostgreSQL."""

import asyncio

import asyncpg
import pytest

from comfyui_courier.store import StoreError
from comfyui_courier.store.db import acquire
from comfyui_courier.store.errors import is_outage
from comfyui_courier.tests.fixtures.comfyui import free_port


async def test_no_server_behind_the_url_is_an_outage(tmp_path):
    with pytest.raises(OSError) as raised:
        await asyncpg.connect(f"postgresql://postgres@/x?host={tmp_path}&port=5432")
    assert is_outage(raised.value)


async def test_a_connection_lost_mid_session_is_an_outage(pg_database):
    conn = await asyncpg.connect(pg_database)
    killer = await asyncpg.connect(pg_database)
    try:
        await killer.execute("SELECT pg_terminate_backend($1)", conn.get_server_pid())
        with pytest.raises(StoreError) as raised:
            async with acquire(conn) as same:
                await same.fetchval("SELECT 1")
        assert is_outage(raised.value)
    finally:
        await killer.close()
        conn.terminate()


async def test_a_refused_query_is_no_outage(pg_database):
    conn = await asyncpg.connect(pg_database)
    try:
        with pytest.raises(StoreError) as raised:
            async with acquire(conn) as same:
                await same.fetchval("SELECT $1::jsonb", '"\\u0000"')  # jsonb takes no NUL
        assert not is_outage(raised.value)
    finally:
        await conn.close()


async def test_a_backend_refusing_the_connection_is_no_outage():
    with pytest.raises(OSError) as raised:
        await asyncio.open_connection("127.0.0.1", free_port())
    assert not is_outage(raised.value)
