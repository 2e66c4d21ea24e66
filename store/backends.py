"""ComfyUI backends: the one record of each backend's capacity, health, drain state and models.

Each host's dispatcher registers the backends it serves (``COURIER_BACKENDS``, or its own
ComfyUI) and records its health checks here; the job claim (``claim_job``) reads these rows,
so a drain or a failed check stops claims on every host at once.

What a backend holds loaded (``warm``, for warm placement) is inferred, not asked: the claim writes
the model files of the job it gives the backend, since ComfyUI keeps the last graph's outputs, its
loaded models among them, until another graph replaces them (or memory runs short). That needs no
route in the pack nor a call on the way, works for a backend of any version, and is right whenever
the claim is the only way work reaches it; a restart empties ComfyUI's cache, so a failed health
check clears ``warm`` (a restart between two checks is missed: the next job then loads its model
once, as it would have without warm placement). Asking ComfyUI (``comfy.model_management
.current_loaded_models``) would catch that, at the cost of a route and a call per check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .db import Db, Queries, acquire
from .jobs import wake_dispatchers

query = Queries(__name__)


@dataclass(frozen=True)
class Backend:
    id: int
    url: str
    capacity: int
    healthy: bool
    draining: bool
    models: list[str]
    created_at: datetime
    last_seen_at: datetime | None
    checked_at: datetime | None
    last_error: str | None
    model_kinds: dict[str, list[str]] = field(default_factory=dict)  # kind -> its files (jobs/model_names.py)
    warm: list[str] = field(default_factory=list)  # the model files it holds loaded (claim_job)
    running: int = 0  # jobs running on it now; set by list_backends


async def register_backends(db: Db, urls: list[str], *, capacity: int = 1) -> list[Backend]:
    """Add the backends not yet known, with ``capacity`` (known ones keep their state); their rows,
    in ``urls`` order."""
    async with acquire(db) as conn:
        return [Backend(**await conn.fetchrow(query("register_backend"), url, capacity)) for url in urls]


async def list_backends(db: Db, urls: list[str] | None = None) -> list[Backend]:
    """All backends (only ``urls`` when given), oldest first, with their running job counts."""
    async with acquire(db) as conn:
        return [Backend(**row) for row in await conn.fetch(query("list_backends"), urls)]


async def record_check(db: Db, url: str, *, error: str | None = None, models: list[str] | None = None,
                       kinds: dict[str, list[str]] | None = None) -> bool:
    """Record a health check: healthy unless ``error``; ``models`` replaces the model list when given,
    ``kinds`` the model files by kind.

    True if it has recovered: it was unhealthy before, and is healthy now.
    """
    async with acquire(db) as conn:
        return bool(await conn.fetchval(query("record_check"), url, error, models, kinds))


async def taking_jobs(db: Db) -> list[Backend]:
    """The backends that take jobs now (healthy, not draining), oldest first."""
    return [backend for backend in await list_backends(db) if backend.healthy and not backend.draining]


def model_files(listed: list[Backend]) -> dict[str, set[str]]:
    """kind -> the model files of that kind one of ``listed`` has: what a typed name may mean."""
    found: dict[str, set[str]] = {}
    for backend in listed:
        for kind, names in backend.model_kinds.items():
            found.setdefault(kind, set()).update(names)
    return found


async def model_choices(db: Db) -> dict[str, set[str]]:
    """``model_files`` of the backends taking jobs."""
    return model_files(await taking_jobs(db))


STALE = "stale"
"""``last_error`` of a backend marked down by ``mark_stale``: no host serves it any more."""


async def mark_stale(db: Db, urls: list[str], after_s: float) -> list[str]:
    """Mark down the backends not in ``urls`` that no host has seen answer for ``after_s``; their URLs."""
    async with acquire(db) as conn:
        return [row["url"] for row in await conn.fetch(query("mark_stale_backends"), urls, after_s, STALE)]


async def set_backend(db: Db, backend_id: int, *, draining: bool | None = None,
                      capacity: int | None = None) -> Backend | None:
    """Drain or undrain a backend, or change its capacity; None if there is no such backend.

    Dispatchers are woken, so an undrained backend claims at once.
    """
    async with acquire(db) as conn, conn.transaction():
        row = await conn.fetchrow(query("set_backend"), backend_id, draining, capacity)
        if row is not None:
            await wake_dispatchers(conn, "backends")
    return None if row is None else Backend(**row)
