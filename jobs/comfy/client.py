"""``ComfyClient``: one ComfyUI backend, its REST verbs (``http.py``) and its shared websocket
(``events.py``), and ``run_prompt``, a whole job: queue, follow the frames to the end (surviving
drops), return outputs.

Telegram Output pushes its images on the socket as PNG ``PREVIEW_IMAGE`` frames while it
executes; ``run_prompt`` returns them as ``pushed``.
"""

from __future__ import annotations

import dataclasses
import inspect
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import aiohttp

from ...core.logs import get_logger
from ..errors import BackendUnavailable, ComfyError, ExecutionFailed, Interrupted, PromptLost, RequestFailed
from .events import Follower, SharedSocket
from .http import ComfyHttp
from .records import Event, Preview, Progress, PromptResult

log = get_logger("backend")

ProgressCallback = Callable[[Progress], Awaitable[None] | None]
PreviewCallback = Callable[[Preview], Awaitable[None] | None]


async def _call(callback: Callable[[Any], Any] | None, value: Any) -> None:
    if callback is not None:
        result = callback(value)
        if inspect.isawaitable(result):
            await result


@dataclasses.dataclass
class _Run:
    """State of one ``run_prompt`` call."""

    workflow: Mapping[str, Any]
    progress: Progress
    on_progress: ProgressCallback | None
    on_preview: PreviewCallback | None
    result_nodes: Collection[str] = ()
    outputs: dict[str, dict] = dataclasses.field(default_factory=dict)
    pushed: dict[str, list[bytes]] = dataclasses.field(default_factory=dict)
    executed_nodes: list[str] = dataclasses.field(default_factory=list)
    failure: ComfyError | None = None  # raised once the prompt has left the backend's queue
    started_ms: int | None = None  # execution_start / execution_success stamps (backend clock)
    succeeded_ms: int | None = None

    @property
    def prompt_id(self) -> str:
        return self.progress.prompt_id

    async def take(self, preview: Preview) -> None:
        """A result node's pushed PNG (it comes while the node executes), or a preview for ``on_preview``."""
        node = self.progress.node
        if node in self.result_nodes and preview.mime == "image/png":
            self.pushed.setdefault(node, []).append(preview.image)
        else:
            await _call(self.on_preview, preview)

    async def report(self, **changes: Any) -> None:
        progress = dataclasses.replace(self.progress, **changes)
        if progress != self.progress:
            self.progress = progress
            await _call(self.on_progress, progress)


