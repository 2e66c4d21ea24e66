"""A chat's queue message: which message it is, what it shows, and who sends it now.

One row per chat that has one (``courier_queue_messages``). A host sends it only while it holds
the row (``hold``, renewed with each update while the chat's queue keeps changing; ``settle`` or
``drop`` ends that), so two hosts never post two queue messages for one chat, nor edit one at once.
Each update is one statement (``hold``): under a flood the four it took were most of the bot's CPU.
When the chat has no queued job left, the job that starts last takes the message over as its status
message (``store.jobs.take_status_message``).
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
    starts_in_s: float | None  # from its command's and the jobs' ahead own run times; None: no estimate yet


class Round(NamedTuple):
    """What one update of a chat's queue message starts from (``hold``)."""

    held: Held
    queued: list[QueuedJob]
    slots: int  # prompts the backends taking jobs run at once
    taker: bool  # a running job of the chat still has no status message


async def hold(db: Db, chat_id: int, hold_s: float, limit: int, kept: Held | None = None) -> Round | None:
    """Hold chat ``chat_id``'s queue message for ``hold_s`` seconds and read what it is to show (its
    queued jobs in claim order, at most ``limit``, with when they start), in one statement. ``kept``: this
    host holds it since its last update, which left it so (recorded now). None if another host holds it."""
    message_id, shown = kept if kept is not None else (None, None)
    async with acquire(db) as conn:
        row = await conn.fetchrow(*query.bind("hold_queue_message", chat_id=chat_id, hold_s=float(hold_s), limit=limit,
                                              kept=kept is not None, message_id=message_id, shown=shown))
    if row is None:
        return None
    queued = [QueuedJob(*job) for job in zip(row["ids"], row["commands"], row["languages"], row["reply_tos"],
                                              row["positions"], row["starts_in_s"], strict=True)]
    return Round(Held(row["message_id"], row["shown"]), queued, row["slots"], row["taker"])


async def settle(db: Db, chat_id: int, message_id: int, shown: str) -> None:
    """The chat's queue message is ``message_id`` showing ``shown``; no longer held."""
    async with acquire(db) as conn:
        await conn.execute(query("settle_queue_message"), chat_id, message_id, shown)


async def drop(db: Db, chat_id: int) -> None:
    """The chat has no queue message any more."""
    async with acquire(db) as conn:
        await conn.execute(query("drop_queue_message"), chat_id)
