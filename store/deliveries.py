"""What of a job's outputs reached the chat: a row per output, written before its send; and the
files of a job that waits for Telegram (``courier_outbox``), so that any host may send them.

The Bot API has no idempotency key, so an output whose send has a row is never sent again:
exactly once where Telegram answers, at most once where it does not (see 0007_deliveries.sql).
A job whose results Telegram would not take (an outage) is parked as 'delivering' with its files
(0017_delivering.sql): its worker tries them again, and another host takes it over if that one dies.
"""

from __future__ import annotations

import datetime
from typing import Any, NamedTuple

from .db import Db, Queries, acquire, columns
from .errors import StoreError

query = Queries(__name__)


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


class Kept(NamedTuple):
    """A file a delivering job waits to send, as it was rendered."""

    output: str
    filename: str
    subfolder: str
    type: str
    via: str
    data: bytes


async def park(db: Db, job_id: int, worker: str, files: list[Kept]) -> datetime.datetime:
    """Keep the job's ``files`` and mark it delivering (its results wait for Telegram); returns when
    it began to wait.

    :raises NotRunning: the job is not ``worker``'s running job any more.
    """
    async with acquire(db) as conn:
        since = await conn.fetchval(*query.bind("park_job", job_id=job_id, worker=worker, **columns(Kept, files)))
    if since is None:
        raise NotRunning(f"job {job_id} is not running for {worker}")
    return since


async def kept_files(db: Db, job_id: int) -> tuple[list[Kept], datetime.datetime | None]:
    """The files a delivering job waits to send, and when it began to wait (None: it kept none)."""
    async with acquire(db) as conn:
        rows = await conn.fetch(query("outbox_files"), job_id)
    return [Kept(*row[:6]) for row in rows], rows[0]["parked_at"] if rows else None
