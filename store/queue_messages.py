"""A chat's queue message: which message it is, what it shows, and who sends it now.

One row per chat that has one (``courier_queue_messages``). A host sends it only while it holds
the row (``claim``, for a few seconds; ``settle`` or ``drop`` ends that), so two hosts never post
two queue messages for one chat, nor edit one at once. When the chat has no queued job left, the
job that starts last takes the message over as its status message (``store.jobs.take_status_message``).
"""

from __future__ import annotations

from typing import NamedTuple

from .db import Db, Queries, acquire

query = Queries(__name__)


class Held(NamedTuple):
    message_id: int | None  # None: none posted yet
    shown: str | None


class QueuedJob(NamedTuple):
    id: int
    command: str
    language: str | None
    reply_to_message_id: int | None
    position: int


class Estimate(NamedTuple):
    median_s: float | None  # of recent runs; None: none yet
    slots: int  # prompts the backends taking jobs run at once
    taker: bool  # a running job of the chat still has no status message


async def claim(db: Db, chat_id: int, hold_s: float) -> Held | None:
    """Hold chat ``chat_id``'s queue message for ``hold_s`` seconds; None if another host holds it."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("claim_queue_message"), chat_id, float(hold_s))
    return None if row is None else Held(*row)


async def settle(db: Db, chat_id: int, message_id: int, shown: str) -> None:
    """The chat's queue message is ``message_id`` showing ``shown``; no longer held."""
    async with acquire(db) as conn:
        await conn.execute(query("settle_queue_message"), chat_id, message_id, shown)


async def drop(db: Db, chat_id: int) -> None:
    """The chat has no queue message any more."""
    async with acquire(db) as conn:
        await conn.execute(query("drop_queue_message"), chat_id)


async def chat_queue(db: Db, chat_id: int, limit: int) -> list[QueuedJob]:
    """The chat's queued jobs in claim order, at most ``limit``."""
    async with acquire(db) as conn:
        return [QueuedJob(*row) for row in await conn.fetch(query("chat_queue"), chat_id, limit)]


async def estimate(db: Db, chat_id: int) -> Estimate:
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("queue_estimate"), chat_id)
    return Estimate(row["median_s"], row["slots"], row["taker"])
