"""What of a job's outputs reached the chat: a row per output, written before its send.

The Bot API has no idempotency key, so an output whose send has a row is never sent again:
exactly once where Telegram answers, at most once where it does not (see 0006_deliveries.sql).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .db import Db, acquire, query
from .errors import StoreError


class NotRunning(StoreError):
    """The job is no longer running for this worker (cancelled, or its lease lost): send nothing."""


class Earlier(NamedTuple):
    """An earlier send of the output: ``record`` when it is known to be sent, else None."""

    record: dict[str, Any] | None


async def begin(db: Db, job_id: int, output: str, worker: str) -> Earlier | None:
    """Record that ``output`` is being sent; None if ``worker`` may send it now, else its earlier send.

    :raises NotRunning: the job is not ``worker``'s running job any more.
    """
    async with acquire(db) as conn, conn.transaction():
        if await conn.fetchval(query("begin_delivery"), job_id, output, worker) is not None:
            return None
        row = await conn.fetchrow(query("get_delivery"), job_id, output)
    if row is None:
        raise NotRunning(f"job {job_id} is not running for {worker}")
    return Earlier(row["record"] if row["status"] == "sent" else None)


async def complete(db: Db, job_id: int, output: str, record: dict[str, Any]) -> None:
    """The chat took ``output``: keep what it answered."""
    async with acquire(db) as conn:
        await conn.execute(query("complete_delivery"), job_id, output, record)


async def drop(db: Db, job_id: int, output: str) -> None:
    """The send failed for sure: a later run may send ``output`` again."""
    async with acquire(db) as conn:
        await conn.execute(query("drop_delivery"), job_id, output)
