"""Submit a job: the one use case behind a command, ``/bench`` and ``POST /courier/benchmarks/run``.

The transaction only upserts the user (locking their row, so one user's submissions are
counted one at a time and the cap holds under a flood), checks the cap and enqueues; it
commits, waking the dispatchers, before any reply. ``announce`` sends the reply afterwards
(the bot in a task of its own), so replies wait for Telegram's rate limit holding neither a
pooled connection, nor the lock, nor one of the bot's concurrent-update slots. The "Queued"
reply becomes the job's status message only if the dispatcher has not posted one first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

from ..store import jobs, users
from ..logs import get_logger
from .ports import ChatError

log = get_logger("submit")


async def submit(pool, *, user_id: int, chat_id: int, command: str, params: dict,
                 profile: tuple = (None, None, None), reply_to_message_id: int | None = None,
                 max_active: int | None = None,
                 refuse: Callable[[int], Awaitable[object]] | None = None) -> int | None:
    """Queue a job for ``user_id`` unless they already have ``max_active`` jobs (None: no cap).

    Returns the job's id once it is committed; ``announce`` then tells the chat. ``refuse(count)``
    tells the user they are at the cap (then nothing is queued: None). ``profile`` is
    (username, first name, language) for the user row.
    """
    job_id = pending = None
    async with pool.acquire() as conn, conn.transaction():
        await users.upsert_user(conn, user_id, *profile)
        if max_active is not None:
            pending = await jobs.count_active(conn, user_id)
        if pending is None or pending < max_active:
            job_id = await jobs.add_job(conn, user_id=user_id, chat_id=chat_id, command=command, params=params,
                                        reply_to_message_id=reply_to_message_id)
    if job_id is None:
        await refuse(pending)
    return job_id


async def announce(pool, job_id: int, post_status: Callable[[int], Awaitable[int]],
                   delete_status: Callable[[int], Awaitable[object]]) -> int | None:
    """Send the "Queued" reply of a committed job, unless it is no longer queued; returns the
    position announced (None: skipped). The reply becomes the job's status message unless the
    dispatcher posted one first, and is deleted then.

    ``post_status(position)`` sends the reply and returns its message id;
    ``delete_status(message_id)`` removes it (best effort). A chat that refuses the reply
    (``ChatError``) cancels the job; any other failure withdraws it unless it has started
    meanwhile (then its own status message stands in: None). Either way the error propagates
    if the job is no more.
    """
    position = await jobs.queue_position(pool, job_id)
    if position is None:  # started (the dispatcher posts the status) or cancelled already
        return None
    try:
        message_id = await post_status(position)
    except ChatError:
        await jobs.cancel_job(pool, job_id, reason="status reply refused")
        raise
    except Exception:
        if await jobs.withdraw(pool, job_id, "status reply failed"):
            raise
        log.info("job %s started before its status reply failed", job_id)
        return None
    if await jobs.adopt_status_message(pool, job_id, message_id) != message_id:
        with contextlib.suppress(ChatError):
            await delete_status(message_id)
    return position
