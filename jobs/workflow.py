"""Pure functions over API-format workflows: find the Telegram nodes, fill a job in."""

from __future__ import annotations

import copy

INPUT_NODE = "CourierTelegramInput"
OUTPUT_NODE = "CourierTelegramOutput"
IMAGE_OUTPUT_INDEX = 1  # CourierTelegramInput's RETURN_NAMES: prompt, image, mask, ...
MASK_OUTPUT_INDEX = 2


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


def consumes_image(workflow: dict) -> bool:
    """Whether any node uses the Telegram Input's image or mask (so the command needs a picture)."""
    source = input_node(workflow)
    for node in workflow.values():
        for value in node.get("inputs", {}).values():
            if (isinstance(value, list) and len(value) == 2 and str(value[0]) == source
                    and value[1] in (IMAGE_OUTPUT_INDEX, MASK_OUTPUT_INDEX)):
                return True
    return False


def fill_job(workflow: dict, *, prompt: str, seed: int, image: str = "",
             chat_id: int | str = "", user_id: int | str = "") -> dict:
    """A copy of the workflow with the job's values set on the Telegram Input node."""
    filled = copy.deepcopy(workflow)
    inputs = filled[input_node(filled)].setdefault("inputs", {})
    inputs.update(prompt=prompt, seed=seed, image=image, chat_id=str(chat_id), user_id=str(user_id))
    return filled
