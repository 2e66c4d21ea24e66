"""Courier's state in PostgreSQL: pool, migrations, and one query module per table family.

``Store.open`` connects to ``COURIER_DATABASE_URL`` (the production path) or, when that is
empty, to an embedded server in ``<data_dir>/postgres``, then migrates. Query modules
(``users``, ``sessions``, ``jobs``, ``commands``, ``backends``, ``benchmarks``) take a
connection or the pool first: ``await jobs.claim(store.pool, worker, lease_s)``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import asyncpg

from ..core.config import Secret, Settings
from ..core.logs import get_logger
from . import embedded
from .db import Queries, acquire
from .embedded import EmbeddedServer
from .errors import DatabaseUnavailable, EmbeddedError, MigrationError, StoreError
from .jobs import JobListener
from .migrate import migrate
from .pool import create_pool

query = Queries(__name__)

__all__ = ["DatabaseUnavailable", "EmbeddedError", "MigrationError", "Store", "StoreError"]

log = get_logger("store")

_CLOSE_TIMEOUT_S = 10.0


class Store:
    """The open database: ``pool``, and ``embedded`` when we run the server ourselves."""

    def __init__(self, pool: asyncpg.Pool, dsn: Secret, embedded_server: EmbeddedServer | None):
        self.pool = pool
        self.embedded = embedded_server
        self._dsn = dsn
        self._supervisor: asyncio.Task | None = None

    @classmethod
    async def open(cls, settings: Settings, data_dir: Path) -> Store:
        """Connect (starting the embedded server if no URL is set) and apply pending migrations."""
        server = None
        if settings.database_url:
            dsn = settings.database_url
        else:
            server = await embedded.start(Path(data_dir) / "postgres")
            dsn = Secret(server.dsn)
        pool = None
        try:
            pool = await create_pool(dsn.reveal())
            applied = await migrate(pool)
        except BaseException:
            if pool is not None:
                await pool.close()
            if server is not None:
                await server.stop()
            raise
        where = f"embedded PostgreSQL in {server.pgdata}" if server is not None else "external PostgreSQL"
        log.info("database ready (%s)%s", where, f", applied migrations {', '.join(applied)}" if applied else "")
        return cls(pool, dsn, server)

    def supervise(self, report: Callable[[str, str], object]) -> None:
        """Start the embedded server again whenever it dies (``EmbeddedServer.supervise``), telling
        ``report(state, reason)``; nothing to do for an external database."""
        if self.embedded is not None and self._supervisor is None:
            self._supervisor = asyncio.create_task(self.embedded.supervise(report), name="courier-postgres-supervisor")

    async def close(self) -> None:
        """Close the pool (forcibly after a grace period), then release the embedded server."""
        if self._supervisor is not None:
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
        try:
            await asyncio.wait_for(self.pool.close(), _CLOSE_TIMEOUT_S)
        except asyncio.TimeoutError:
            log.warning("database connections still busy after %.0f s; terminating them", _CLOSE_TIMEOUT_S)
            self.pool.terminate()
        if self.embedded is not None:
            await self.embedded.stop()

    async def ping(self) -> float:
        """Round-trip seconds of a trivial query; raises StoreError when the database is down."""
        began = time.perf_counter()
        async with acquire(self.pool) as conn:
            await conn.fetchval(query("ping"))
        return time.perf_counter() - began

    async def listen_jobs(self, on_notify: Callable[[], object] | None = None) -> JobListener:
        """A JobListener on a connection of its own; close it when done."""
        return await JobListener.open(self._dsn.reveal(), on_notify)
