"""Async client for one ComfyUI backend over its HTTP/websocket API (shapes of v0.3.64).

One method per endpoint, typed arguments, parsed replies; every failure is a
``ComfyError`` (see ``errors.py``). ``run_prompt`` is a whole job: queue, follow
the frames to the end (surviving drops), return outputs. A client keeps one
``client_id`` and one websocket for all its prompts (``follow``): ComfyUI sends a
prompt's frames only to the socket of the client that queued it, so one socket
per backend carries them all, routed here by ``prompt_id``. Telegram Output pushes
its images on that socket as PNG ``PREVIEW_IMAGE`` frames while it executes (as
ComfyUI's SaveImageWebsocket does); ``run_prompt`` returns them as ``pushed``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import mimetypes
import struct
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp_socks import ProxyConnectionError, ProxyError, ProxyTimeoutError

from ..core.logs import get_logger
from .errors import (
    BackendUnavailable,
    ComfyError,
    ExecutionFailed,
    Interrupted,
    Problem,
    PromptLost,
    PromptRejected,
    RequestFailed,
    describe_error,
)

__all__ = ["PUSH_MAX_BYTES", "WS_MAX_MSG_BYTES", "BackendUnavailable", "ComfyClient", "ComfyError", "Device",
           "Event", "EventStream", "ExecutionFailed", "FileRef", "Follower", "Gap", "HistoryEntry", "Interrupted",
           "Preview", "Problem", "Progress", "PromptLost", "PromptRejected", "PromptResult", "QueueItem",
           "QueueState", "RequestFailed", "SystemStats", "describe_error", "parse_preview", "png_preview_payload"]

log = get_logger("backend")

_UNREACHABLE = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, aiohttp.WSServerHandshakeError,
                asyncio.TimeoutError, OSError, ProxyError, ProxyConnectionError, ProxyTimeoutError)
_PREVIEW_IMAGE = 1  # binary frame event type; then a 4-byte format: 1 = JPEG, 2 = PNG
_PREVIEW_FORMATS = {1: "image/jpeg", 2: "image/png"}
_PNG = 2
WS_MAX_MSG_BYTES = 4 * 2**20  # aiohttp's default: a bigger frame closes the socket (1009)
PUSH_MAX_BYTES = 2 * 2**20
"""The most a Telegram Output pushes as frames (per node, all its images): well under the
socket's message cap, and small enough that a push holds the shared socket, and ComfyUI's one
publish loop, only briefly. The bot fetches bigger results with ``/view``."""


@dataclasses.dataclass(frozen=True)
class FileRef:
    """A file a node wrote, named the way ``view`` wants it."""

    filename: str
    subfolder: str
    type: str
    node: str


def _files(outputs: Mapping[str, Mapping[str, Any]]) -> list[FileRef]:
    return [FileRef(item["filename"], item.get("subfolder", ""), item.get("type", "output"), node)
            for node, output in outputs.items() for items in output.values() if isinstance(items, list)
            for item in items if isinstance(item, dict) and "filename" in item]


@dataclasses.dataclass(frozen=True)
class PromptResult:
    """What a finished prompt produced: ``outputs`` is node id -> UI output (``{"images": [...]}``)."""

    prompt_id: str
    outputs: dict[str, dict]
    execution_ms: int | None  # execution_start to execution_success, by the backend's clock
    pushed: dict[str, list[bytes]] = dataclasses.field(default_factory=dict, repr=False)
    """Result node id -> the PNGs it pushed as frames, in the order of its ``images``."""

    @property
    def files(self) -> list[FileRef]:
        return _files(self.outputs)


@dataclasses.dataclass(frozen=True)
class HistoryEntry:
    """One ``/history/{prompt_id}`` record."""

    prompt_id: str
    outputs: dict[str, dict]
    status_str: str  # "success" or "error"
    completed: bool
    messages: list[tuple[str, dict]]

    @property
    def files(self) -> list[FileRef]:
        return _files(self.outputs)

    @property
    def execution_ms(self) -> int | None:
        stamps = {kind: data.get("timestamp") for kind, data in self.messages}
        start, end = stamps.get("execution_start"), stamps.get("execution_success")
        return end - start if isinstance(start, int) and isinstance(end, int) else None


@dataclasses.dataclass(frozen=True)
class QueueItem:
    number: float
    prompt_id: str
    client_id: str | None = None  # who queued it (its events go to that websocket); None: nobody said


@dataclasses.dataclass(frozen=True)
class QueueState:
    """``GET /queue``: what runs now and what waits."""

    running: list[QueueItem]
    pending: list[QueueItem]

    def ahead_of(self, prompt_id: str) -> int | None:
        """How many prompts run before this pending one; None if it is not pending."""
        for item in self.pending:
            if item.prompt_id == prompt_id:
                return len(self.running) + sum(1 for p in self.pending if p.number < item.number)
        return None

    def __contains__(self, prompt_id: object) -> bool:
        return any(item.prompt_id == prompt_id for item in self.running + self.pending)


@dataclasses.dataclass(frozen=True)
class Device:
    name: str
    type: str
    index: int | None
    vram_total: int
    vram_free: int


@dataclasses.dataclass(frozen=True)
class SystemStats:
    """``GET /system_stats``; ``raw`` keeps the whole reply."""

    comfyui_version: str
    python_version: str
    pytorch_version: str
    ram_total: int
    ram_free: int
    devices: list[Device]
    raw: dict = dataclasses.field(repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Event:
    """A text websocket frame: ``{"type", "data"}``."""

    type: str
    data: dict


@dataclasses.dataclass(frozen=True)
class Preview:
    """A preview image from a binary websocket frame."""

    mime: str
    image: bytes


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where a run stands; passed to ``run_prompt``'s ``on_progress``."""

    prompt_id: str
    queue_remaining: int | None = None  # prompts on the backend (running + pending), from `status`
    ahead: int | None = None  # prompts that run before ours while it waits; None when unknown or running
    running: bool = False
    node: str | None = None  # node executing now
    node_type: str | None = None
    value: int | None = None  # step of the current node, from `progress`
    max: int | None = None
    nodes_done: int = 0  # nodes finished so far
    nodes_total: int = 0  # workflow nodes not served from cache (some may never run)


