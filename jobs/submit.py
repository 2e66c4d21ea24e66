"""Submit a job: the one use case behind a command, ``/bench`` and ``POST /courier/benchmarks/run``.

The job is queued in one statement (``store.jobs.submit``: the user's row, the per-user cap under
the user's row lock, the job, the update inbox, the wake-up), committed before any reply.
A command's job is acknowledged by its chat's queue message (``bot/queue_message.py``); ``announce``
sends a reply of its own afterwards where one says more (``/bench``, ``POST /courier/benchmarks/run``),
in a task of its own, so replies wait for Telegram's rate limit holding neither a pooled connection,
nor the lock, nor one of the bot's concurrent-update slots. That reply becomes the job's status
message only if the dispatcher has not posted one first.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable

from ..core.logs import get_logger
from ..store import jobs
from .ports import ChatError, DeliveryUnconfirmed

log = get_logger("submit")


@dataclasses.dataclass(frozen=True)
class Quota:
    """Jobs per hour and per 24 hours (0: no limit); ``refuse(spent)`` tells the user that the
    ``"hour"`` or ``"day"`` quota is spent."""

    per_hour: int
    per_day: int
    refuse: Callable[[str], Awaitable[object]]


async def submit(pool, *, user_id: int, chat_id: int, command: str, params: dict,
                 profile: tuple = (None, None, None), reply_to_message_id: int | None = None,
                 max_active: int | None = None, update: tuple[int, int, int] | None = None,
                 refuse: Callable[[int], Awaitable[object]] | None = None,
                 quota: Quota | None = None) -> int | None:
    """Queue a job for ``user_id`` unless they already have ``max_active`` jobs (None: no cap), have
    spent their ``quota`` (None: no quota; the job counts against it only if it is queued), or
    ``update`` (bot id, update id, part: the Telegram update asking for it, and which of the jobs it
    asks for this is) was handled before.

    Returns the job's id once it is committed; ``announce`` then tells the chat. ``refuse(count)``
    tells the user they are at the cap (then nothing is queued: None). A duplicate update gets
    no reply: its first delivery had one. ``profile`` is (username, first name, language) for
    the user row.
    """
    submitted = await jobs.submit(pool, user_id=user_id, chat_id=chat_id, command=command, params=params,
                                  profile=profile, reply_to_message_id=reply_to_message_id,
                                  max_active=max_active, update=update,
                                  quota=(quota.per_hour, quota.per_day) if quota is not None else None)
    if submitted.duplicate:
        log.info("update %s of bot %s was handled before: nothing queued", update[1], update[0])
    elif submitted.spent is not None:
        await quota.refuse(submitted.spent)
    elif submitted.job_id is None:
        await refuse(submitted.active)
    return submitted.job_id


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
    except DeliveryUnconfirmed:  # it may be in the chat: the job stays, and its run posts a status of its own
        log.info("job %s: Telegram did not confirm its status reply", job_id)
        return position
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
