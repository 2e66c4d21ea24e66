"""Claims jobs from PostgreSQL and runs them on ComfyUI backends, a few at a time per backend.

Every backend has one worker task that claims jobs (fair across users, SKIP LOCKED) while the
backend has a free slot, and runs each in a task of its own: run, deliver, record. A backend has
``capacity`` slots (backends table; the ``pipeline_depth`` of the host that registered it first),
counting the running prompt, so the next job's upload and ``POST /prompt`` happen while the current
one runs and ComfyUI starts it from its own queue. A job that must have its backend alone (a
``/bench`` session) waits for the others to end and holds every slot. Workers sleep on a NOTIFY from
enqueue, with a slow poll as a safety net. A claimed job holds a lease that the worker extends while
it runs; if this process dies (ComfyUI skips cleanup on SIGTERM) the lease expires and the
housekeeping of any live dispatcher, on any host, puts the job back in the queue. The backends table
decides what a backend may claim (health checks, drain, capacity, models: ``jobs/backends.py``); a
backend that dies under a job is marked unhealthy and the job queued again for another one, up to
the job's ``max_attempts``.

A job whose results Telegram would not take (an outage) waits as 'delivering' (``prompt_job``),
its backend slot free, its lease renewed like a running job's; the housekeeping of any live
dispatcher takes over one whose host died (``jobs.claim_delivery``) and sends what it kept. A job's
last status (done, failed, cancelled) is tried again through an outage too, with no slot held.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Mapping
from typing import TypeVar
from urllib.parse import urlsplit

from ..anyone.gateway_policy import CREDENTIAL_HEADER
from ..anyone.transport import make_connector
from ..core import i18n
from ..core.config import Settings
from ..core.health import Health
from ..core.logs import get_logger
from ..store import backends, jobs
from ..store.db import Patient
from ..store.errors import StoreError
from . import backends as backend_health
from . import bench, outcomes, prompt_job
from .comfy.client import ComfyClient
from .db_wait import SLOW_S, DatabaseWait
from .errors import ComfyError
from .handoff import Handoff
from .ports import ChatSink, Patience, StatusMessage
from .progress_record import ProgressRecord
from .runner import JobRun, Runner, elapsed_s

log = get_logger("dispatcher")

T = TypeVar("T")

IDLE_POLL_S = 5.0
HOLD_MARGIN_S = 0.05
"""Past the end of a warm hold, so that the claim then sees it ended (PostgreSQL's clock, not ours)."""
DELIVERING_AT_ONCE = 8
"""Jobs past their backend but still sending their results, at most, besides the backends' slots,
before the workers claim more: where Telegram (30 messages a second) is slower than the backends,
the jobs wait in the queue (fair, cancellable, with their place shown), not as finished results
queued behind each other's at the Bot API."""
BACKEND_RETRY_S = 5.0
LEASE_CHECK_S = 2.0
"""At most this long between lease renewals: a job cancelled or taken over elsewhere stops within it."""
LEASE_SETTLE_S = 2 * LEASE_CHECK_S
"""After the database did not answer, how long its answers must come at once before any lease is
taken as expired: the live workers renew theirs meanwhile."""
LEASE_MARGIN_S = 2.0
"""A job waits for the database (``store.db.Patient``) until this long before its lease runs out."""

RUNNERS: dict[str, Runner] = {prompt_job.KIND: prompt_job.run, bench.KIND: bench.run_job}
"""Job kind (``job.params["kind"]``, a prompt job when absent) -> its runner."""
ALONE = frozenset({bench.KIND})
"""Kinds that hold their backend alone: a benchmark session measures nothing else's runs."""


def kind(job) -> str:
    return job.params.get("kind", prompt_job.KIND)


@dataclasses.dataclass
class ActiveJob:
    """A job this process is running: where, under which prompt id, and whether the user cancelled it."""

    client: ComfyClient
    prompt_id: str
    task: asyncio.Task | None = None
    cancelled_by_user: bool = False
    lease_lost: bool = False  # cancelled in another process, or queued again after our lease expired
    lease_until: float = 0.0  # monotonic: when the lease we last took or renewed runs out


class Slots:
    """The prompts one backend may hold at once (queued in ComfyUI or running).

    Only the backend's worker takes slots, one before each claim, and the job it claims
    holds it (``Hold``). A job that must have the backend alone takes the rest of them
    before it starts, while its worker claims nothing, so nobody can overtake it.
    """

    def __init__(self, depth: int):
        self.depth = depth
        self._free = asyncio.Semaphore(depth)

    async def take(self) -> None:
        await self._free.acquire()

    def give_back(self, count: int = 1) -> None:
        for _ in range(count):
            self._free.release()


class Hold:
    """The slots one claimed job holds: the one its worker took, or all of them (``alone``)."""

    def __init__(self, slots: Slots, alone: bool):
        self.slots = slots
        self.alone = alone
        self.count = 1

    async def wait_turn(self) -> None:
        """Return once the job may start: at once, or (``alone``) when the backend's other jobs have ended."""
        while self.alone and self.count < self.slots.depth:
            await self.slots.take()
            self.count += 1

    def release(self) -> None:
        """The job's prompts have left the backend (or it ended): the next job may have its slots."""
        self.slots.give_back(self.count)
        self.count = 0


class Dispatcher:
    def __init__(self, settings: Settings, store, sink: ChatSink, backend_urls: list[str], health: Health,
                 anyone=None, credentials: Mapping[str, str] | None = None):
        self.settings = settings
        self.store = store
        self.sink = sink
        self.health = health
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.clients = [ComfyClient(url, connector_factory=_connector_factory(url, settings, anyone),
                                    headers=_credential_header(url, credentials or {}))
                        for url in backend_urls]
        self.handoff = Handoff()  # Telegram Output in this ComfyUI gives our jobs their files here
        self._wakeup = asyncio.Event()
        self.health_checks = backend_health.HealthChecks(store.pool, self.clients, self._wakeup.set)
        self._tasks: list[asyncio.Task] = []
        self._running: dict[int, ActiveJob] = {}
        self._taken_over: set[asyncio.Task] = set()  # delivering jobs of a dead host, sent from here
        self.patience = Patience.of_delivery(settings)  # of a job's results and its last status
        self._in_hand: asyncio.Semaphore | None = None  # jobs claimed and not ended: slots + DELIVERING_AT_ONCE
        self._listener = None

    async def start(self) -> None:
        if not self.clients:
            self.health.set("dispatcher", "error", "no ComfyUI backend configured")
            return
        self._listener = await self.store.listen_jobs(self._wakeup.set)
        rows = await backends.register_backends(self.store.pool, [client.base_url for client in self.clients],
                                                capacity=self.settings.pipeline_depth)
        await self.health_checks.check_all()  # a dead backend claims nothing, from the first claim on
        self._in_hand = asyncio.Semaphore(sum(row.capacity for row in rows) + DELIVERING_AT_ONCE)
        self._tasks.append(asyncio.create_task(self._watch_backends(), name="courier-backend-health"))
        for index, (client, row) in enumerate(zip(self.clients, rows, strict=True)):
            self._tasks.append(asyncio.create_task(self._worker(client, row.capacity),
                                                   name=f"courier-worker-{index}"))
        self._tasks.append(asyncio.create_task(self._housekeeping(), name="courier-housekeeping"))
        self.health.set("dispatcher", "ok", f"{len(self.clients)} backend(s)")

    async def stop(self) -> None:
        for task in (*self._tasks, *self._taken_over):
            task.cancel()
        await asyncio.gather(*self._tasks, *self._taken_over, return_exceptions=True)
        self._tasks.clear()
        if self._listener is not None:
            await self._listener.close()
        for client in self.clients:
            await client.close()

    async def interrupt(self, job_id: int) -> bool:
        """Stop a running job of this process (``/cancel``); False if it is not ours."""
        active = self._running.get(job_id)
        if active is None:
            return False
        active.cancelled_by_user = True
        active.task.cancel()
        await asyncio.wait([active.task])  # a POST /prompt under way has ended: nothing is queued after this
        with contextlib.suppress(ComfyError):  # deletes it from ComfyUI's queue, or interrupts it running
            await active.client.cancel(active.prompt_id)
        return True

    async def _watch_backends(self) -> None:
        while True:
            await asyncio.sleep(backend_health.INTERVAL_S)
            try:
                await self.health_checks.check_all()
            except Exception:
                log.exception("checking the backends failed")

    async def _worker(self, client: ComfyClient, depth: int) -> None:
        slots = Slots(depth)
        tasks: set[asyncio.Task] = set()
        try:
            while True:
                await slots.take()
                await self._in_hand.acquire()
                job = await self._claim(client)
                if job is None:
                    self._in_hand.release()
                    slots.give_back()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wakeup.wait(), await self._idle_s())
                    continue
                hold = Hold(slots, alone=kind(job) in ALONE)
                active = ActiveJob(client, str(uuid.uuid4()))
                active.task = asyncio.create_task(self._serve(job, active, hold), name=f"courier-job-{job.id}")
                self._running[job.id] = active
                tasks.add(active.task)
                active.task.add_done_callback(tasks.discard)
                active.task.add_done_callback(lambda _: self._in_hand.release())
                if hold.alone:  # claims nothing more until the session has ended
                    await asyncio.wait([active.task])
        finally:  # shutdown: the jobs go back to the queue
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _claim(self, client: ComfyClient):
        self._wakeup.clear()
        try:
            return await jobs.claim(self.store.pool, self.worker_id, self.settings.job_lease_s,
                                    backend=client.base_url, warm_wait_s=self.settings.warm_wait_s or None)
        except Exception:
            log.exception("claiming a job failed")
            return None

    async def _idle_s(self) -> float:
        """How long a backend that found no job waits unless woken: until a job held for another
        backend's warm model is free for it (the hold ends without a wakeup), at most IDLE_POLL_S."""
        if not self.settings.warm_wait_s:
            return IDLE_POLL_S
        try:
            ends_in = await jobs.warm_hold_ends_in(self.store.pool, self.settings.warm_wait_s)
        except (StoreError, TimeoutError):  # the claim has said so already, if it failed too
            return IDLE_POLL_S
        return IDLE_POLL_S if ends_in is None else min(IDLE_POLL_S, max(ends_in, 0.0) + HOLD_MARGIN_S)

    async def _serve(self, job, active: ActiveJob, hold: Hold) -> None:
        """Run a job in the slots it holds; they are free again once its prompts left the backend."""
        try:
            backend_down = await self._run(job, active, hold)
            self._running.pop(job.id, None)
            if backend_down:
                await asyncio.sleep(BACKEND_RETRY_S)  # back off from a backend that is down
        except Exception:  # recording the outcome failed: the lease runs out and the job is queued again
            log.exception("job %s: its outcome was not recorded", job.id)
        finally:
            self._running.pop(job.id, None)
            hold.release()

    async def _housekeeping(self) -> None:
        """Requeue the jobs whose lease ran out, once the database has answered at once twice in a row,
        LEASE_SETTLE_S apart: a lease that ran out while it hung or was down (a live worker could not
        renew it) is renewed first, and the job is not run again."""
        steady = settled = False  # the last probe was answered at once; so was the one before
        while True:
            try:
                was_steady, steady = steady, await self.store.ping() < SLOW_S
                settled = was_steady and steady
                if settled and await jobs.requeue_expired(self.store.pool):
                    self._wakeup.set()
                if settled:
                    await self._take_over_deliveries()
            except StoreError as exc:
                steady = settled = False
                log.warning("requeueing expired jobs waits for the database: %s", exc)
            except Exception:
                steady = settled = False
                log.exception("requeueing expired jobs failed")
            await asyncio.sleep(self.settings.job_lease_s / 2 if settled else LEASE_SETTLE_S)

    async def _take_over_deliveries(self) -> None:
        """Send the kept results of delivering jobs whose host died (their lease ran out)."""
        while (job := await jobs.claim_delivery(self.store.pool, self.worker_id, self.settings.job_lease_s)):
            log.info("job %s: taking over its delivery from %s", job.id, job.worker)
            active = ActiveJob(self.clients[0], str(uuid.uuid4()))  # its prompt ran: no backend is asked
            hold = Hold(Slots(1), alone=False)  # a slot of no backend's
            active.task = asyncio.create_task(self._serve(job, active, hold), name=f"courier-delivery-{job.id}")
            self._running[job.id] = active
            self._taken_over.add(active.task)
            active.task.add_done_callback(self._taken_over.discard)

    async def _keep_lease(self, job_id: int, active: ActiveJob, told: DatabaseWait) -> None:
        """Renew the job's lease until the job is no longer ours; then stop its task. A renewal the
        database does not answer is ``told`` in the job's status."""
        lease_s = self.settings.job_lease_s
        while True:
            await asyncio.sleep(min(lease_s / 3, LEASE_CHECK_S))
            try:
                renewed_at = time.monotonic()
                if await told.watched(jobs.extend_lease(self.store.pool, job_id, self.worker_id, lease_s)):
                    active.lease_until = renewed_at + lease_s
                    continue
            except StoreError as exc:  # the database is away: the lease may still hold when it is back
                log.warning("job %s: renewing its lease failed: %s", job_id, exc)
                continue
            log.info("job %s is no longer ours (cancelled, or its lease lost): stopping it", job_id)
            active.lease_lost = True
            active.task.cancel()
            return

    async def _run(self, job, active: ActiveJob, hold: Hold) -> bool:
        """Run one claimed job to a final state, or back to the queue; True if its backend failed it.

        The run ends in one ``Outcome`` (``jobs/outcomes.py``), recorded once and told once.
        """
        language = i18n.pick_language(job.params.get("language"), self.settings.language)
        say = functools.partial(i18n.text, language)
        progress = DatabaseWait(self.sink.status(job.id, job.chat_id, job.status_message_id,
                                                 reply_to=job.reply_to_message_id, worker=self.worker_id),
                                say("database_waiting", name=job.command), f"job {job.id}",
                                ProgressRecord(self.store.pool, job.id))
        pool = self._patient(job, active, progress, say)
        result = None
        try:
            result = await self._attempt(job, active, hold, progress, pool, say)
            outcome = outcomes.DONE
        except asyncio.CancelledError:
            if not (active.cancelled_by_user or active.lease_lost):
                # shutting down: hand the job back for another worker or the next start
                await asyncio.shield(jobs.release(self.store.pool, job.id, self.worker_id, "dispatcher stopped"))
                raise
            outcome = outcomes.CANCELLED if active.cancelled_by_user else outcomes.NOT_OURS
        except Exception as exc:
            outcome = outcomes.classify(exc, job_id=job.id, backend=backend_health.shown_url(active.client.base_url),
                                        language=language, say=say, timeout_s=self.settings.job_timeout_s)
        return await self._conclude(job, active, hold, progress, pool, language, outcome, result)

    def _patient(self, job, active: ActiveJob, progress: DatabaseWait, say) -> Patient:
        """The pool the job's outcome is recorded through: while the database is away it waits (its
        status says so) until just before the job's lease runs out."""
        told_waiting = []

        async def waiting() -> None:  # its status says the result waits (asked again each wait: an edit
            if not told_waiting:       # in flight drops it, the same text shown is no new edit)
                told_waiting.append(True)
                log.warning("job %s waits for the database to record its outcome", job.id)
            with contextlib.suppress(Exception):
                await progress.update(say("database_down_result", name=job.command))

        return Patient(self.store.pool, lambda: active.lease_until - LEASE_MARGIN_S, waiting)

    async def _attempt(self, job, active: ActiveJob, hold: Hold, progress: DatabaseWait, pool: Patient, say) -> dict:
        """The run itself, under the job's lease: it waits for its turn (the jobs before one that has
        its backend alone may run for long), says it runs, and returns its runner's result."""
        active.lease_until = time.monotonic() + self.settings.job_lease_s
        lease = asyncio.create_task(self._keep_lease(job.id, active, progress), name=f"courier-lease-{job.id}")
        try:
            await hold.wait_turn()
            if job.status == "delivering":  # rendered: only its results wait
                runner = prompt_job.resume
            else:
                if job.attempts <= 1:
                    await progress.update(say("running", name=job.command))
                else:  # a re-run says so at once: within the moment, the progress that follows would replace it
                    await progress.finish(say("running_again", name=job.command, attempt=job.attempts,
                                              attempts=job.max_attempts))
                runner = RUNNERS[kind(job)]
            left = asyncio.Event()  # its delivery has a patience of its own, not the job's time limit

            def left_backend() -> None:
                hold.release()
                left.set()

            run = JobRun(job, active.client, active.prompt_id, progress, self.sink, pool, self.settings, say,
                         self.handoff, left_backend=left_backend)
            return await _until_left(runner(run), left, self.settings.job_timeout_s)
        finally:  # before the job is ended: its lease keeper would find it ended and cancel us
            lease.cancel()

    async def _conclude(self, job, active: ActiveJob, hold: Hold, progress: DatabaseWait, pool: Patient,
                        language: str, outcome: outcomes.Outcome, result: dict | None) -> bool:
        """Record ``outcome`` once, then tell the chat once (its last status, tried through an outage:
        minutes, its backend slots free first); True if the job's backend failed it."""
        backend_failed = outcome.kind in ("lost", "down")
        if backend_failed:
            outcome = await self._backend_failed(job, active.client, progress, outcome, language)
            if outcome is outcomes.REQUEUED:
                return True
        said = await self._record(job, active, progress, pool, language, outcome, result)
        if said is not None:
            hold.release()
            with contextlib.suppress(Exception):
                await progress.finish(said[0], optional=said[1], patience=self.patience)
        return backend_failed

    async def _record(self, job, active: ActiveJob, progress: DatabaseWait, pool: Patient, language: str,
                      outcome: outcomes.Outcome, result: dict | None) -> tuple[str, bool] | None:
        """Record ``outcome``; what the chat is told then (the text, and whether it is optional: the
        result's caption says it already), or None."""
        say = functools.partial(i18n.text, language)
        if outcome.kind == "done":
            if not await progress.watched(jobs.succeed(pool, job.id, result, worker=self.worker_id)):
                return None
            seconds = result.get("done_s", elapsed_s(job))  # the caption's, if the result has one: one "Done in"
            if unconfirmed := len(result.get("unconfirmed") or ()):
                return i18n.ntext(language, "done_unconfirmed", unconfirmed, seconds=seconds), False
            return say("done", seconds=seconds), bool(result.get("captioned"))
        if outcome.kind in ("timeout", "not_ours"):  # take its prompt off the backend
            with contextlib.suppress(ComfyError):
                await active.client.cancel(active.prompt_id)
        if outcome.kind in ("failed", "timeout"):
            await jobs.fail(self.store.pool, job.id, outcome.text, worker=self.worker_id)
            return say("failed", name=job.command, reason=outcome.text), False
        if outcome.kind == "blocked":  # nothing can reach the user: end all their jobs, no retries
            log.info("job %s: the user blocked the bot (%s); ending their jobs", job.id, outcome.text)
            await jobs.fail(self.store.pool, job.id, "the user blocked the bot", worker=self.worker_id)
            await jobs.cancel_user_jobs(self.store.pool, job.user_id)
            return None
        if outcome.kind == "not_ours":  # cancelled elsewhere (say so), or runs again elsewhere
            now = await jobs.get_job(self.store.pool, job.id)
            if now is None or now.status != "cancelled":
                return None
        return say("job_cancelled", name=job.command), False  # /cancel already marked the job cancelled

    async def _backend_failed(self, job, client: ComfyClient, progress: StatusMessage, outcome: outcomes.Outcome,
                              language: str) -> outcomes.Outcome:
        """The backend died under the job (or forgot it): stop its claims if it is down, and queue
        the job again for another backend (said first, while the job is ours: only its worker may
        post its status); out of attempts, the job fails instead (the outcome returned)."""
        reason = backend_health.shown_error(client.base_url, outcome.text)
        log.warning("job %s (attempt %d of %d) lost: %s", job.id, job.attempts, job.max_attempts, reason)
        if outcome.kind == "down":
            await self.health_checks.mark_down(client.base_url, reason)
        if job.attempts >= job.max_attempts:
            return outcomes.Outcome("failed", i18n.text(language, "backend_gave_up", attempts=job.attempts))
        with contextlib.suppress(Exception):
            await progress.finish(i18n.text(language, "backend_retrying"))  # never dropped by the throttle
        await jobs.release(self.store.pool, job.id, self.worker_id, reason, count_attempt=outcome.counts_attempt)
        return outcomes.REQUEUED


async def _until_left(work: Awaitable[T], left: asyncio.Event, limit_s: float) -> T:
    """``await work``; ``asyncio.TimeoutError`` (``work`` cancelled) if ``limit_s`` passes before it set
    ``left`` (its prompts left the backend); no limit after that."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(left.wait())
    try:
        done, _ = await asyncio.wait({task, watch}, timeout=limit_s, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            raise asyncio.TimeoutError
        return await task
    finally:
        watch.cancel()
        if not task.done():  # timed out, or we were cancelled: the work stops with us
            task.cancel()
            await asyncio.wait([task])


def _credential_header(url: str, credentials: Mapping[str, str]) -> dict[str, str]:
    """The bot-host credential header for a ``.anon`` backend we hold one for (``{address: token}``)."""
    token = credentials.get((urlsplit(url).hostname or "").lower())
    return {CREDENTIAL_HEADER: token} if token else {}


def _connector_factory(url: str, settings: Settings, anyone):
    """How the client for ``url`` connects: direct, or through the Anyone SOCKS port.

    Called on first use, when our own anon (if any) knows its SOCKS port.
    """
    return lambda: make_connector(url, settings, anyone.socks_url if anyone is not None else None)
