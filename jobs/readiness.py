"""Which commands can run where: the model files a command's graph names, against those a backend offers.

A command is ready on a backend when every model file its graph names is among the backend's
models (the choices of its loaders in ``/object_info``, which the health checks record in the
backends table: ``jobs/backends.py``). A graph names a model file where ComfyUI would refuse one
it lacks (``errors.file_folder``: a loader's input, or a value with a model file's extension), but
the checkpoint of a command whose jobs choose theirs (``--model``: /img), which is a stand-in. Each
file carries its download URL where a shipped command names it (``model_sources``). Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

from . import model_graph
from .errors import file_folder
from .model_sources import model_url
from .options import command_options
from .workflow import WorkflowError


@dataclasses.dataclass(frozen=True)
class ModelFile:
    name: str
    folder: str
    url: str | None  # None: no shipped command names it


@dataclasses.dataclass(frozen=True)
class Readiness:
    """A command on one backend: ``ready`` None while the backend's models are not known yet."""

    ready: bool | None
    missing: list[ModelFile]


def needed_files(workflow: Mapping[str, Any]) -> list[ModelFile]:
    """The model files ``workflow`` (API format) names, each once, by name."""
    found: dict[str, ModelFile] = {}
    per_job = _checkpoint_per_job(workflow)
    for node in workflow.values():
        for input_name, value in (node.get("inputs") or {}).items():
            if per_job and node.get("class_type") == model_graph.LOADER and input_name == "ckpt_name":
                continue
            if isinstance(value, str) and value and value not in found:
                folder = file_folder(node.get("class_type", ""), input_name, value)
                if folder is not None:
                    found[value] = ModelFile(value, folder, model_url(value))
    return sorted(found.values(), key=lambda file: file.name)


def _checkpoint_per_job(workflow: Mapping[str, Any]) -> bool:
    try:
        return command_options(dict(workflow)).offers("model")
    except WorkflowError:  # no Telegram Input (not a command's graph), or a malformed declaration
        return False


def readiness(needed: list[ModelFile], offered: Collection[str] | None) -> Readiness:
    """``needed`` on a backend that offers the model files ``offered`` (None: not known yet)."""
    if offered is None:
        return Readiness(None, [])
    missing = [file for file in needed if file.name not in offered]
    return Readiness(not missing, missing)


def missing_everywhere(needed: list[ModelFile], offers: Collection[Collection[str]]) -> bool:
    """Whether every backend of ``offers`` (each one's model files) lacks some of ``needed``; False
    when nothing is needed or no backend's models are known (nothing says the command cannot run)."""
    return bool(needed and offers) and not any(readiness(needed, offered).ready for offered in offers)


def known_models(backend) -> Collection[str] | None:
    """A backends-table row's model files; None before its first health check."""
    return None if backend.checked_at is None else backend.models
