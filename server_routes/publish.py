"""Publishing an editor graph as a bot command: the checks and the stored form, without HTTP.

The graph comes in ComfyUI's API format (``app.graphToPrompt().output``): node id ->
``{"class_type", "inputs", "_meta"?}``, links as ``[node id, output index]``.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Collection
from typing import Any, NamedTuple

from ..jobs import autopublish
from ..jobs.errors import Problem
from ..jobs.file_inputs import graph_file_problem
from ..jobs.options import command_options, listing
from ..jobs.workflow import OUTPUT_NODE, WorkflowError, input_node, nodes_of
from ..store import commands

MAX_NODES = 2000
EDITOR_ONLY_INPUTS = {OUTPUT_NODE: {"send_to_chat": ""}}  # reset in the stored command


class NameTaken(Exception):
    """A command of that name exists and the caller did not ask to replace it."""


class ReservedName(ValueError):
    """The name belongs to a built-in bot command."""


class FileRefused(WorkflowError):
    """A file input names what a job may not use (``jobs/file_inputs.py``); ``problem`` for the catalog."""

    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


class Published(NamedTuple):
    command: commands.Command
    created: bool
    found: dict[str, Any] | None = None  # with auto: what was found (autopublish.summary)


def check_graph(workflow: Any, node_types: Collection[str]) -> None:
    """Raise WorkflowError unless ``workflow`` is an API-format graph that can serve as a command
    (FileRefused where a file input names what a job may not use)."""
    check_nodes(workflow, node_types)
    command_options(workflow)  # one Telegram Input, and a well-formed declaration of options
    if not nodes_of(workflow, OUTPUT_NODE):
        raise WorkflowError("a command needs at least one Telegram Output node")
    if (problem := graph_file_problem(workflow)) is not None:
        raise FileRefused(problem)


def check_nodes(workflow: Any, node_types: Collection[str]) -> None:
    """Raise WorkflowError unless ``workflow`` is an API-format graph of installed nodes, its links whole."""
    if not isinstance(workflow, dict) or not workflow:
        raise WorkflowError("the workflow must be a non-empty object in ComfyUI's API format "
                            "(node id -> {class_type, inputs})")
    if len(workflow) > MAX_NODES:
        raise WorkflowError(f"the workflow has {len(workflow)} nodes; at most {MAX_NODES}")
    unknown = set()
    for node_id, node in workflow.items():
        if not isinstance(node, dict) or not isinstance(node.get("class_type"), str):
            raise WorkflowError(f"node {node_id!r} has no class_type (is this the API format?)")
        if not isinstance(node.get("inputs", {}), dict):
            raise WorkflowError(f"node {node_id!r}: inputs must be an object")
        if node["class_type"] not in node_types:
            unknown.add(node["class_type"])
        for name, value in node.get("inputs", {}).items():
            if _is_link(value) and value[0] not in workflow:
                raise WorkflowError(f"node {node_id!r} input {name!r} links to a missing node {value[0]!r}")
    if unknown:
        raise WorkflowError(f"node types not installed on this ComfyUI: {', '.join(sorted(unknown))}")


def _is_link(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
            and isinstance(value[1], int) and not isinstance(value[1], bool))


def command_name(workflow: dict, name: str | None) -> str:
    """``name``, else the Telegram Input's ``command`` widget; checked as a Telegram command name."""
    if name is None:
        name = workflow[input_node(workflow)].get("inputs", {}).get("command")
        if not isinstance(name, str):
            raise ValueError("give a name, or set the Telegram Input's command")
    from ..bot.handlers import BUILTIN_COMMANDS  # python-telegram-bot: load it on first use only

    name = commands.check_name(name.removeprefix("/"))
    if name in BUILTIN_COMMANDS:
        raise ReservedName(f"/{name} is a built-in command")
    return name


def stored_form(workflow: dict, name: str) -> dict:
    """The graph as the bot runs it: the Input names the command, editor-only inputs are reset."""
    stored = copy.deepcopy(workflow)
    stored[input_node(stored)].setdefault("inputs", {})["command"] = name
    for class_type, defaults in EDITOR_ONLY_INPUTS.items():
        for node_id in nodes_of(stored, class_type):
            inputs = stored[node_id].setdefault("inputs", {})
            inputs.update({k: v for k, v in defaults.items() if k in inputs})
    return stored


def found_in(workflow: Any, node_types: Collection[str], choices: dict[str, Any]) -> autopublish.Found:
    """What ``autopublish`` finds in a graph without Telegram nodes, with the caller's ``choices``
    (``prompt``, ``image``, ``outputs``); WorkflowError if it is no graph of installed nodes."""
    check_nodes(workflow, node_types)
    return autopublish.analyze(workflow, **choices)


async def publish(db, workflow: Any, node_types: Collection[str], *, name: str | None = None,
                  description: str = "", owner: str | None = None, replace: bool = False,
                  auto: dict[str, Any] | None = None) -> Published:
    """Check ``workflow`` and store it as a command; WorkflowError, ValueError or NameTaken if not.

    With ``auto`` (the choices of ``found_in``) the graph has no Telegram nodes: they are put in
    (``autopublish.rewritten``), and what runs is the graph stored.
    """
    shown = None
    if auto is not None:
        found = found_in(workflow, node_types, auto)
        if name is None:
            raise ValueError("give the command a name (a graph without a Telegram Input has none)")
        shown = autopublish.summary(workflow, found)
        workflow = autopublish.rewritten(workflow, found, command_name({}, name))
    check_graph(workflow, node_types)
    name = command_name(workflow, name)
    existing = await commands.get_command(db, name)
    if existing is not None and not replace:
        raise NameTaken(f"/{name} exists ({existing.source}); publish with replace to overwrite it")
    command = await commands.put_command(db, name, workflow=stored_form(workflow, name),
                                         description=description.strip(), owner=owner)
    return Published(command, existing is None, shown)


def summary(command: commands.Command) -> dict[str, Any]:
    """A command as the list shows it (the workflow itself is in the export)."""
    try:
        inputs = command.workflow[input_node(command.workflow)].get("inputs", {})
    except WorkflowError:
        inputs = {}
    try:
        options = listing(command_options(command.workflow))
    except WorkflowError:  # no one Telegram Input, or a malformed declaration: nothing to offer
        options = []
    return {"name": command.name, "description": command.description, "owner": command.owner,
            "enabled": command.enabled, "source": command.source,
            "requires_image": bool(inputs.get("require_image", False)), "options": options,
            "nodes": len(command.workflow), "created_at": command.created_at,
            "updated_at": command.updated_at}


def comfyui_node_types() -> frozenset[str] | None:
    """The node types this ComfyUI has loaded; None outside ComfyUI.

    ComfyUI's top-level ``nodes`` module is imported before any pack loads; looking it up in
    ``sys.modules`` (not importing) never picks up another folder of that name.
    """
    mappings = getattr(sys.modules.get("nodes"), "NODE_CLASS_MAPPINGS", None)
    return frozenset(mappings) if isinstance(mappings, dict) else None
