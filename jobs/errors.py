"""ComfyUI backend errors, and their summaries in plain words for Telegram users.

One exception tree (``ComfyError`` and subclasses). Every error can describe
itself as ``Problem`` values: a message key plus parameters, so a caller can
localize; the text of each key lives in the pack's ``i18n`` catalog.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from ..core import i18n
from .model_sources import model_url

MESSAGES: Mapping[str, str] = i18n.catalog("en")
"""The English text of each key (the default of every ``render``)."""

# (loader class, input name or prefix) -> models folder; other loaders -> "models".
MODEL_FOLDERS: dict[str, dict[str, str]] = {
    "UNETLoader": {"unet_name": "diffusion_models"},
    "DualCLIPLoader": {"clip_name": "text_encoders"},
    "TripleCLIPLoader": {"clip_name": "text_encoders"},
    "CLIPLoader": {"clip_name": "text_encoders"},
    "VAELoader": {"vae_name": "vae"},
    "CheckpointLoaderSimple": {"ckpt_name": "checkpoints"},
    "LoraLoader": {"lora_name": "loras"},
    "LoraLoaderModelOnly": {"lora_name": "loras"},
    "ControlNetLoader": {"control_net_name": "controlnet"},
    "UpscaleModelLoader": {"model_name": "upscale_models"},
    "CLIPVisionLoader": {"clip_name": "clip_vision"},
}
_MODEL_FILE = re.compile(r"\.(safetensors|sft|ckpt|pt|pth|bin|gguf|onnx)$", re.IGNORECASE)
_UNKNOWN_NODE = re.compile(r"node (.+) does not exist")
_DISK_FULL = ("no space left on device", "disk quota exceeded", "[errno 28]", "[errno 122]")
"""How ENOSPC and EDQUOT read in an exception's message (Python's ``OSError`` and torch's alike)."""
_MAX_TEXT = 500


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing that went wrong, as a message key and its parameters."""

    key: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def render(self, messages: Mapping[str, str] = MESSAGES) -> str:
        """The text for ``key`` from ``messages`` (English where it lacks the key) filled with ``params``."""
        return (messages.get(self.key) or MESSAGES[self.key]).format(**self.params)

    def __str__(self) -> str:
        return self.render()


def render_problems(problems: list[Problem], messages: Mapping[str, str] = MESSAGES) -> str:
    """All problems, one per line."""
    return "\n".join(p.render(messages) for p in problems)


def describe_error(exc: ComfyError, messages: Mapping[str, str] = MESSAGES) -> str:
    """Plain words for a ComfyError, one line per problem, in the language of ``messages``."""
    return render_problems(exc.problems, messages)


def is_model_file(name: str) -> bool:
    """Whether a file name is a model's (by its extension, as ComfyUI's model folders list them)."""
    return _MODEL_FILE.search(name) is not None


def model_folder(node_type: str, input_name: str) -> str | None:
    """The models folder a loader's input reads from; None if it is not a known loader input."""
    for prefix, folder in MODEL_FOLDERS.get(node_type, {}).items():
        if input_name.startswith(prefix):
            return folder
    return None


def file_folder(node_type: str, input_name: str, value: str) -> str | None:
    """The models folder of ``value`` set on a node's input: a loader's (``model_folder``), ``models``
    for another node's value with a model file's extension; None if it names no model file."""
    folder = model_folder(node_type, input_name)
    if folder is None and is_model_file(value):
        folder = "models"
    return folder


def summarize_rejection(reply: Mapping[str, Any]) -> list[Problem]:
    """Plain-words problems from a 400 ``POST /prompt`` reply (``{"error", "node_errors"}``)."""
    error = reply.get("error") or {}
    node_errors = reply.get("node_errors") or {}
    problems: list[Problem] = []
    for node_id, entry in node_errors.items():
        node_type = entry.get("class_type", "?")
        for err in entry.get("errors", []):
            problem = _node_problem(str(node_id), node_type, err)
            if problem.render() not in (p.render() for p in problems):  # e.g. one file missing for two nodes
                problems.append(problem)
    if problems:
        return problems
    unknown = _UNKNOWN_NODE.search(error.get("message", ""))
    if error.get("type") == "invalid_prompt" and unknown:
        return [Problem("missing_node", {"node_type": unknown.group(1)})]
    message, details = error.get("message") or "unknown error", error.get("details", "")
    return [Problem("prompt_rejected", {"message": message, "details": details, "text": _text(message, details)})]


