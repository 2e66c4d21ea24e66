"""The job queue: submit, fair claim with leases, progress, the end states, and wake-ups.

A job is ``queued`` until a worker claims it (``running``, leased until ``lease_until``), then
``succeeded``, ``failed`` or ``cancelled``. A worker that dies simply lets its lease expire, and
``requeue_expired`` puts the job back in the queue (or fails it once out of attempts).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

import asyncpg

from ..core.logs import get_logger
from .db import Db, Grouped, Queries, acquire, columns
from .errors import StoreError
from .pool import connect

query = Queries(__name__)

log = get_logger("store")

CHANNEL = "courier_jobs"


@dataclass(frozen=True)
class Job:
    id: int
    user_id: int
    chat_id: int
    command: str
    params: dict[str, Any]
    status: str
    attempts: int
    max_attempts: int
    lease_until: datetime | None
    worker: str | None
    backend: str | None
    status_message_id: int | None
    reply_to_message_id: int | None
    progress: dict[str, Any] | None
    result: dict[str, Any] | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    position: int | None = None  # place in the queue, 1 = next; set by list_queue for queued jobs
    starts_in_s: float | None = None  # when a queued job starts (list_queue; None: no estimate yet)


class Cancelled(NamedTuple):
    queued: list[Job]  # the jobs cancelled while queued: their "Queued" replies should say so
    running: list[Job]  # jobs that were running: interrupt their prompts on their backends


class Submitted(NamedTuple):
    job_id: int | None
    """None: nothing was queued (a duplicate update, or the user at the cap)."""
    active: int | None
    """The user's queued and running jobs when refused at the cap."""
    spent: str | None
    """``"hour"`` or ``"day"``: the quota that was spent."""
    duplicate: bool
    """The update was handled before."""


async def submit(db: Db, *, user_id: int, chat_id: int, command: str, params: dict[str, Any],
                 profile: tuple = (None, None, None), reply_to_message_id: int | None = None,
                 max_active: int | None = None, update: tuple[int, int, int] | None = None,
                 quota: tuple[int, int] | None = None, max_attempts: int = 3) -> Submitted:
    """Queue a job (``courier_submit_v1``, in one transaction): the user's row refreshed from ``profile``
    (username, first name, language), the per-user cap ``max_active`` checked (None: none), the job
    counted against ``quota`` (jobs per hour, per day; None: none), and ``update`` (bot id, update
    id, part: the job's number among those the update asks for) recorded so that its second delivery
    queues nothing. The dispatchers wake when it commits.

    Through a pool, the jobs submitted while a statement is in flight go together in the next one
    (``db.Grouped``): under a flood of commands, one round trip and one commit queue many jobs."""
    bot_id, update_id, part = update if update is not None else (None, None, 0)
    per_hour, per_day = quota if quota is not None else (None, None)
    username, first_name, language_code = profile
    job = _Submit(user_id=user_id, username=username, first_name=first_name, language_code=language_code,
                  chat_id=chat_id, command=command, params=json.dumps(params), max_attempts=max_attempts,
                  reply_to_message_id=reply_to_message_id, max_active=max_active, per_hour=per_hour,
                  per_day=per_day, bot_id=bot_id, update_id=update_id, part=part)
    return await _submits.call(db, job)


class _Submit(NamedTuple):
    """One job's arguments of ``submit_jobs`` (``courier_submit_v1``'s), by name."""

    user_id: int
    username: str | None
    first_name: str | None
    language_code: str | None
    chat_id: int
    command: str
    params: str  # JSON text
    max_attempts: int
    reply_to_message_id: int | None
    max_active: int | None
    per_hour: int | None
    per_day: int | None
    bot_id: int | None
    update_id: int | None
    part: int


async def _submit_all(db: Db, jobs: list[_Submit]) -> list[Submitted]:
    """One statement for ``jobs``: ``submit_jobs`` unnests one array per argument."""
    async with acquire(db) as conn:
        rows = await conn.fetch(*query.bind("submit_jobs", **columns(_Submit, jobs)))
    return [Submitted(*row) for row in rows]


_submits = Grouped(_submit_all, user=lambda job: job.user_id)


async def queue_position(db: Db, job_id: int) -> int | None:
    """1 for the job claimed next; None unless the job is queued."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("queue_position"), job_id)


async def claim(db: Db, worker: str, lease_s: float, *, backend: str | None = None,
                warm_wait_s: float | None = None) -> Job | None:
    """Take the next job in fair order, leased to ``worker`` for ``lease_s`` seconds; None if none.

    On ``backend`` (a registered URL), only while it takes jobs and only jobs it has the models
    for (see ``claim_job``); without one, any job. With ``warm_wait_s``, warm placement: of the
    chosen user's jobs, one whose model files the backend holds first, and a job whose files
    another backend holds waits for that one up to ``warm_wait_s`` after it was queued.
    """
    wait_s = None if warm_wait_s is None else float(warm_wait_s)
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("claim_job"), worker, float(lease_s), backend, wait_s)
    return _job(row)


async def warm_hold_ends_in(db: Db, warm_wait_s: float) -> float | None:
    """Seconds until a job that warm placement may hold for another backend is free for any; None if
    no queued job is that young (see ``claim``)."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("warm_hold_ends_in"), float(warm_wait_s))


