"""``/upscale`` on the backend that runs it: with an upscale model where it has one, else model-free.

The shipped graph (workflows/api/upscale.json) needs no model: Lanczos ×2 and a light sharpen,
ComfyUI core nodes, so every backend can take the job. Its scaling node is marked
(``_meta.courier: "upscale"``); on a backend whose ``upscale_models`` offer a ×2 or ×4 model
(RealESRGAN_x2plus.pth, 4x-UltraSharp.pth...), that node becomes UpscaleModelLoader +
ImageUpscaleWithModel, then Lanczos to ×2 overall, and the sharpen is dropped (a model
restores detail itself).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable

from ..store import backends

MARK = "upscale"
"""``_meta.courier`` of the model-free scaling node that a model may replace."""
_SCALE = re.compile(r"(?i)(?:^|[^a-z0-9])(?:x([24])|([24])x)(?:[^a-z0-9]|plus|$)")
_UPSCALER = re.compile(r"(?i)esrgan|upscal|ultrasharp|swinir|hat|nmkd|^[24]x[-_]")
_EXTENSIONS = (".pth", ".safetensors", ".pt")
FACTOR = 2.0


def upscale_model(models: Iterable[str]) -> tuple[str, int] | None:
    """(file name, its scale) of the upscale model to use among a backend's model files; ×2 ones first."""
    found = []
    for name in models:
        base = name.rsplit("/", 1)[-1]
        scale = _SCALE.search(base)
        if base.lower().endswith(_EXTENSIONS) and scale and _UPSCALER.search(base):
            found.append((int(scale[1] or scale[2]), name))
    return min(((name, scale) for scale, name in found), key=lambda pick: (pick[1], pick[0]), default=None)


def with_model(workflow: dict, model: str, scale: int) -> dict:
    """A copy of ``workflow`` whose marked node upscales with ``model`` (``scale``×), then to ×2 overall.

    A graph without the marked node (a published ``/upscale``) is returned as it is.
    """
    marked = [node_id for node_id, node in workflow.items() if node.get("_meta", {}).get("courier") == MARK]
    if not marked:
        return workflow
    changed = copy.deepcopy(workflow)
    (node_id,) = marked
    source = changed[node_id]["inputs"]["image"]
    first = max(int(key) for key in changed) + 1
    loader, upscaled = str(first), str(first + 1)
    changed[loader] = {"class_type": "UpscaleModelLoader", "inputs": {"model_name": model},
                       "_meta": {"title": "Load Upscale Model"}}
    changed[upscaled] = {"class_type": "ImageUpscaleWithModel",
                         "inputs": {"upscale_model": [loader, 0], "image": source},
                         "_meta": {"title": "Upscale Image (using Model)"}}
    changed[node_id]["inputs"].update(image=[upscaled, 0], scale_by=FACTOR / scale)
    for other_id, node in list(changed.items()):  # the sharpen after it: the model restores detail
        if node["class_type"] == "ImageSharpen" and node["inputs"].get("image") == [node_id, 0]:
            for consumer in changed.values():
                for name, value in consumer["inputs"].items():
                    if value == [other_id, 0]:
                        consumer["inputs"][name] = [node_id, 0]
            del changed[other_id]
    return changed


async def for_backend(workflow: dict, pool, backend: str) -> dict:
    """The graph to run on ``backend``: with its upscale model where the graph is marked and it has one."""
    if not any(node.get("_meta", {}).get("courier") == MARK for node in workflow.values()):
        return workflow
    found = await backends.list_backends(pool, [backend])
    pick = upscale_model(found[0].models if found else [])
    return with_model(workflow, *pick) if pick else workflow
