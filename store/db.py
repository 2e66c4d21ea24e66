"""What the query modules share: the named SQL of sql/queries.sql and one way to a connection."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncpg

from .errors import StoreError, is_outage

SQL_DIR = Path(__file__).parent / "sql"
_HEADER = re.compile(r"^-- ([a-z0-9_]+) --$", re.MULTILINE)


def query(name: str) -> str:
    """The SQL of the named query in sql/queries.sql."""
    return _queries()[name]


@functools.cache
def _queries() -> dict[str, str]:
    parts = _HEADER.split((SQL_DIR / "queries.sql").read_text(encoding="utf-8"))
    return {name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2], strict=True)}


class Patient:
    """The pool, for one running job: while PostgreSQL is down (restarting), getting a connection is
    tried again until ``deadline()`` (monotonic; when the job's lease would run out), so a result
    rendered meanwhile is recorded once the database is back rather than rendered again.
    ``waiting()`` is called before each wait. Past the deadline the outage is raised as usual."""

    RETRY_S = (0.2, 2.0)  # first and longest wait

    def __init__(self, pool: asyncpg.Pool, deadline: Callable[[], float], waiting: Callable[[], object]):
        self.pool = pool
        self.deadline = deadline
        self.waiting = waiting

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        wait_s = self.RETRY_S[0]
        while True:
            try:
                conn = await self.pool.acquire()
                break
            except Exception as exc:
                if not is_outage(exc) or time.monotonic() + wait_s > self.deadline():
                    raise
            await self.waiting()
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, self.RETRY_S[1])
        try:
            yield conn
        finally:
            await self.pool.release(conn)


Db = asyncpg.Connection | asyncpg.Pool | Patient
"""What every query function takes first: a connection (e.g. inside a transaction) or the pool."""


@contextlib.asynccontextmanager
async def acquire(db: Db) -> AsyncIterator[asyncpg.Connection]:
    """Yield ``db`` itself, or a connection from it if it is a pool; database errors become StoreError."""
    try:
        if isinstance(db, (asyncpg.Pool, Patient)):
            async with db.acquire() as conn:
                yield conn
        else:
            yield db
    except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as exc:
        raise StoreError(f"database error: {type(exc).__name__}: {exc}") from exc
