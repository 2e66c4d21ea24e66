"""Submit a job: the one use case behind a command, ``/bench`` and ``POST /courier/benchmarks/run``.

The job is queued in one statement (``store.jobs.submit``: the user's row, the per-user cap under
the user's row lock, the job, the update inbox, the wake-up), committed before any reply, and
``submit`` returns what happened (``Queued``, ``Duplicate``, ``AtCap``, ``QuotaSpent``): the
adapter that asked says it in its own words.

A command's job is acknowledged by its chat's queue message (``bot/queue_message.py``); a job whose
reply says more (``/bench``, ``POST /courier/benchmarks/run``) is ``announcing``: the adapter sends
that reply inside the block, in a task of its own, so replies wait for Telegram's rate limit
holding neither a pooled connection, nor the lock, nor one of the bot's concurrent-update slots.
That reply becomes the job's status message only if the dispatcher has not posted one first.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator

from ..core.logs import get_logger
from ..store import jobs
from .ports import ChatError, DeliveryUnconfirmed

log = get_logger("submit")


@dataclasses.dataclass(frozen=True)
class Quota:
    """Jobs per hour and per 24 hours (0: no limit)."""

    per_hour: int
    per_day: int


@dataclasses.dataclass(frozen=True)
class Queued:
    """The job is committed."""

    job_id: int


@dataclasses.dataclass(frozen=True)
class Duplicate:
    """The update was handled before: nothing is queued, and nothing is said (its first delivery was)."""


@dataclasses.dataclass(frozen=True)
class AtCap:
    """The user has ``active`` queued and running jobs, the cap: nothing is queued."""

    active: int


@dataclasses.dataclass(frozen=True)
class QuotaSpent:
    """The ``"hour"`` or ``"day"`` quota is spent: nothing is queued."""

    spent: str


Submission = Queued | Duplicate | AtCap | QuotaSpent


async def submit(pool, *, user_id: int, chat_id: int, command: str, params: dict,
                 profile: tuple = (None, None, None), reply_to_message_id: int | None = None,
                 max_active: int | None = None, update: tuple[int, int, int] | None = None,
                 quota: Quota | None = None) -> Submission:
    """Queue a job for ``user_id`` unless they already have ``max_active`` jobs (None: no cap), have
    spent their ``quota`` (None: no quota; the job counts against it only if it is queued), or
    ``update`` (bot id, update id, part: the Telegram update asking for it, and which of the jobs it
    asks for this is) was handled before. ``profile`` is (username, first name, language) for the
    user row. Returns what happened; a ``Queued`` job is committed.
    """
    submitted = await jobs.submit(pool, user_id=user_id, chat_id=chat_id, command=command, params=params,
                                  profile=profile, reply_to_message_id=reply_to_message_id,
                                  max_active=max_active, update=update,
                                  quota=(quota.per_hour, quota.per_day) if quota is not None else None)
    if submitted.duplicate:
        log.info("update %s of bot %s was handled before: nothing queued", update[1], update[0])
        return Duplicate()
    if submitted.spent is not None:
        return QuotaSpent(submitted.spent)
    if submitted.job_id is None:
        return AtCap(submitted.active)
    return Queued(submitted.job_id)


@dataclasses.dataclass
class Announcement:
    """The "Queued" reply of a committed job, as ``announcing`` sees it."""

    position: int | None
    """The job's place in the queue, to be said; None: it is no longer queued, say nothing (the
    dispatcher posts its status), or the reply failed after the job started."""
    message_id: int | None = None
    """The reply, once the adapter sent it."""
    redundant: bool = False
    """After the block: the dispatcher's status message came first, so the reply is to be deleted."""


@contextlib.asynccontextmanager
async def announcing(pool, job_id: int) -> AsyncIterator[Announcement]:
    """Around the "Queued" reply of committed job ``job_id``: the adapter sends it inside the block
    if ``position`` is not None, and sets ``message_id``; the reply becomes the job's status message
    unless the dispatcher posted one first (then ``redundant``: the adapter deletes it, best effort).

    A reply that may have arrived (``DeliveryUnconfirmed``) leaves the job as it is. A chat that
    refuses it (``ChatError``) cancels the job; any other failure withdraws it unless it has started
    meanwhile (then its own status message stands in: ``position`` None). Either way the error
    propagates if the job is no more.
    """
    announcement = Announcement(await jobs.queue_position(pool, job_id))
    try:
        yield announcement
    except DeliveryUnconfirmed:  # it may be in the chat: the job stays, and its run posts a status of its own
        log.info("job %s: Telegram did not confirm its status reply", job_id)
        return
    except ChatError:
        await jobs.cancel_job(pool, job_id, reason="status reply refused")
        raise
    except Exception:
        if await jobs.withdraw(pool, job_id, "status reply failed"):
            raise
        log.info("job %s started before its status reply failed", job_id)
        announcement.position = None
        return
    if announcement.message_id is not None:
        adopted = await jobs.adopt_status_message(pool, job_id, announcement.message_id)
        announcement.redundant = adopted.message_id != announcement.message_id
