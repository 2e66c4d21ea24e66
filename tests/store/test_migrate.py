"""Migrations: once per database, safe to run concurrently, and the same schema as schema.sql."""

import asyncio
import re

import pytest

from comfyui_courier.store import MigrationError, jobs
from comfyui_courier.store.db import SQL_DIR, parse
from comfyui_courier.store.migrate import migrate, migrations
from comfyui_courier.store.migrate import query as migration_query
from comfyui_courier.store.pool import connect
from comfyui_courier.tests.support.postgres import dsn_for

ALL = [name for name, _ in migrations()]

# One row per schema object we own, in a form that does not depend on how it was created.
CATALOG = """
SELECT 'column', table_name || '.' || column_name,
       concat_ws(' ', data_type, is_nullable, column_default)
FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL
SELECT 'constraint', conrelid::regclass || '.' || conname, pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'index', indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL
SELECT 'view', viewname, definition FROM pg_views WHERE schemaname = 'public'
UNION ALL
SELECT 'function', p.oid::regprocedure::text, pg_get_functiondef(p.oid)
FROM pg_proc p WHERE pronamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger', tgrelid::regclass || '.' || tgname, pg_get_triggerdef(oid)
FROM pg_trigger WHERE NOT tgisinternal
UNION ALL
SELECT 'sequence', sequencename, concat_ws(' ', data_type, start_value, increment_by)
FROM pg_sequences WHERE schemaname = 'public'
"""


async def catalog(conn) -> set[tuple[str, str, str]]:
    rows = await conn.fetch(CATALOG)
    return {tuple(row) for row in rows if "courier_migrations" not in row[1]}


async def test_migrate_applies_everything_once(pg_database):
    conn = await connect(pg_database)
    try:
        assert await migrate(conn) == ALL
        assert await migrate(conn) == []
        assert [r["name"] for r in await conn.fetch("SELECT name FROM courier_migrations")] == ALL
    finally:
        await conn.close()


@pytest.mark.timeout(30)
async def test_concurrent_migrations_both_succeed_and_apply_once(pg_database):
    holder, first, second = [await connect(pg_database) for _ in range(3)]
    try:
        # Hold the migration lock so that both migrators are provably waiting on it together.
        await holder.execute("SELECT pg_advisory_lock(hashtext('courier_migrations'))")
        racing = asyncio.gather(migrate(first), migrate(second))
        while await holder.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") < 2:
            await asyncio.sleep(0.01)
        await holder.execute("SELECT pg_advisory_unlock(hashtext('courier_migrations'))")
        results = await racing
        assert sorted(results) == [[], ALL]
        assert await holder.fetchval("SELECT count(*) FROM courier_migrations") == len(ALL)
    finally:
        for conn in (holder, first, second):
            await conn.close()


async def test_schema_sql_matches_the_migrations(pg_database, _pg_embedded):
    migrated = await connect(pg_database)
    from_schema = await connect(_pg_embedded.dsn)
    scratch = "courier_schema_sql"
    try:
        await from_schema.execute(f"CREATE DATABASE {scratch}")
        built = await connect(dsn_for(_pg_embedded, scratch))
        try:
            await built.execute((SQL_DIR / "schema.sql").read_text())
            await migrate(migrated)
            expected, actual = await catalog(built), await catalog(migrated)
        finally:
            await built.close()
        assert expected, "schema.sql created nothing"
        assert sorted(actual - expected) == [] and sorted(expected - actual) == []
    finally:
        await from_schema.execute(f"DROP DATABASE IF EXISTS {scratch} WITH (FORCE)")
        await from_schema.close()
        await migrated.close()


async def test_a_database_newer_than_the_code_is_refused(pg_database):
    conn = await connect(pg_database)
    try:
        await migrate(conn)
        await conn.execute("INSERT INTO courier_migrations (name) VALUES ('9999_future')")
        with pytest.raises(MigrationError, match="9999_future"):
            await migrate(conn)
    finally:
        await conn.close()


def named_queries() -> dict[str, str]:
    """Every named query of every query module's file (sql/<module>.sql), by file and name."""
    return {f"{path.stem}.{name}": sql.text for path in sorted(SQL_DIR.glob("*.sql")) if path.name != "schema.sql"
            for name, sql in parse(path).items()}


async def test_every_named_query_is_valid_sql(store):
    async with store.pool.acquire() as conn:
        for name, sql in named_queries().items():
            try:
                await conn.prepare(sql)
            except Exception as exc:
                pytest.fail(f"query {name}: {exc}")


def _functions_made_by(sql: str) -> set[str]:
    return set(re.findall(r"CREATE (?:OR REPLACE )?FUNCTION (\w+)\(", sql))


async def test_no_migration_drops_a_function_an_older_host_calls(pg_database):
    """A host keeps running across a migration: every function any migration made still exists after all."""
    made = set().union(*(_functions_made_by(sql) for _, sql in migrations()))
    assert {"courier_submit", "courier_take_quota", "courier_submit_v1", "courier_take_quota_v1"} <= made
    conn = await connect(pg_database)
    try:
        await migrate(conn)
        present = {row["proname"] for row in await conn.fetch(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'public'::regnamespace")}
    finally:
        await conn.close()
    assert sorted(made - present) == []


async def test_a_host_from_before_0012_keeps_queueing_across_it(pg_database):
    """Its statement, prepared before the migration, calls courier_submit; after it, it still queues a job."""
    before = [(name, sql) for name, sql in migrations() if name < "0012"]
    conn = await connect(pg_database)
    try:
        async with conn.transaction():
            await conn.execute(migration_query("create_migrations_table"))
            for name, sql in before:
                await conn.execute(sql)
                await conn.execute(migration_query("record_migration"), name)
        old_host = await conn.prepare(
            "SELECT job_id, spent FROM courier_submit($1, 'old', 'Old', 'en', $1, 'draw', '{}', 3, NULL, "
            "NULL, 10, 100, NULL, NULL, 0)")
        assert (await old_host.fetchrow(7))["job_id"] is not None
        applied = await migrate(conn)  # 0012 and those after it, while the old host holds its statement
        assert applied[:1] == ["0012_versioned_functions"]
        submit_jobs = jobs.query.bind("submit_jobs", **{name: [value] for name, value in {
            "user_id": 7, "username": "new", "first_name": "New", "language_code": "en", "chat_id": 7,
            "command": "draw", "params": "{}", "max_attempts": 3, "reply_to_message_id": None, "max_active": None,
            "per_hour": 10, "per_day": 100, "bot_id": None, "update_id": None, "part": 0}.items()})
        assert "courier_submit_v1(" in submit_jobs[0]
        old_job = await old_host.fetchrow(7)
        new_job = await conn.fetchrow(*submit_jobs)
        assert old_job["job_id"] is not None and new_job["job_id"] > old_job["job_id"]
        assert await conn.fetchval("SELECT count(*) FROM courier_quota_events WHERE user_id = 7") == 3
    finally:
        await conn.close()
