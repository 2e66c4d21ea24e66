"""Load the shipped command workflows (workflows/api/commands.json) into the command table."""

from __future__ import annotations

import json
from pathlib import Path

from ..core import i18n
from ..core.logs import get_logger
from ..store import commands
from . import model_graph
from .workflow import input_node

log = get_logger("commands")

SEED_DIR = Path(__file__).resolve().parent.parent / "workflows" / "api"


def seed_manifest(seed_dir: Path = SEED_DIR) -> dict:
    return json.loads((seed_dir / "commands.json").read_text(encoding="utf-8"))


def shipped_workflow(entry: dict, seed_dir: Path = SEED_DIR) -> dict:
    """The command's graph as it is stored: its manifest ``options`` declared on its Telegram Input."""
    workflow = json.loads((seed_dir / entry["file"]).read_text(encoding="utf-8"))
    workflow[input_node(workflow)]["inputs"]["options"] = entry.get("options", "")
    return workflow


ADDED_NODE_TYPES = frozenset((
    "PreviewAny", "PreviewImage", "CourierBenchmark",  # /bench and /compare (bench.benchmark_prompt)
    "UpscaleModelLoader", "ImageUpscaleWithModel",  # /upscale with a model (upscale.with_model)
    *model_graph.ADDED_NODES,  # --lora and img2img (model_graph.apply)
))


async def sendable_node_types(pool=None, seed_dir: Path = SEED_DIR) -> set[str]:
    """Every node type a bot of this pack may queue: the shipped graphs', what jobs add to a graph, and
    (``pool``) those of the commands stored here; what the hidden service's gateway lets through."""
    shipped = {node["class_type"] for entry in seed_manifest(seed_dir).values()
               for node in shipped_workflow(entry, seed_dir).values()}
    return shipped | ADDED_NODE_TYPES | (await commands.node_types(pool) if pool is not None else set())


async def seed_commands(store, seed_dir: Path = SEED_DIR) -> list[str]:
    """Add or refresh the shipped commands; a published command of the same name wins.

    A shipped command's description is its English catalog text (``command_<name>``); the menu
    and ``/help`` show the user's language.
    """
    refreshed = []
    for name, entry in seed_manifest(seed_dir).items():
        description = i18n.catalog("en")[f"command_{name}"]
        if await commands.seed_command(store.pool, name, workflow=shipped_workflow(entry, seed_dir),
                                       description=description, owner="seed"):
            refreshed.append(name)
    if refreshed:
        log.info("commands loaded: %s", ", ".join(f"/{n}" for n in refreshed))
    return refreshed