async def claim_delivery(db: Db, worker: str, lease_s: float) -> Job | None:
    """Take over a delivering job whose worker's lease ran out (that host died), leased to ``worker``;
    None if there is none."""
    async with acquire(db) as conn:
        return _job(await conn.fetchrow(query("claim_delivery"), worker, float(lease_s)))


async def extend_lease(db: Db, job_id: int, worker: str, lease_s: float) -> bool:
    """Renew the lease; False if the job is no longer running (or delivering) for ``worker`` (stop working on it)."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("extend_lease"), job_id, worker, float(lease_s)) is not None


async def set_progress(db: Db, job_id: int, progress: dict[str, Any]) -> bool:
    """Record progress of a running job; False if it is not running."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("set_progress"), job_id, progress) is not None


class Adopted(NamedTuple):
    message_id: int | None  # the job's status message; None: no such job
    queue_message: bool  # the job's chat has a queue message (which may be about this job)


async def adopt_status_message(db: Db, job_id: int, message_id: int) -> Adopted:
    """Make ``message_id`` the job's status message unless it has one; returns the one it has.

    Whoever comes first (the "Queued" reply or the dispatcher's progress message) wins; the
    loser's message is redundant.
    """
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("adopt_status_message"), job_id, message_id)
    return Adopted(None, False) if row is None else Adopted(*row)


async def take_status_message(db: Db, job_id: int, worker: str) -> tuple[str, int | None]:
    """Where ``worker`` shows job ``job_id``'s status, decided before anything is posted: ``("edit",
    message_id)`` (the job's own, or the chat's queue message handed over to it), ``("wait", None)``
    (the chat's queue message is being sent: ask again shortly), ``("post", None)`` (post one and
    record it with ``adopt_status_message``) or ``("none", None)`` (not ``worker``'s job: show nothing).
    """
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("take_status_message"), job_id, worker)
    return row["decision"], row["message"]


async def move_status_message(db: Db, job_id: int, message_id: int) -> None:
    """The job's status message is now ``message_id`` (its earlier one is deleted)."""
    async with acquire(db) as conn:
        await conn.execute(query("move_status_message"), job_id, message_id)


async def succeed(db: Db, job_id: int, result: dict[str, Any], *, worker: str | None = None) -> bool:
    """Finish a running job with ``result``; False if it is not running (or not ``worker``'s)."""
    async with acquire(db) as conn:
        done = await conn.fetchval(query("finish_job"), job_id, "succeeded", result, None, worker)
    return done is not None


async def fail(db: Db, job_id: int, error: str, *, worker: str | None = None) -> bool:
    """Fail a running job with ``error``; False if it is not running (or not ``worker``'s)."""
    async with acquire(db) as conn:
        done = await conn.fetchval(query("finish_job"), job_id, "failed", None, error, worker)
    return done is not None


async def release(db: Db, job_id: int, worker: str, reason: str, *, count_attempt: bool = False) -> bool:
    """Put ``worker``'s running job back in the queue (``reason`` is kept in ``error``).

    The attempt counts only with ``count_attempt`` (its backend died under it), not when this
    dispatcher merely stops. False if it was not running for ``worker``.
    """
    async with acquire(db) as conn, conn.transaction():
        released = await conn.fetchval(query("release_job"), job_id, worker, reason, count_attempt) is not None
        if released:
            await wake_dispatchers(conn, str(job_id))
    return released


async def cancel_job(db: Db, job_id: int, *, reason: str | None = None) -> bool:
    """Cancel one queued or running job; False if it had already ended."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("cancel_job"), job_id, reason) is not None


async def withdraw(db: Db, job_id: int, reason: str) -> bool:
    """Cancel a job that is still queued; False if it has started (or ended)."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("withdraw_job"), job_id, reason) is not None


async def cancel_user_jobs(db: Db, user_id: int) -> Cancelled:
    """Cancel all of the user's queued and running jobs.

    Workers of the running ones learn it when extend_lease/set_progress/succeed return False; the
    caller should interrupt their prompts on their backends right away.
    """
    async with acquire(db) as conn:
        rows = await conn.fetch(query("cancel_user_jobs"), user_id)
    previous = {row["id"]: row["previous_status"] for row in rows}
    jobs = [Job(**{k: v for k, v in row.items() if k != "previous_status"}) for row in rows]
    return Cancelled(queued=sorted((job for job in jobs if previous[job.id] == "queued"), key=lambda job: job.id),
                     running=[job for job in jobs if previous[job.id] == "running"])