class ComfyClient(ComfyHttp):
    """One ComfyUI backend at ``base_url``: the REST verbs of ``ComfyHttp`` (its arguments too) and one
    websocket for all this client's prompts, queued under ``client_id``.

    While the websocket is down, it is reopened with backoff (from ``poll_interval``
    seconds up to eight times that), runs poll every ``poll_interval`` seconds and give
    up after ``retries`` failed looks in a row.
    """

    def __init__(self, base_url: str, *, connector: aiohttp.BaseConnector | None = None,
                 connector_factory: Callable[[], aiohttp.BaseConnector] | None = None,
                 connect_timeout: float = 60.0, read_timeout: float = 120.0, heartbeat: float = 30.0,
                 poll_interval: float = 1.0, retries: int = 10, headers: Mapping[str, str] | None = None):
        super().__init__(base_url, connector=connector, connector_factory=connector_factory,
                         connect_timeout=connect_timeout, read_timeout=read_timeout, heartbeat=heartbeat,
                         headers=headers)
        self._retries = retries
        self.client_id = uuid.uuid4().hex  # every prompt of this client is queued under it
        self._socket = SharedSocket(self, self.client_id, poll_interval)

    @property
    def retries(self) -> int:
        return self._retries

    async def __aenter__(self) -> ComfyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the websocket, the session and its connector; the client is unusable afterwards."""
        await self._socket.close()
        await super().close()

    def follow(self, *prompt_ids: str, adopt: bool = False) -> AbstractAsyncContextManager[Follower]:
        """Follow ``prompt_ids`` (queue them with ``self.client_id``) on the shared websocket
        (``SharedSocket.follow``)."""
        return self._socket.follow(*prompt_ids, adopt=adopt)

    # --- a whole run -------------------------------------------------------------

    async def run_prompt(self, workflow: Mapping[str, Any], *, on_progress: ProgressCallback | None = None,
                         on_preview: PreviewCallback | None = None, prompt_id: str | None = None,
                         result_nodes: Collection[str] = ()) -> PromptResult:
        """Queue ``workflow``, follow it to the end and return its outputs.

        The prompt is followed on the shared websocket before it is queued: ComfyUI
        sends ``executing``/``executed`` only to the queuing client. While the socket
        is down, ``/queue`` and ``/history`` are polled, and read once more when it
        is back. Outputs come from ``executed`` frames, confirmed by ``/history``. PNG
        previews that come while one of ``result_nodes`` executes are its pushed
        results (``PromptResult.pushed``), not previews. It
        returns or raises once the prompt has left the queue (its history is
        written). Cancelling this call leaves the prompt on the backend:
        ``cancel(prompt_id)`` it.

        :raises PromptRejected, ExecutionFailed, Interrupted, PromptLost, BackendUnavailable:
        """
        run = _Run(workflow, Progress(prompt_id or str(uuid.uuid4()), nodes_total=len(workflow)),
                   on_progress, on_preview, result_nodes)
        async with self.follow(run.prompt_id) as follower:
            await self.queue_prompt(workflow, self.client_id, run.prompt_id)
            await self._follow_to_end(run, follower)
        if run.started_ms is not None and run.succeeded_ms is not None:
            # every frame of the run arrived: the outputs are complete without asking /history
            return PromptResult(run.prompt_id, run.outputs, run.succeeded_ms - run.started_ms, run.pushed)
        entry = await self.history(run.prompt_id)
        if entry is None:
            return PromptResult(run.prompt_id, run.outputs, None, run.pushed)
        entry.raise_if_failed()
        return PromptResult(run.prompt_id, {**run.outputs, **entry.outputs}, entry.execution_ms, run.pushed)

    async def _follow_to_end(self, run: _Run, follower: Follower) -> None:
        """Apply the run's frames until it ends; while frames may be lost, ask the backend."""
        failures = 0
        while True:
            item = await follower.next()
            if isinstance(item, Preview):
                await run.take(item)
            elif isinstance(item, Event):
                if await self._on_event(run, item):
                    return
            else:  # frames may be lost: ask the backend
                try:
                    if await self._catch_up(run):
                        return
                    failures = 0
                except BackendUnavailable:
                    failures += 1
                    if failures >= self._retries:
                        raise

    async def _on_event(self, run: _Run, event: Event) -> bool:
        """Apply one frame to the run; True when it has ended."""
        data = event.data
        if data.get("prompt_id", run.prompt_id) != run.prompt_id:
            return False  # another client's prompt (broadcast progress)
        if event.type == "status":
            remaining = data.get("status", {}).get("exec_info", {}).get("queue_remaining")
            await run.report(queue_remaining=remaining)
            if remaining == 1 and not run.progress.running:  # ours alone: next up, no need to ask /queue
                await run.report(ahead=0)
            elif not run.progress.running:
                try:  # the queue position; notices a deleted prompt (if it ended, its frames follow)
                    await self._catch_up(run)
                except (BackendUnavailable, RequestFailed) as exc:
                    log.info("queue position of %s unknown: %s", run.prompt_id, exc)
        elif event.type == "execution_start":
            run.started_ms = data.get("timestamp")
            await run.report(running=True, ahead=None)
        elif event.type == "execution_cached":
            cached = set(data.get("nodes", []))
            await run.report(nodes_total=len(set(run.workflow) - cached))
        elif event.type == "executing":
            node = data.get("node")
            if node is None:
                if run.failure is not None:
                    raise run.failure
                return True
            if node not in run.executed_nodes:
                run.executed_nodes.append(node)
            node_type = run.workflow.get(node, {}).get("class_type")
            await run.report(running=True, ahead=None, node=node, node_type=node_type, value=None, max=None,
                             nodes_done=len(run.executed_nodes) - 1)
        elif event.type == "progress":
            node = data.get("node", run.progress.node)
            await run.report(node=node, node_type=run.workflow.get(node, {}).get("class_type"),
                             value=data.get("value"), max=data.get("max"))
        elif event.type == "executed":
            run.outputs[str(data.get("node"))] = data.get("output") or {}
        elif event.type == "execution_success":
            run.succeeded_ms = data.get("timestamp")
        elif event.type == "execution_error":
            run.failure = ExecutionFailed(data)
        elif event.type == "execution_interrupted":
            run.failure = Interrupted(data)
        return False

    async def _catch_up(self, run: _Run) -> bool:
        """True if the prompt has finished (history), False if it still waits or runs.

        The queue is read before the history: ComfyUI moves a prompt from one to
        the other atomically, so a prompt in neither is gone.
        """
        queue = await self.queue()
        if run.prompt_id in queue:
            if not run.progress.running:
                await run.report(ahead=queue.ahead_of(run.prompt_id))
            return False
        entry = await self.history(run.prompt_id)
        if entry is None:
            raise PromptLost(f"ComfyUI at {self.base_url} has prompt {run.prompt_id} neither queued nor in "
                             "its history (deleted, or the server restarted)")
        entry.raise_if_failed()
        return True