def parse_preview(frame: bytes) -> Preview | None:
    """A preview from a binary frame; None for other binary events."""
    if len(frame) < 8:
        return None
    event, image_format = struct.unpack(">II", frame[:8])
    if event != _PREVIEW_IMAGE:
        return None
    return Preview(_PREVIEW_FORMATS.get(image_format, "application/octet-stream"), bytes(frame[8:]))


def png_preview_payload(png: bytes) -> bytes:
    """What follows the event type in a PNG ``PREVIEW_IMAGE`` frame (as ComfyUI's ``send_image`` writes it)."""
    return struct.pack(">I", _PNG) + png


class EventStream:
    """An open ``/ws?clientId=`` socket; iterating yields ``Event`` and ``Preview`` until it closes."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self._ws = ws

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._ws.close()

    def __aiter__(self) -> AsyncIterator[Event | Preview]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Event | Preview]:
        async for msg in self._ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                frame = json.loads(msg.data)
                yield Event(str(frame.get("type", "")), frame.get("data") or {})
            elif msg.type == aiohttp.WSMsgType.BINARY:
                preview = parse_preview(msg.data)
                if preview is not None:
                    yield preview
            elif msg.type == aiohttp.WSMsgType.ERROR:
                return


@dataclasses.dataclass(frozen=True)
class Gap:
    """Frames may have been missed: the websocket is down (``reconnected`` False) or was reopened."""

    reconnected: bool


_DROPPED = object()  # the reader's word to its followers that the socket went down


class Follower:
    """The frames of some prompts from the client's shared websocket; see ``ComfyClient.follow``."""

    def __init__(self, client: ComfyClient, prompt_ids: tuple[str, ...], adopt: bool):
        self.client_id = client.client_id
        self.prompt_ids = set(prompt_ids)
        self.adopt = adopt  # also takes frames of prompts nobody follows (those a Benchmark node queues)
        self._client = client
        self._frames: asyncio.Queue = asyncio.Queue()
        self._down = False

    def owns(self, item: QueueItem) -> bool:
        """Whether a queue item is this follower's: one of its prompts, or (adopting) one of the
        client's that no other follower has."""
        if item.client_id != self.client_id:
            return False
        return item.prompt_id in self.prompt_ids or self.adopt and not any(
            item.prompt_id in other.prompt_ids for other in self._client._followers)

    async def next(self) -> Event | Preview | Gap:
        """The next frame; a ``Gap`` every ``poll_interval`` while the socket is down and once it is back."""
        while True:
            try:
                item = await asyncio.wait_for(self._frames.get(),
                                              self._client._poll_interval if self._down else None)
            except asyncio.TimeoutError:
                return Gap(reconnected=False)
            if item is _DROPPED:
                self._down = True
                continue
            if isinstance(item, Gap):
                self._down = False
            return item


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


