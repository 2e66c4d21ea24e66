"""Submit a job: the one transaction behind a command, ``/bench`` and ``POST /courier/benchmarks/run``.

Upserting the user locks their row, so one user's submissions are queued one at a time (the
cap holds under a flood). The status reply is posted inside the transaction: the job becomes
visible (and dispatchers are notified) only once the chat has its status message, and no later
UPDATE races a dispatcher's SKIP LOCKED claim. A reply that fails rolls the job back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

from ..store import access, jobs, users


@dataclasses.dataclass(frozen=True)
class Quota:
    """Jobs per hour and per 24 hours (0: no limit); ``refuse(spent)`` tells the user that the
    ``"hour"`` or ``"day"`` quota is spent."""

    per_hour: int
    per_day: int
    refuse: Callable[[str], Awaitable[object]]


async def submit(pool, *, user_id: int, chat_id: int, command: str, params: dict,
                 post_status: Callable[[int], Awaitable[int]], profile: tuple = (None, None, None),
                 reply_to_message_id: int | None = None, max_active: int | None = None,
                 refuse: Callable[[int], Awaitable[object]] | None = None,
                 quota: Quota | None = None) -> jobs.Enqueued | None:
    """Queue a job for ``user_id`` unless they already have ``max_active`` jobs (None: no cap) or have
    spent their ``quota`` (None: no quota; the job counts against it only if it is queued).

    ``post_status(position)`` sends the status reply and returns its message id;
    ``refuse(count)`` tells the user they are at the cap (then nothing is queued: None).
    ``profile`` is (username, first name, language) for the user row.
    """
    async with pool.acquire() as conn, conn.transaction():
        await users.upsert_user(conn, user_id, *profile)
        if max_active is not None:
            pending = await jobs.count_active(conn, user_id)
            if pending >= max_active:
                await refuse(pending)
                return None
        if quota is not None:
            spent = await access.take_quota(conn, user_id, quota.per_hour, quota.per_day)
            if spent is not None:
                await quota.refuse(spent)
                return None
        queued = await jobs.enqueue(conn, user_id=user_id, chat_id=chat_id, command=command, params=params,
                                    reply_to_message_id=reply_to_message_id)
        await jobs.set_status_message(conn, queued.job_id, await post_status(queued.position))
    return queued
