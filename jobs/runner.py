"""What a job runner gets, and the error it raises for the user.

A runner runs one kind of job (``job.params["kind"]``; a prompt job has none) on the backend
its worker claimed it for, and returns the job's result record. The dispatcher keeps the
registry (``dispatcher.RUNNERS``) and everything around a run: lease, timeout, cancel, outcome.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable

from ..core.config import Settings
from ..store import deliveries
from .comfy.client import ComfyClient
from .handoff import Handoff
from .ports import ChatSink, DeliveryFailed, DeliveryUnconfirmed, StatusMessage


class JobError(Exception):
    """A job cannot run; the message is for the user, already in their language."""


@dataclasses.dataclass(frozen=True)
class JobRun:
    """One claimed job on its backend: ``prompt_id`` is the id to queue its (first) prompt under."""

    job: object  # store.jobs.Job
    client: ComfyClient
    prompt_id: str
    status: StatusMessage
    sink: ChatSink
    pool: object
    settings: Settings
    say: Callable[..., str]  # localized text in the job's language
    handoff: Handoff  # where nodes of this process hand the job its result files
    left_backend: Callable[[], None] = lambda: None
    """Call once the job's prompts have left the backend (before delivering what they made): its
    slot goes to the next job, so the backend runs that one while this one talks to the chat, and
    the job's time limit (``COURIER_JOB_TIMEOUT_S``) no longer runs: its delivery has its own."""


Runner = Callable[[JobRun], Awaitable[dict]]


def elapsed_s(job) -> float:
    """Seconds since the job was queued: what "Done in" says (the queue and every attempt count)."""
    return (datetime.datetime.now(datetime.UTC) - job.created_at).total_seconds()


async def send_once(run: JobRun, output: str, send: Callable[[], Awaitable[dict]]) -> dict | None:
    """``await send()`` unless an earlier run of the job sent ``output`` or may have: as ``send_each_once``."""
    async def listed(fresh: list[int]) -> list[dict]:
        return [await send()]

    (record,) = await send_each_once(run, [output], listed)
    return record


async def send_each_once(run: JobRun, outputs: list[str],
                         send: Callable[[list[int]], Awaitable[list[dict]]]) -> list[dict | None]:
    """``await send(fresh)`` for the outputs (indexes into ``outputs``) that no earlier run of the job
    sent or may have (see ``store.deliveries``); per output, what the chat answered or the earlier
    record, None if nobody knows.

    :raises DeliveryFailed: they did not go (a later run may send them).
    :raises deliveries.NotRunning: the job was cancelled or its lease lost: nothing is sent.
    """
    job = run.job
    earlier = [await deliveries.begin(run.pool, job.id, output, job.worker) for output in outputs]
    fresh = [i for i, before in enumerate(earlier) if before is None]
    try:
        sent = await send(fresh) if fresh else []
    except DeliveryUnconfirmed:  # their rows stay "sending": never sent again
        sent = [None] * len(fresh)
    except DeliveryFailed:
        for i in fresh:
            await deliveries.drop(run.pool, job.id, outputs[i])
        raise
    records = [before.record if before is not None else None for before in earlier]
    for i, record in zip(fresh, sent, strict=True):
        if record is not None:
            await deliveries.complete(run.pool, job.id, outputs[i], record)
        records[i] = record
    return records
