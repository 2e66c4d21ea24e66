"""What the query modules share: the named SQL of sql/queries.sql and one way to a connection."""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

from .errors import StoreError

Db = asyncpg.Connection | asyncpg.Pool
"""What every query function takes first: a connection (e.g. inside a transaction) or the pool."""

SQL_DIR = Path(__file__).parent / "sql"
_HEADER = re.compile(r"^-- ([a-z0-9_]+) --$", re.MULTILINE)


def query(name: str) -> str:
    """The SQL of the named query in sql/queries.sql."""
    return _queries()[name]


@functools.cache
def _queries() -> dict[str, str]:
    parts = _HEADER.split((SQL_DIR / "queries.sql").read_text(encoding="utf-8"))
    return {name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


@contextlib.asynccontextmanager
async def acquire(db: Db) -> AsyncIterator[asyncpg.Connection]:
    """Yield ``db`` itself, or a connection from it if it is a pool; database errors become StoreError."""
    try:
        if isinstance(db, asyncpg.Pool):
            async with db.acquire() as conn:
                yield conn
        else:
            yield db
    except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as exc:
        raise StoreError(f"database error: {type(exc).__name__}: {exc}") from exc
