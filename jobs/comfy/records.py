"""What ComfyUI (v0.3.64) replies and sends, as frozen records, and how each is read off the wire.

A reply's parsing sits on its record (``QueueState.parse``, ``HistoryEntry.parse``,
``SystemStats.parse``); a websocket frame becomes an ``Event`` (text) or a ``Preview``
(binary, ``parse_preview``). Telegram Output pushes its images on the socket as PNG
``PREVIEW_IMAGE`` frames while it executes (as ComfyUI's SaveImageWebsocket does):
``png_preview_payload`` writes one, ``PUSH_MAX_BYTES`` bounds them.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping
from typing import Any

from ..errors import ComfyError, ExecutionFailed, Interrupted

_PREVIEW_IMAGE = 1  # binary frame event type; then a 4-byte format: 1 = JPEG, 2 = PNG
_PREVIEW_FORMATS = {1: "image/jpeg", 2: "image/png"}
_PNG = 2
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

    @classmethod
    def parse(cls, prompt_id: str, entry: Mapping[str, Any]) -> HistoryEntry:
        """The record of ``prompt_id`` in a ``/history`` reply."""
        status = entry.get("status") or {}
        return cls(prompt_id, entry.get("outputs") or {}, status.get("status_str", ""),
                   bool(status.get("completed")), [tuple(m) for m in status.get("messages", [])])

    @property
    def files(self) -> list[FileRef]:
        return _files(self.outputs)

    @property
    def execution_ms(self) -> int | None:
        stamps = {kind: data.get("timestamp") for kind, data in self.messages}
        start, end = stamps.get("execution_start"), stamps.get("execution_success")
        return end - start if isinstance(start, int) and isinstance(end, int) else None

    def raise_if_failed(self) -> None:
        """:raises ExecutionFailed, Interrupted, ComfyError: the prompt ended in an error"""
        if self.status_str != "error":
            return
        for kind, data in self.messages:
            if kind == "execution_error":
                raise ExecutionFailed(data)
            if kind == "execution_interrupted":
                raise Interrupted(data)
        raise ComfyError(f"prompt {self.prompt_id} failed without an error message")


@dataclasses.dataclass(frozen=True)
class QueueItem:
    number: float
    prompt_id: str
    client_id: str | None = None  # who queued it (its events go to that websocket); None: nobody said


def _client_id(item: list) -> str | None:
    """The ``client_id`` in a queue item's extra data: [number, prompt_id, prompt, extra_data, outputs]."""
    extra = item[3] if len(item) > 3 and isinstance(item[3], dict) else {}
    client_id = extra.get("client_id")
    return client_id if isinstance(client_id, str) else None


@dataclasses.dataclass(frozen=True)
class QueueState:
    """``GET /queue``: what runs now and what waits."""

    running: list[QueueItem]
    pending: list[QueueItem]

    @classmethod
    def parse(cls, reply: Mapping[str, Any]) -> QueueState:
        def items(key: str) -> list[QueueItem]:
            return [QueueItem(item[0], item[1], _client_id(item)) for item in reply.get(key, [])]

        return cls(items("queue_running"), items("queue_pending"))

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

    @classmethod
    def parse(cls, raw: dict) -> SystemStats:
        system = raw.get("system", {})
        devices = [Device(d.get("name", ""), d.get("type", ""), d.get("index"), int(d.get("vram_total") or 0),
                          int(d.get("vram_free") or 0)) for d in raw.get("devices", [])]
        return cls(str(system.get("comfyui_version", "")), str(system.get("python_version", "")),
                   str(system.get("pytorch_version", "")), int(system.get("ram_total") or 0),
                   int(system.get("ram_free") or 0), devices, raw)


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
class Gap:
    """Frames may have been missed: the websocket is down (``reconnected`` False) or was reopened."""

    reconnected: bool


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