class ComfyClient:
    """One ComfyUI backend at ``base_url``, through one reused ``ClientSession``.

    ``connector`` (e.g. a SOCKS connector for ``.anon`` backends), or
    ``connector_factory`` to make it lazily inside the running loop, is owned by
    the client and closed by ``close()``. ``connect_timeout`` and ``read_timeout``
    bound each HTTP request; ``heartbeat`` pings the websocket to notice dead
    peers. While the websocket is down, it is reopened with backoff (from
    ``poll_interval`` seconds up to eight times that), runs poll every
    ``poll_interval`` seconds and give up after ``retries`` failed looks in a row.
    ``headers`` go with every request and websocket (a hidden service's bot-host credential).
    """

    def __init__(self, base_url: str, *, connector: aiohttp.BaseConnector | None = None,
                 connector_factory: Callable[[], aiohttp.BaseConnector] | None = None,
                 connect_timeout: float = 60.0, read_timeout: float = 120.0, heartbeat: float = 30.0,
                 poll_interval: float = 1.0, retries: int = 10, headers: Mapping[str, str] | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be http(s)://host:port, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        if connector is not None and connector_factory is not None:
            raise ValueError("pass connector or connector_factory, not both")
        self._connector = connector
        self._connector_factory = connector_factory
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        self._heartbeat = heartbeat
        self._poll_interval = poll_interval
        self._retries = retries
        self._headers = dict(headers or {})
        self._session: aiohttp.ClientSession | None = None
        self.client_id = uuid.uuid4().hex  # every prompt of this client is queued under it
        self._followers: list[Follower] = []
        self._stream: EventStream | None = None  # the shared websocket; None while down
        self._reader: asyncio.Task | None = None  # routes its frames; runs while the socket is wanted
        self._opening = asyncio.Lock()
        self._executing: str | None = None  # the prompt running now, as the frames tell (for previews)

    @property
    def retries(self) -> int:
        return self._retries

    async def __aenter__(self) -> ComfyClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the websocket, the session and its connector; the client is unusable afterwards."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._stream is not None:
            await self._stream.close()
        if self._session is not None:
            await self._session.close()
        elif self._connector is not None:
            await self._connector.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            if self._connector is None and self._connector_factory is not None:
                self._connector = self._connector_factory()
            self._session = aiohttp.ClientSession(connector=self._connector, timeout=self._timeout,
                                                  headers=self._headers)
        return self._session

    def _unreachable(self, what: str, exc: BaseException | str) -> BackendUnavailable:
        reason = exc if isinstance(exc, str) else (str(exc) or type(exc).__name__)
        return BackendUnavailable(f"ComfyUI at {self.base_url} is not reachable ({what}): {reason}")

    async def _request(self, method: str, path: str, **kwargs: Any) -> tuple[int, bytes]:
        try:
            async with self._http().request(method, self.base_url + path, **kwargs) as resp:
                body = await resp.read()
        except _UNREACHABLE as exc:
            raise self._unreachable(f"{method} {path}", exc) from exc
        if resp.status in (502, 503, 504):
            raise self._unreachable(f"{method} {path}", f"HTTP {resp.status}")
        return resp.status, body

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        status, body = await self._request(method, path, **kwargs)
        if status != 200:
            raise RequestFailed(f"{method} {path}: HTTP {status}", status, body[:500].decode(errors="replace"))
        try:
            return json.loads(body)
        except ValueError:
            raise RequestFailed(f"{method} {path}: reply is not JSON", status,
                                body[:500].decode(errors="replace")) from None

    async def _post(self, path: str, body: Mapping[str, Any]) -> None:
        status, reply = await self._request("POST", path, json=body)
        if status != 200:
            raise RequestFailed(f"POST {path}: HTTP {status}", status, reply[:500].decode(errors="replace"))

    # --- endpoints ---------------------------------------------------------------

    async def upload_image(self, data: bytes, filename: str, subfolder: str = "courier",
                           overwrite: bool = True) -> str:
        """``POST /upload/image`` into the input folder; returns the LoadImage name ``subfolder/name``."""
        if not filename or "/" in filename or "\\" in filename:
            raise ValueError(f"filename must be a plain file name, got {filename!r}")
        form = aiohttp.FormData()
        form.add_field("image", data, filename=filename,
                       content_type=mimetypes.guess_type(filename)[0] or "application/octet-stream")
        form.add_field("type", "input")
        form.add_field("subfolder", subfolder)
        form.add_field("overwrite", "true" if overwrite else "false")
        reply = await self._json("POST", "/upload/image", data=form)
        return f"{reply['subfolder']}/{reply['name']}" if reply.get("subfolder") else reply["name"]

    async def delete_files(self, files: list[Mapping[str, str]], prompt_ids: list[str]) -> dict:
        """``POST /courier/files/delete``, Courier's route on the backend: delete Courier's files there
        (``[{filename, subfolder, type}]``) and these prompts' history entries. Returns the counts
        ``{deleted, missing, refused, failed}``."""
        return await self._json("POST", "/courier/files/delete", json={"files": files, "prompt_ids": prompt_ids})

    async def queue_prompt(self, workflow: Mapping[str, Any], client_id: str, prompt_id: str | None = None) -> str:
        """``POST /prompt``; returns the prompt_id.

        :raises ValueError: ``workflow`` is not an API-format workflow
        :raises PromptRejected: ComfyUI refused it (validation errors)
        """
        if not isinstance(workflow, Mapping) or not workflow:
            raise ValueError("workflow must be a non-empty API-format dict {node_id: {class_type, inputs}}")
        if "nodes" in workflow and "links" in workflow:
            raise ValueError("this is a UI-format workflow; export it with 'Export (API)'")
        body = {"prompt": workflow, "client_id": client_id, "prompt_id": prompt_id or str(uuid.uuid4())}
        status, raw = await self._request("POST", "/prompt", json=body)
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        if status == 400 and isinstance(reply, dict) and "error" in reply:
            raise PromptRejected(reply)
        if status != 200 or not isinstance(reply, dict) or "prompt_id" not in reply:
            raise RequestFailed(f"POST /prompt: HTTP {status}", status, raw[:500].decode(errors="replace"))
        if reply.get("node_errors"):  # some outputs failed validation; ComfyUI runs the others
            log.warning("prompt %s queued without its invalid outputs: %s", reply["prompt_id"], reply["node_errors"])
        return str(reply["prompt_id"])

    async def queue(self) -> QueueState:
        """``GET /queue``."""
        reply = await self._json("GET", "/queue")

        def items(key: str) -> list[QueueItem]:
            return [QueueItem(item[0], item[1], _client_id(item)) for item in reply.get(key, [])]

        return QueueState(items("queue_running"), items("queue_pending"))

    async def delete_queued(self, *prompt_ids: str) -> None:
        """``POST /queue {"delete": [...]}``: drop pending prompts (running ones are not touched)."""
        await self._post("/queue", {"delete": list(prompt_ids)})

    async def interrupt(self, prompt_id: str | None = None) -> None:
        """``POST /interrupt``: stop the running prompt (only if it is ``prompt_id``, when given)."""
        await self._post("/interrupt", {"prompt_id": prompt_id} if prompt_id else {})

    async def cancel(self, prompt_id: str) -> None:
        """Drop ``prompt_id`` whether it waits or runs."""
        await self.delete_queued(prompt_id)
        await self.interrupt(prompt_id)

    async def history(self, prompt_id: str) -> HistoryEntry | None:
        """``GET /history/{prompt_id}``; None while it is unknown or unfinished."""
        reply = await self._json("GET", f"/history/{quote(prompt_id, safe='')}")
        entry = reply.get(prompt_id)
        if entry is None:
            return None
        status = entry.get("status") or {}
        return HistoryEntry(prompt_id, entry.get("outputs") or {}, status.get("status_str", ""),
                            bool(status.get("completed")), [tuple(m) for m in status.get("messages", [])])

    async def view(self, filename: str, subfolder: str = "", type: str = "output") -> bytes:
        """``GET /view``: a file's bytes from the output, input or temp folder."""
        status, body = await self._request("GET", "/view", params={"filename": filename, "subfolder": subfolder,
                                                                   "type": type})
        if status != 200:
            raise RequestFailed(f"GET /view {type}/{subfolder}/{filename}: HTTP {status}", status)
        return body

    async def system_stats(self) -> SystemStats:
        """``GET /system_stats``."""
        raw = await self._json("GET", "/system_stats")
        system = raw.get("system", {})
        devices = [Device(d.get("name", ""), d.get("type", ""), d.get("index"), int(d.get("vram_total") or 0),
                          int(d.get("vram_free") or 0)) for d in raw.get("devices", [])]
        return SystemStats(str(system.get("comfyui_version", "")), str(system.get("python_version", "")),
                           str(system.get("pytorch_version", "")), int(system.get("ram_total") or 0),
                           int(system.get("ram_free") or 0), devices, raw)

    async def object_info(self, node_class: str | None = None) -> dict[str, dict]:
        """``GET /object_info[/{class}]``: node schemas by class name ({} for an unknown class)."""
        path = "/object_info" + (f"/{quote(node_class, safe='')}" if node_class else "")
        return await self._json("GET", path)

    async def events(self, client_id: str) -> EventStream:
        """Open ``/ws?clientId=``; use as ``async with await client.events(cid) as stream``."""
        try:
            ws = await self._http().ws_connect(f"{self.base_url}/ws", params={"clientId": client_id},
                                               heartbeat=self._heartbeat, max_msg_size=WS_MAX_MSG_BYTES)
        except _UNREACHABLE as exc:
            raise self._unreachable("websocket", exc) from exc
        return EventStream(ws)

    # --- the shared websocket ----------------------------------------------------

    @contextlib.asynccontextmanager
    async def follow(self, *prompt_ids: str, adopt: bool = False) -> AsyncIterator[Follower]:
        """Follow ``prompt_ids`` (queue them with ``self.client_id``) on the shared websocket.

        The socket opens on first use (BackendUnavailable if it cannot) and stays open; a
        dropped one is reopened while anyone follows. Subscribe before queueing, so no frame
        is missed.
        """
        follower = Follower(self, prompt_ids, adopt)
        async with self._opening:
            if self._reader is None or self._reader.done():
                self._stream = await self.events(self.client_id)
                self._reader = asyncio.create_task(self._read())
        follower._down = self._stream is None
        self._followers.append(follower)
        try:
            yield follower
        finally:
            self._followers.remove(follower)

    async def _read(self) -> None:
        """Route the socket's frames; reopen it when it drops while anyone follows."""
        while True:
            try:
                async for item in self._stream:
                    self._route(item)
            except (*_UNREACHABLE, ValueError) as exc:
                log.info("websocket to %s failed: %s", self.base_url, exc)
            stream, self._stream, self._executing = self._stream, None, None
            await stream.close()
            if not self._followers:  # nobody waits: the next run opens it again
                self._reader = None
                return
            log.warning("websocket to %s dropped while %d prompt(s) ran", self.base_url, len(self._followers))
            for follower in self._followers:
                follower._frames.put_nowait(_DROPPED)
            delay = self._poll_interval
            while self._stream is None:
                await asyncio.sleep(delay)
                if not self._followers:
                    self._reader = None
                    return
                try:
                    self._stream = await self.events(self.client_id)
                except BackendUnavailable:
                    delay = min(delay * 2, self._poll_interval * 8)
            for follower in self._followers:
                follower._frames.put_nowait(Gap(reconnected=True))

    def _route(self, item: Event | Preview) -> None:
        """Hand a frame to whoever follows its prompt: ``status`` to all, a preview to the
        running prompt's follower, a frame of a prompt nobody follows to the adopting ones."""
        if isinstance(item, Preview):
            targets = self._owners(self._executing)
        elif item.type == "status":
            targets = self._followers
        else:
            prompt_id = item.data.get("prompt_id")
            if item.type in ("execution_start", "executing") and item.data.get("node", "") is not None:
                self._executing = prompt_id or self._executing
            elif item.type in ("executing", "execution_success", "execution_error", "execution_interrupted"):
                self._executing = None
            targets = self._owners(prompt_id or self._executing)  # no prompt_id: the node a new socket is told
        for follower in targets:
            follower._frames.put_nowait(item)

    def _owners(self, prompt_id: str | None) -> list[Follower]:
        if prompt_id is None:
            return []
        return ([f for f in self._followers if prompt_id in f.prompt_ids]
                or [f for f in self._followers if f.adopt])

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
            failures = 0
            while True:
                item = await follower.next()
                if isinstance(item, Preview):
                    await run.take(item)
                elif isinstance(item, Event):
                    if await self._on_event(run, item):
                        break
                else:  # frames may be lost: ask the backend
                    try:
                        if await self._catch_up(run):
                            break
                        failures = 0
                    except BackendUnavailable:
                        failures += 1
                        if failures >= self._retries:
                            raise
        if run.started_ms is not None and run.succeeded_ms is not None:
            # every frame of the run arrived: the outputs are complete without asking /history
            return PromptResult(run.prompt_id, run.outputs, run.succeeded_ms - run.started_ms, run.pushed)
        entry = await self.history(run.prompt_id)
        if entry is None:
            return PromptResult(run.prompt_id, run.outputs, None, run.pushed)
        _raise_if_failed(entry)
        return PromptResult(run.prompt_id, {**run.outputs, **entry.outputs}, entry.execution_ms, run.pushed)

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
        _raise_if_failed(entry)
        return True


def _client_id(item: list) -> str | None:
    """The ``client_id`` in a queue item's extra data: [number, prompt_id, prompt, extra_data, outputs]."""
    extra = item[3] if len(item) > 3 and isinstance(item[3], dict) else {}
    client_id = extra.get("client_id")
    return client_id if isinstance(client_id, str) else None


def _raise_if_failed(entry: HistoryEntry) -> None:
    if entry.status_str != "error":
        return
    for kind, data in entry.messages:
        if kind == "execution_error":
            raise ExecutionFailed(data)
        if kind == "execution_interrupted":
            raise Interrupted(data)
    raise ComfyError(f"prompt {entry.prompt_id} failed without an error message")
