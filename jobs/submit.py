"""Submit a job: the one use case behind a command, ``/bench`` and ``POST /courier/benchmarks/run``.

The transaction only upserts the user (locking their row, so one user's submissions are
counted one at a time and the cap holds under a flood), checks the cap and enqueues; it
commits, waking the dispatchers, before any reply. Replies wait for Telegram's rate limit
holding neither a pooled connection nor the lock. The "Queued" reply becomes the job's status
message only if the dispatcher has not posted one first; a late "Queued" is deleted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from ..store import jobs, users
from .ports import ChatError


async def submit(pool, *, user_id: int, chat_id: int, command: str, params: dict,
                 post_status: Callable[[int], Awaitable[int]], delete_status: Callable[[int], Awaitable[object]],
                 profile: tuple = (None, None, None), reply_to_message_id: int | None = None,
                 max_active: int | None = None,
                 refuse: Callable[[int], Awaitable[object]] | None = None) -> jobs.Enqueued | None:
    """Queue a job for ``user_id`` unless they already have ``max_active`` jobs (None: no cap).

    ``post_status(position)`` sends the status reply and returns its message id;
    ``delete_status(message_id)`` removes a reply that came too late (best effort);
    ``refuse(count)`` tells the user they are at the cap (then nothing is queued: None).
    ``profile`` is (username, first name, language) for the user row. A status reply that
    fails cancels the job, and its error propagates.
    """
    queued = pending = None
    async with pool.acquire() as conn, conn.transaction():
        await users.upsert_user(conn, user_id, *profile)
        if max_active is not None:
            pending = await jobs.count_active(conn, user_id)
        if pending is None or pending < max_active:
            queued = await jobs.enqueue(conn, user_id=user_id, chat_id=chat_id, command=command, params=params,
                                        reply_to_message_id=reply_to_message_id)
    if queued is None:
        await refuse(pending)
        return None
    try:
        message_id = await post_status(queued.position)
    except Exception:
        await jobs.cancel_job(pool, queued.job_id, reason="status reply failed")
        raise
    if await jobs.adopt_status_message(pool, queued.job_id, message_id) != message_id:
        with contextlib.suppress(ChatError):  # the dispatcher's status message came first
            await delete_status(message_id)
    return queued
