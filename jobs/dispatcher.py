"""Claims jobs from PostgreSQL and runs each on a ComfyUI backend, one at a time per backend.

Every backend has one worker task: claim (fair across users, SKIP LOCKED), run,
deliver, record. Workers sleep on a NOTIFY from enqueue, with a slow poll as a
safety net. A claimed job holds a lease that the worker extends while it runs;
if this process dies (ComfyUI skips cleanup on SIGTERM) the lease expires and
the housekeeping of any live dispatcher puts the job back in the queue.
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

from telegram import Bot
from telegram.constants import FileSizeLimit
from telegram.error import BadRequest

from .. import imaging
from ..bot import i18n
from ..config import Settings
from ..health import Health
from ..store import jobs, sessions
from ..anyone.transport import make_connector
from . import bench
from .comfy_client import BackendUnavailable, ComfyClient, ComfyError, describe_error
from .delivery import deliver_file
from .progress import ChatThrottle, ProgressMessage
from .workflow import fill_job, output_nodes
from ..logs import get_logger

log = get_logger("dispatcher")

LEASE_S = 60.0
IDLE_POLL_S = 5.0
BACKEND_RETRY_S = 5.0


class JobError(Exception):
    """A job cannot run; the message is for the user, already in their language."""


@dataclasses.dataclass
class ActiveJob:
    """A job this process is running: where, under which prompt id, and whether the user cancelled it."""

    client: ComfyClient
    prompt_id: str
    task: asyncio.Task | None = None
    cancelled_by_user: bool = False


class Dispatcher:
    def __init__(self, settings: Settings, store, bot: Bot, backend_urls: list[str], health: Health,
                 anyone=None):
        self.settings = settings
        self.store = store
        self.bot = bot
        self.health = health
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self.clients = [ComfyClient(url, connector_factory=_connector_factory(url, settings, anyone))
                        for url in backend_urls]
        self.throttle = ChatThrottle(settings.progress_interval_s)
        self._wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._running: dict[int, ActiveJob] = {}
        self._listener = None

    async def start(self) -> None:
        if not self.clients:
            self.health.set("dispatcher", "error", "no ComfyUI backend configured")
            return
        self._listener = await self.store.listen_jobs(self._wakeup.set)
        for index, client in enumerate(self.clients):
            self._tasks.append(asyncio.create_task(self._worker(client), name=f"courier-worker-{index}"))
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

    async def _worker(self, client: ComfyClient) -> None:
        while True:
            self._wakeup.clear()
            try:
                job = await jobs.claim(self.store.pool, self.worker_id, LEASE_S, backend=client.base_url)
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
            await asyncio.sleep(LEASE_S / 2)

    async def _keep_lease(self, job_id: int) -> None:
        while True:
            await asyncio.sleep(LEASE_S / 3)
            await jobs.extend_lease(self.store.pool, job_id, self.worker_id, LEASE_S)

    async def _run(self, job, active: ActiveJob) -> bool:
        """Run one claimed job to a final state; True if the backend was unreachable."""
        client = active.client
        language = i18n.pick_language(job.params.get("language"), self.settings.language)

        def say(key: str, **params) -> str:
            return i18n.text(language, key, **params)

        progress = ProgressMessage(job.chat_id, lambda text: self.bot.edit_message_text(
            text, chat_id=job.chat_id, message_id=job.status_message_id), self.throttle)
        lease = asyncio.create_task(self._keep_lease(job.id), name=f"courier-lease-{job.id}")
        started = time.monotonic()
        try:
            await progress.update(say("running", name=job.command))
            result = await asyncio.wait_for(self._execute(job, active, progress, say),
                                            self.settings.job_timeout_s)
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
        except BackendUnavailable as exc:
            log.warning("job %s: backend %s unavailable: %s", job.id, client.base_url, exc)
            await jobs.release(self.store.pool, job.id, self.worker_id, str(exc))
            await progress.update(say("backend_unavailable"))
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

    async def _execute(self, job, active: ActiveJob, progress: ProgressMessage, say) -> dict:
        if job.params.get("kind") == bench.KIND:  # /bench: a Benchmark session, holding this backend
            return await bench.run_job(self, job, active, progress, say)
        client = active.client
        image_name = ""
        if job.params.get("image_file_id"):
            data = await self._fetch_image(job.params["image_file_id"], say)
            image_name = await client.upload_image(data, f"job-{job.id}.png")
        workflow = fill_job(job.params["workflow"], prompt=job.params.get("prompt", ""), seed=job.params["seed"],
                            image=image_name, chat_id=job.chat_id, user_id=job.user_id)

        async def on_progress(event) -> None:
            if event.max:
                await progress.update(say("progress", name=job.command, value=event.value, max=event.max,
                                          percent=int(100 * event.value / event.max)))

        run = await client.run_prompt(workflow, on_progress=on_progress, prompt_id=active.prompt_id)
        wanted = set(output_nodes(workflow))
        delivered = []
        for node_id, output in run.outputs.items():
            if node_id not in wanted:
                continue
            for ref in output.get("images", []) + output.get("gifs", []) + output.get("videos", []):
                data = await client.view(ref["filename"], ref.get("subfolder", ""), ref.get("type", "output"))
                record = await deliver_file(self.bot, job.chat_id, job.reply_to_message_id, ref["filename"], data)
                delivered.append({**record, "job_id": job.id})
        if delivered:
            await sessions.set_last_outputs(self.store.pool, job.chat_id, job.user_id, delivered)
        return {"prompt_id": run.prompt_id, "outputs": delivered, "execution_ms": run.execution_ms}

    async def _fetch_image(self, file_id: str, say) -> bytes:
        """The picture's bytes, once they prove to be an image within the limits.

        :raises JobError: Telegram will not hand the file out (too big, gone), or it is no usable image.
        """
        try:
            telegram_file = await self.bot.get_file(file_id)
            data = bytes(await telegram_file.download_as_bytearray())
        except BadRequest as exc:  # a retry cannot help: say why, once
            reason = "image_too_big_for_telegram" if "too big" in exc.message.lower() else "image_unavailable"
            raise JobError(say("bad_image", reason=say(reason, limit_mb=FileSizeLimit.FILESIZE_DOWNLOAD / 1e6))
                           ) from None
        try:
            imaging.decode_image(data, int(self.settings.max_image_mb * 2**20))
        except imaging.BadImage as exc:
            raise JobError(say("bad_image", reason=say(exc.key, **exc.params))) from None
        return data

    async def _finish_failed(self, job, progress: ProgressMessage, say, reason: str) -> None:
        await jobs.fail(self.store.pool, job.id, reason, worker=self.worker_id)
        with contextlib.suppress(Exception):
            await progress.finish(say("failed", name=job.command, reason=reason))


def _connector_factory(url: str, settings: Settings, anyone):
    """How the client for ``url`` connects: direct, or through the Anyone SOCKS port.

    Called on first use, when our own anon (if any) knows its SOCKS port.
    """
    return lambda: make_connector(url, settings, anyone.socks_url if anyone is not None else None)
