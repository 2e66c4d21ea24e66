"""Claims jobs from PostgreSQL and runs each on a ComfyUI backend, ``capacity`` at a time per backend.

Every backend has one worker task per unit of its capacity (backends table): claim (fair
across users, SKIP LOCKED, only while the backend is healthy and not draining), run, deliver,
record. Workers sleep on a NOTIFY from enqueue, with a slow poll as a safety net. A claimed
job holds a lease that the worker extends while it runs; if this process dies (ComfyUI skips
cleanup on SIGTERM) the lease expires and the housekeeping of any live dispatcher, on any
host, puts the job back in the queue. A backend that dies under a job is marked unhealthy
and the job queued again for another one, up to the job's ``max_attempts``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import socket
import time
import uuid

from .. import i18n
from ..config import Settings
from ..health import Health
from ..store import backends, jobs
from ..anyone.transport import make_connector
from . import backends as backend_health
from . import bench, prompt_job
from .comfy_client import BackendUnavailable, ComfyClient, ComfyError, PromptLost, describe_error
from .ports import ChatSink, StatusMessage
from .runner import JobError, JobRun, Runner
from ..logs import get_logger

log = get_logger("dispatcher")

IDLE_POLL_S = 5.0
BACKEND_RETRY_S = 5.0

RUNNERS: dict[str, Runner] = {prompt_job.KIND: prompt_job.run, bench.KIND: bench.run_job}
"""Job kind (``job.params["kind"]``, a prompt job when absent) -> its runner."""


@dataclasses.dataclass
class ActiveJob:
    """A job this process is running: where, under which prompt id, and whether the user cancelled it."""

    client: ComfyClient
    prompt_id: str
    task: asyncio.Task | None = None
    cancelled_by_user: bool = False


class Dispatcher:
    def __init__(self, settings: Settings, store, sink: ChatSink, backend_urls: list[str], health: Health,
                 anyone=None):
        self.settings = settings
        self.store = store
        self.sink = sink
        self.health = health
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.clients = [ComfyClient(url, connector_factory=_connector_factory(url, settings, anyone))
                        for url in backend_urls]
        self._wakeup = asyncio.Event()
        self.health_checks = backend_health.HealthChecks(store.pool, self.clients, self._wakeup.set)
        self._workers: dict[str, int] = {}  # backend URL -> how many worker tasks serve it
        self._tasks: list[asyncio.Task] = []
        self._running: dict[int, ActiveJob] = {}
        self._listener = None

    async def start(self) -> None:
        if not self.clients:
            self.health.set("dispatcher", "error", "no ComfyUI backend configured")
            return
        self._listener = await self.store.listen_jobs(self._wakeup.set)
        await backends.register_backends(self.store.pool, [client.base_url for client in self.clients])
        self._staff(await self.health_checks.check_all())
        self._tasks.append(asyncio.create_task(self._watch_backends(), name="courier-backend-health"))
        self._tasks.append(asyncio.create_task(self._housekeeping(), name="courier-housekeeping"))
        self.health.set("dispatcher", "ok", f"{len(self.clients)} backend(s)")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
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
        with contextlib.suppress(ComfyError):
            await active.client.cancel(active.prompt_id)
        return True

    def _staff(self, rows: list[backends.Backend]) -> None:
        """Start workers until each backend has one per unit of its capacity (a lowered capacity
        needs no fewer: the claim refuses the extra ones)."""
        capacity = {row.url: row.capacity for row in rows}
        for client in self.clients:
            while self._workers.get(client.base_url, 0) < capacity.get(client.base_url, 0):
                self._workers[client.base_url] = slot = self._workers.get(client.base_url, 0) + 1
                self._tasks.append(asyncio.create_task(self._worker(client),
                                                       name=f"courier-worker-{client.base_url}-{slot}"))

    async def _watch_backends(self) -> None:
        while True:
            await asyncio.sleep(backend_health.INTERVAL_S)
            try:
                self._staff(await self.health_checks.check_all())
            except Exception:
                log.exception("checking the backends failed")

    async def _worker(self, client: ComfyClient) -> None:
        lease_s = self.settings.job_lease_s
        while True:
            self._wakeup.clear()
            try:
                job = await jobs.claim(self.store.pool, self.worker_id, lease_s, backend=client.base_url)
            except Exception:
                log.exception("claiming a job failed")
                job = None
            if job is None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), IDLE_POLL_S)
                continue
            active = ActiveJob(client, str(uuid.uuid4()))
            active.task = asyncio.create_task(self._run(job, active), name=f"courier-job-{job.id}")
            self._running[job.id] = active
            try:  # cancelling the worker (shutdown) cancels the job too
                retry_backend = await active.task
            finally:
                self._running.pop(job.id, None)
            if retry_backend:
                await asyncio.sleep(BACKEND_RETRY_S)  # back off from a backend that is down

    async def _housekeeping(self) -> None:
        while True:
            try:
                if await jobs.requeue_expired(self.store.pool):
                    self._wakeup.set()
            except Exception:
                log.exception("requeueing expired jobs failed")
            await asyncio.sleep(self.settings.job_lease_s / 2)

    async def _keep_lease(self, job_id: int) -> None:
        lease_s = self.settings.job_lease_s
        while True:
            await asyncio.sleep(lease_s / 3)
            await jobs.extend_lease(self.store.pool, job_id, self.worker_id, lease_s)

    async def _run(self, job, active: ActiveJob) -> bool:
        """Run one claimed job to a final state, or back to the queue; True if its backend failed it."""
        client = active.client
        language = i18n.pick_language(job.params.get("language"), self.settings.language)

        def say(key: str, **params) -> str:
            return i18n.text(language, key, **params)

        progress = self.sink.status(job.chat_id, job.status_message_id)
        lease = asyncio.create_task(self._keep_lease(job.id), name=f"courier-lease-{job.id}")
        started = time.monotonic()
        try:
            await progress.update(say("running", name=job.command))
            runner = RUNNERS[job.params.get("kind", prompt_job.KIND)]
            run = JobRun(job, client, active.prompt_id, progress, self.sink, self.store.pool, self.settings, say)
            result = await asyncio.wait_for(runner(run), self.settings.job_timeout_s)
        except asyncio.CancelledError:
            if active.cancelled_by_user:  # /cancel already marked the job cancelled
                with contextlib.suppress(Exception):
                    await progress.finish(say("failed", name=job.command, reason=say("interrupted")))
                return False
            # shutting down: hand the job back for another worker or the next start
            await asyncio.shield(jobs.release(self.store.pool, job.id, self.worker_id, "dispatcher stopped"))
            raise
        except asyncio.TimeoutError:
            with contextlib.suppress(ComfyError):
                await client.cancel(active.prompt_id)
            await self._finish_failed(job, progress, say, say("timeout", seconds=self.settings.job_timeout_s))
            return False
        except (BackendUnavailable, PromptLost) as exc:
            await self._backend_failed(job, client, progress, say, exc)
            return True
        except ComfyError as exc:
            await self._finish_failed(job, progress, say, describe_error(exc, i18n.catalog(language)))
            return False
        except JobError as exc:
            await self._finish_failed(job, progress, say, str(exc))
            return False
        except Exception:
            incident = secrets.token_hex(4)
            log.exception("incident %s: job %s failed unexpectedly", incident, job.id)
            await self._finish_failed(job, progress, say, say("internal_error_incident", incident=incident))
            return False
        finally:
            lease.cancel()
        await jobs.succeed(self.store.pool, job.id, result, worker=self.worker_id)
        await progress.finish(say("done", seconds=time.monotonic() - started))
        return False

    async def _backend_failed(self, job, client: ComfyClient, progress: StatusMessage, say, exc: ComfyError) -> None:
        """The backend died under the job (or forgot it): stop its claims if it is down, and queue
        the job again for another backend, or fail it once out of attempts."""
        reason = backend_health.shown_error(client.base_url, str(exc))
        log.warning("job %s (attempt %d of %d) lost: %s", job.id, job.attempts, job.max_attempts, reason)
        if isinstance(exc, BackendUnavailable):
            await self.health_checks.mark_down(client.base_url, reason)
        if job.attempts >= job.max_attempts:
            await self._finish_failed(job, progress, say, say("backend_gave_up", attempts=job.attempts))
            return
        await jobs.release(self.store.pool, job.id, self.worker_id, reason, count_attempt=True)
        with contextlib.suppress(Exception):
            await progress.update(say("backend_retrying"))

    async def _finish_failed(self, job, progress: StatusMessage, say, reason: str) -> None:
        await jobs.fail(self.store.pool, job.id, reason, worker=self.worker_id)
        with contextlib.suppress(Exception):
            await progress.finish(say("failed", name=job.command, reason=reason))


def _connector_factory(url: str, settings: Settings, anyone):
    """How the client for ``url`` connects: direct, or through the Anyone SOCKS port.

    Called on first use, when our own anon (if any) knows its SOCKS port.
    """
    return lambda: make_connector(url, settings, anyone.socks_url if anyone is not None else None)
