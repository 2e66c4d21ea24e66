"""ComfyUI backends jobs can run on, and whether they answered lately."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .db import Db, acquire, query


@dataclass(frozen=True)
class Backend:
    id: int
    url: str
    name: str
    enabled: bool
    created_at: datetime
    last_seen_at: datetime | None
    last_error: str | None


async def upsert_backend(db: Db, url: str, *, name: str = "") -> Backend:
    """Register a backend by URL, or rename it if known."""
    async with acquire(db) as conn:
        return Backend(**await conn.fetchrow(query("upsert_backend"), url, name))


async def list_backends(db: Db, *, enabled_only: bool = False) -> list[Backend]:
    async with acquire(db) as conn:
        return [Backend(**row) for row in await conn.fetch(query("list_backends"), enabled_only)]


async def set_backend_enabled(db: Db, backend_id: int, enabled: bool) -> Backend | None:
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("set_backend_enabled"), backend_id, enabled)
    return None if row is None else Backend(**row)


async def backend_seen(db: Db, backend_id: int) -> None:
    """The backend answered: stamp last_seen_at and clear last_error."""
    async with acquire(db) as conn:
        await conn.execute(query("backend_seen"), backend_id)


async def backend_error(db: Db, backend_id: int, error: str) -> None:
    async with acquire(db) as conn:
        await conn.execute(query("backend_error"), backend_id, error)


async def delete_backend(db: Db, backend_id: int) -> bool:
    async with acquire(db) as conn:
        return await conn.fetchval(query("delete_backend"), backend_id) is not None
