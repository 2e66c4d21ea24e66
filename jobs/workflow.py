"""Pure functions over API-format workflows: find the Telegram nodes, fill a job in."""

from __future__ import annotations

import copy

INPUT_NODE = "CourierTelegramInput"
OUTPUT_NODE = "CourierTelegramOutput"
JOB_INPUT = "bot_job"  # Telegram Output's input that the bot sets for each job


class WorkflowError(ValueError):
    """A workflow cannot serve as a bot command; the message says why."""


def nodes_of(workflow: dict, class_type: str) -> list[str]:
    return [node_id for node_id, node in workflow.items()
            if isinstance(node, dict) and node.get("class_type") == class_type]


def input_node(workflow: dict) -> str:
    """The id of the one Telegram Input node."""
    found = nodes_of(workflow, INPUT_NODE)
    if len(found) != 1:
        raise WorkflowError(f"a command needs exactly one Telegram Input node, this workflow has {len(found)}")
    return found[0]


def output_nodes(workflow: dict) -> list[str]:
    """Nodes whose results the bot delivers: Telegram Output, else any saving node."""
    return nodes_of(workflow, OUTPUT_NODE) or [
        node_id for node_id, node in workflow.items()
        if isinstance(node, dict) and node.get("class_type") in ("SaveImage", "SaveVideo", "SaveAnimatedWEBP")]


def used_outputs(workflow: dict) -> set[int]:
    """The indexes of the Telegram Input's outputs that some node takes."""
    source = input_node(workflow)
    return {value[1] for node in workflow.values() if isinstance(node, dict)
            for value in node.get("inputs", {}).values()
            if isinstance(value, list) and len(value) == 2 and value[0] == source}


def requires_image(workflow: dict) -> bool:
    """Whether the command edits the user's picture (the Input node's ``require_image``)."""
    return bool(workflow[input_node(workflow)].get("inputs", {}).get("require_image", False))


def fill_job(workflow: dict, *, prompt: str, seed: int, image: str = "",
             chat_id: int | str = "", user_id: int | str = "", options: dict | None = None,
             job: str = "") -> dict:
    """A copy of the workflow with the job's values set on the Telegram Input node.

    ``options`` are the Input values the user's options set (width, height, steps, negative, batch).
    ``job`` (the job's prompt id) goes to every Telegram Output: a new value for each job, so
    ComfyUI's cache never answers the node in place of running it, and the node hands its files
    to the bot that asked (``nodes/telegram_output.py``).
    """
    filled = copy.deepcopy(workflow)
    inputs = filled[input_node(filled)].setdefault("inputs", {})
    inputs.update(options or {})
    inputs.update(prompt=prompt, seed=seed, image=image, chat_id=str(chat_id), user_id=str(user_id))
    for node_id in nodes_of(filled, OUTPUT_NODE):
        filled[node_id].setdefault("inputs", {})[JOB_INPUT] = job
    return filled
