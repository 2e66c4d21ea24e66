"""Publishing an editor graph as a bot command: the checks and the stored form, without HTTP.

The graph comes in ComfyUI's API format (``app.graphToPrompt().output``): node id ->
``{"class_type", "inputs", "_meta"?}``, links as ``[node id, output index]``.

Before it is stored, the graph passes our own checks (shape, installed nodes, whole links, no
cycle, files: ``check_graph``), then ComfyUI's own validation as its ``POST /prompt`` runs it
(``execution.validate_prompt``, in this process: ``comfyui_problems``), so what ComfyUI would refuse
in every run is refused here with its reason. A model file this ComfyUI lacks is no refusal (another
backend may have it): the backends' model lists say where it is missing, and a graph that no backend
can run is published only when the caller confirms it (``ModelsMissing``). The route runs only
inside ComfyUI (it needs ComfyUI's node list): a bot host without ComfyUI publishes nothing.
"""

from __future__ import annotations

import copy
import sys
import uuid
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from ..jobs import autopublish
from ..jobs.errors import Problem, file_folder, render_problems, summarize_rejection
from ..jobs.file_inputs import graph_file_problem
from ..jobs.options import command_options, listing
from ..jobs.readiness import missing_everywhere, needed_files
from ..jobs.workflow import OUTPUT_NODE, WorkflowError, input_node, nodes_of
from ..store import commands
from .readiness import per_backend

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


class ComfyRefused(WorkflowError):
    """ComfyUI's own validation refuses the graph (it would refuse every run); ``problems`` say why."""

    def __init__(self, problems: list[Problem]):
        super().__init__(render_problems(problems))
        self.problems = problems


class ModelsMissing(Exception):
    """No backend has every model file the graph names, and the caller did not confirm publishing it."""

    def __init__(self, models: list[dict]):
        super().__init__("no backend has every model file of this graph")
        self.models = models  # per backend: {url, ready, missing}


class Published(NamedTuple):
    command: commands.Command
    created: bool
    found: dict[str, Any] | None = None  # with auto: what was found (autopublish.summary)
    models: list[dict] | None = None  # per backend: {url, ready, missing} (readiness.per_backend)


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
    if cycle := _cycle(workflow):
        raise WorkflowError(f"the graph's links go round in a cycle ({' → '.join(f'#{n}' for n in cycle)}): "
                            "a node cannot wait for its own output")


def _cycle(workflow: dict) -> list[str]:
    """Node ids along links (each to the node it takes from) back to the first, the first again at the
    end; [] where there is no cycle."""
    done: set[str] = set()
    for start in workflow:
        path, todo = [start], [iter(_sources(workflow, start))] if start not in done else []
        while todo:
            source = next(todo[-1], None)
            if source is None:
                done.add(path.pop())
                todo.pop()
            elif source in path:
                return [*path[path.index(source):], source]
            elif source not in done:
                path.append(source)
                todo.append(iter(_sources(workflow, source)))
    return []


def _sources(workflow: dict, node_id: str) -> list[str]:
    return [value[0] for value in workflow[node_id].get("inputs", {}).values() if _is_link(value)]


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
                  auto: dict[str, Any] | None = None, offers: Mapping[str, Collection[str] | None] | None = None,
                  confirm_missing: bool = False) -> Published:
    """Check ``workflow`` and store it as a command; WorkflowError (ComfyRefused where ComfyUI's own
    validation refuses it), ValueError, NameTaken or ModelsMissing if not.

    With ``auto`` (the choices of ``found_in``) the graph has no Telegram nodes: they are put in
    (``autopublish.rewritten``), and what runs is the graph stored. ``offers``: each backend's model
    files (``readiness.backend_offers``); where none has every file the graph names, it is stored only
    with ``confirm_missing``.
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
    stored = stored_form(workflow, name)
    if problems := await comfyui_problems(stored):
        raise ComfyRefused(problems)
    existing = await commands.get_command(db, name)
    if existing is not None and not replace:
        raise NameTaken(f"/{name} exists ({existing.source}); publish with replace to overwrite it")
    needed, offers = needed_files(stored), offers or {}
    models = per_backend(needed, offers)
    if not confirm_missing and missing_everywhere(needed, [o for o in offers.values() if o is not None]):
        raise ModelsMissing(models)
    command = await commands.put_command(db, name, workflow=stored, description=description.strip(), owner=owner)
    return Published(command, existing is None, shown, models)


async def comfyui_problems(workflow: dict) -> list[Problem] | None:
    """What ComfyUI's own validation refuses in ``workflow`` (``execution.validate_prompt``, which its
    ``POST /prompt`` runs), in plain words; [] if nothing; None outside ComfyUI.

    A model file this ComfyUI lacks ("Value not in list") is left out: another backend may have it,
    and readiness says where it is missing. As ``comfyui_node_types``, ComfyUI's top-level
    ``execution`` module is looked up, not imported; it is given a copy (it converts values in place).
    """
    validate = getattr(sys.modules.get("execution"), "validate_prompt", None)
    if validate is None:
        return None
    if unmade := _unmade_outputs(workflow, getattr(sys.modules.get("nodes"), "NODE_CLASS_MAPPINGS", {})):
        return unmade
    valid, error, _, node_errors = await validate(uuid.uuid4().hex, copy.deepcopy(workflow), None)
    refused = {node_id: {**entry, "errors": reasons} for node_id, entry in node_errors.items()
               if (reasons := [err for err in entry.get("errors", []) if not _missing_model(entry, err)])}
    if refused or (not valid and not node_errors):
        return summarize_rejection({"error": error or {}, "node_errors": refused})
    return []


def _unmade_outputs(workflow: dict, classes: Mapping[str, Any]) -> list[Problem]:
    """Links to an output their node does not have. ComfyUI's validation refuses them too, but by an
    IndexError reported on the input downstream ("tuple index out of range"): here each is named."""
    problems = []
    for node_id, node in workflow.items():
        for input_name, value in node.get("inputs", {}).items():
            source = workflow[value[0]] if _is_link(value) else None
            outputs = getattr(classes.get(source["class_type"]), "RETURN_TYPES", None) if source else None
            if isinstance(outputs, tuple | list) and not -len(outputs) <= value[1] < len(outputs):
                text = (f"links to output {value[1]} of {source['class_type']} (node {value[0]}), "
                        f"which has {len(outputs)} (0 to {len(outputs) - 1})")
                problems.append(Problem("invalid_input", {"node_id": node_id, "node_type": node["class_type"],
                                                          "input_name": input_name, "message": text,
                                                          "details": "", "text": text}))
    return problems


def _missing_model(entry: Mapping[str, Any], err: Mapping[str, Any]) -> bool:
    """Whether a node's validation error is a model file its folder does not list."""
    extra = err.get("extra_info") or {}
    value = extra.get("received_value")
    return (err.get("type") == "value_not_in_list" and isinstance(value, str)
            and file_folder(str(entry.get("class_type", "")), str(extra.get("input_name", "")), value) is not None)


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
