"""Versioned migrations: sql/migrations/NNNN_name.sql, applied in order, each once per database."""

from __future__ import annotations

import asyncpg

from .db import SQL_DIR, Db, Queries, acquire
from .errors import MigrationError

query = Queries(__name__)


def migrations() -> list[tuple[str, str]]:
    """(name, sql) of every migration, in order; the name is the file name without ``.sql``."""
    files = sorted((SQL_DIR / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql"))
    return [(f.stem, f.read_text(encoding="utf-8")) for f in files]


async def migrate(db: Db) -> list[str]:
    """Apply the pending migrations; returns their names.

    All of them run in one transaction under an advisory lock, so processes that migrate at the
    same time wait for each other and only the first applies anything.
    """
    known = migrations()
    async with acquire(db) as conn, conn.transaction():
        await conn.execute(query("lock_migrations"))
        await conn.execute(query("create_migrations_table"))
        applied = {row["name"] for row in await conn.fetch(query("applied_migrations"))}
        unknown = applied - {name for name, _ in known}
        if unknown:
            raise MigrationError(f"the database has migrations this Courier does not know: "
                                 f"{', '.join(sorted(unknown))}; upgrade Courier")
        pending = [(name, sql) for name, sql in known if name not in applied]
        for name, sql in pending:
            try:
                await conn.execute(sql)
            except asyncpg.PostgresError as exc:
                raise MigrationError(f"migration {name} failed: {exc}") from exc
            await conn.execute(query("record_migration"), name)
    return [name for name, _ in pending]