def _node_problem(node_id: str, node_type: str, err: Mapping[str, Any]) -> Problem:
    extra = err.get("extra_info") or {}
    input_name = extra.get("input_name", "")
    value = extra.get("received_value")
    if err.get("type") == "value_not_in_list" and isinstance(value, str):
        folder = file_folder(node_type, input_name, value)
        if folder is not None:
            params = {"filename": value, "folder": folder, "node_type": node_type, "node_id": node_id,
                      "input_name": input_name}
            url = model_url(value)  # a shipped command's file: where to download it, on the same line
            return Problem("missing_model_from", {**params, "url": url}) if url else Problem("missing_model", params)
    message, details = err.get("message", ""), err.get("details", "")
    params = {"node_id": node_id, "node_type": node_type, "input_name": input_name,
              "message": message, "details": details, "text": _text(message, details, input_name)}
    return Problem("invalid_input", params) if input_name else Problem("invalid_node", params)


def _text(message: str, details: str, input_name: str = "") -> str:
    """ComfyUI's message, with its details when they say more than the input name."""
    return message if details in ("", input_name) else f"{message}: {details}"


def summarize_execution_error(data: Mapping[str, Any]) -> Problem:
    """A plain-words problem from an ``execution_error`` event (no traceback)."""
    message = str(data.get("exception_message", "")).strip()
    if len(message) > _MAX_TEXT:
        message = message[:_MAX_TEXT] + "…"
    params = {"node_id": str(data.get("node_id", "?")), "node_type": data.get("node_type", "?"),
              "exception_type": data.get("exception_type", ""), "exception_message": message}
    if "OutOfMemory" in params["exception_type"] or "out of memory" in message.lower():
        return Problem("out_of_memory", params)
    if any(words in message.lower() for words in _DISK_FULL):  # where is for the operator's log (``detail``)
        return Problem("server_disk_full", params)
    return Problem("execution_failed", params)


class ComfyError(Exception):
    """Base of every error talking to a ComfyUI backend."""

    @property
    def detail(self) -> str:
        """What the operator's log says of it (the user reads ``problems``)."""
        return str(self)

    @property
    def problems(self) -> list[Problem]:
        """What went wrong, for the user."""
        return [Problem("backend_error", {"message": str(self)})]


class BackendUnavailable(ComfyError):
    """The backend cannot be reached (connection refused, timeout, proxy error, 502-504)."""

    @property
    def problems(self) -> list[Problem]:
        return [Problem("backend_unavailable", {"message": str(self)})]


class RequestFailed(ComfyError):
    """The backend answered an unexpected HTTP status."""

    def __init__(self, message: str, status: int, body: str = ""):
        super().__init__(message)
        self.status = status
        self.body = body


class PromptRejected(ComfyError):
    """``POST /prompt`` refused the workflow (HTTP 400); ``node_errors`` as ComfyUI sent them."""

    def __init__(self, reply: Mapping[str, Any]):
        self.error: dict = dict(reply.get("error") or {})
        self.node_errors: dict = dict(reply.get("node_errors") or {})
        super().__init__(render_problems(self.problems))

    @property
    def problems(self) -> list[Problem]:
        return summarize_rejection({"error": self.error, "node_errors": self.node_errors})


class ExecutionFailed(ComfyError):
    """A node raised while the prompt ran (``execution_error``)."""

    def __init__(self, data: Mapping[str, Any]):
        self.data = dict(data)
        self.node_id = str(data.get("node_id", ""))
        self.node_type = str(data.get("node_type", ""))
        self.exception_type = str(data.get("exception_type", ""))
        self.exception_message = str(data.get("exception_message", "")).strip()
        super().__init__(summarize_execution_error(data).render())

    @property
    def problems(self) -> list[Problem]:
        return [summarize_execution_error(self.data)]

    @property
    def detail(self) -> str:
        """The node, ComfyUI's own message and the last line of code it ran (where, e.g., the disk filled)."""
        frames = self.data.get("traceback") or [""]
        where = str(frames[-1]).strip().splitlines()[:1]
        return (f"{self.node_type} (node {self.node_id}) raised {self.exception_type}: {self.exception_message}"
                + (f" at {where[0]}" if where else ""))


class Interrupted(ComfyError):
    """The prompt was interrupted (``execution_interrupted``)."""

    def __init__(self, data: Mapping[str, Any]):
        self.data = dict(data)
        self.node_id = str(data.get("node_id", ""))
        self.node_type = str(data.get("node_type", ""))
        super().__init__(f"interrupted at {self.node_type} (node {self.node_id})")

    @property
    def problems(self) -> list[Problem]:
        return [Problem("interrupted", {"node_id": self.node_id, "node_type": self.node_type})]


class PromptLost(ComfyError):
    """The backend knows the prompt neither in its queue nor in its history (it restarted)."""

    @property
    def problems(self) -> list[Problem]:
        return [Problem("prompt_lost", {"message": str(self)})]