async def cancel_one_job(db: Db, job_id: int, *, user_id: int | None) -> tuple[Job | None, str | None]:
    """Cancel job ``job_id`` if it is queued or running and ``user_id``'s (anyone's if None).

    Returns (the job, the status it had), or (None, None) if there was no such job to cancel.
    """
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("cancel_one_job"), job_id, user_id)
    if row is None:
        return None, None
    return Job(**{k: v for k, v in row.items() if k != "previous_status"}), row["previous_status"]


class DayCount(NamedTuple):
    day: date
    jobs: int
    failed: int


class CommandStats(NamedTuple):
    command: str
    jobs: int
    failed: int
    median_s: float | None  # of the succeeded jobs, from claim to end


async def jobs_per_day(db: Db, days: int) -> list[DayCount]:
    """Jobs and failures per UTC day over the last ``days`` days, oldest first."""
    async with acquire(db) as conn:
        return [DayCount(*row) for row in await conn.fetch(query("jobs_per_day"), days)]


async def command_stats(db: Db, days: int) -> list[CommandStats]:
    """Per command over the last ``days`` days: jobs, failures, median run time."""
    async with acquire(db) as conn:
        return [CommandStats(*row) for row in await conn.fetch(query("command_stats"), days)]


async def requeue_expired(db: Db) -> list[Job]:
    """Queue again the running jobs whose lease expired, or fail those out of attempts.

    Returns the jobs changed, in their new state; dispatchers are woken if any was queued.
    """
    async with acquire(db) as conn, conn.transaction():
        jobs = [_job(row) for row in await conn.fetch(query("requeue_expired"))]
        if any(job.status == "queued" for job in jobs):
            await wake_dispatchers(conn, "requeued")
    return jobs


async def list_queue(db: Db, *, user_id: int | None = None) -> list[Job]:
    """Running jobs, then queued ones in the order they will be claimed (with ``position``).

    Only ``user_id``'s jobs when given; positions stay those in the whole queue.
    """
    async with acquire(db) as conn:
        return [_job(row) for row in await conn.fetch(query("list_queue"), user_id)]


async def count_active(db: Db, user_id: int) -> int:
    """How many of the user's jobs are queued or running."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("count_active"), user_id)


async def get_job(db: Db, job_id: int) -> Job | None:
    async with acquire(db) as conn:
        return _job(await conn.fetchrow(query("get_job"), job_id))


async def wake_dispatchers(conn: asyncpg.Connection, why: str) -> None:
    """Wake the dispatchers LISTENing on ``CHANNEL`` once ``conn``'s transaction commits (``why``: the payload)."""
    await conn.execute(query("notify_jobs"), why)


def _job(row: asyncpg.Record | None) -> Job | None:
    return None if row is None else Job(**row)


class JobListener:
    """Wake-ups when jobs are queued, from LISTEN on a dedicated connection.

    Pool connections are shared (a LISTEN there would outlive its user), hence the connection of
    its own. Either pass ``on_notify`` (called on each wake-up, e.g. an ``asyncio.Event``'s
    ``set``) or use::

        async with await JobListener.open(dsn) as listener:
            while True:
                while job := await claim(...): ...
                await listener.wait(timeout=30)  # then sweep requeue_expired and claim again
    """

    def __init__(self, conn: asyncpg.Connection, on_notify: Callable[[], object] | None):
        self._conn = conn
        self._on_notify_cb = on_notify
        self._event = asyncio.Event()
        self._lost = False

    @classmethod
    async def open(cls, dsn: str, on_notify: Callable[[], object] | None = None) -> JobListener:
        listener = cls(await connect(dsn), on_notify)
        try:
            async with acquire(listener._conn) as conn:
                await conn.add_listener(CHANNEL, listener._on_notify)
        except BaseException:
            await listener._conn.close()
            raise
        listener._conn.add_termination_listener(listener._on_lost)
        return listener

    async def wait(self, timeout: float | None = None) -> bool:
        """True once a job was queued since the last wait returned; False on timeout."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        if self._lost:
            raise StoreError("the job listener lost its database connection")
        self._event.clear()
        return True

    async def close(self) -> None:
        self._conn.remove_termination_listener(self._on_lost)
        await self._conn.close()

    async def __aenter__(self) -> JobListener:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    def _on_notify(self, *_: object) -> None:
        self._event.set()
        if self._on_notify_cb is not None:
            self._on_notify_cb()

    def _on_lost(self, *_: object) -> None:
        log.warning("the job listener lost its database connection")
        self._lost = True
        self._on_notify()
