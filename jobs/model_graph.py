"""The model options on a command's graph: its checkpoint, a LoRA chain, cfg, and img2img strength.

They set ComfyUI's own nodes of the graph, not the Telegram Input (a file name cannot travel on a
link into a loader's list): ``offered`` says which a graph can take, ``apply`` gives the graph a job
runs. It is applied when the job is queued, so the job's params name the model files it needs and
the claim (``claim_job``) gives it only to a backend that has them.

- ``--model``: the ``ckpt_name`` of every CheckpointLoaderSimple.
- ``--lora``: a LoraLoader chain right after each checkpoint loader (what took the loader's MODEL
  and CLIP takes the chain's last ones).
- ``--cfg``: every sampler's ``cfg``.
- img2img (a picture given): a sampler that starts from an EmptyLatentImage starts from the
  picture instead (VAEEncode with the VAE that decodes the result), its denoise the strength.
- A ``--size`` tells the Native Size node (``nodes/native_size.py``) to keep it; without one the
  node brings the Input's size (its default, or an ``--ar``'s) to the loaded model's pixel count.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

from .workflow import input_node, nodes_of

LOADER = "CheckpointLoaderSimple"
LORA_LOADER = "LoraLoader"
EMPTY_LATENT = "EmptyLatentImage"
VAE_ENCODE = "VAEEncode"
VAE_DECODE = "VAEDecode"
NATIVE_SIZE = "CourierNativeSize"
ADDED_NODES = (LORA_LOADER, VAE_ENCODE)
"""The node types ``apply`` may add to a graph."""
INPUT_IMAGE = 1  # the Telegram Input's image output


def offered(workflow: dict) -> dict[str, bool]:
    """Which model options the graph can take (``options.command_options`` offers them where true)."""
    loaders = bool(nodes_of(workflow, LOADER))
    return {"model": loaders, "lora": loaders, "cfg": bool(list(_with_number(workflow, "cfg"))),
            "strength": bool(_img2img_points(workflow))}


def native_sized(workflow: dict) -> bool:
    """Whether a job without ``--size`` gets the loaded model's own size (a Native Size node left on)."""
    return any(workflow[node_id].get("inputs", {}).get("native", True) is not False
               for node_id in nodes_of(workflow, NATIVE_SIZE))


def checkpoint_of(workflow: dict) -> str | None:
    """The file the graph's (first) checkpoint loader loads."""
    loaders = nodes_of(workflow, LOADER)
    return workflow[loaders[0]]["inputs"].get("ckpt_name") if loaders else None


def apply(workflow: dict, *, checkpoint: str | None = None, loras: Sequence[tuple[str, float]] = (),
          cfg: float | None = None, strength: float | None = None, sized: bool = False) -> dict:
    """A copy of ``workflow`` with the chosen files and values; ``strength`` (not None) makes it img2img
    on the Telegram Input's picture, ``sized`` keeps the Input's size (no native size)."""
    graph = copy.deepcopy(workflow)
    for loader in nodes_of(graph, LOADER):
        if checkpoint is not None:
            graph[loader]["inputs"]["ckpt_name"] = checkpoint
        if loras:
            _chain_loras(graph, loader, loras)
    if cfg is not None:
        for node in _with_number(graph, "cfg"):
            node["inputs"]["cfg"] = cfg
    if strength is not None:
        _img2img(graph, strength)
    if sized:
        for node_id in nodes_of(graph, NATIVE_SIZE):
            graph[node_id]["inputs"]["native"] = False
    return graph


def _with_number(graph: dict, name: str) -> Iterator[dict]:
    """The nodes whose input ``name`` is a number widget (not a link)."""
    for node in graph.values():
        value = node.get("inputs", {}).get(name) if isinstance(node, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            yield node


def _new_id(graph: dict) -> str:
    return str(1 + max((int(key) for key in graph if key.isdigit()), default=0))


def _links_to(graph: dict, source: str, output: int) -> Iterator[tuple[dict, str]]:
    """(inputs, name) of every input that takes output ``output`` of node ``source``."""
    for node in graph.values():
        inputs = node.get("inputs", {}) if isinstance(node, dict) else {}
        for name, value in inputs.items():
            if value == [source, output]:
                yield inputs, name


def _chain_loras(graph: dict, loader: str, loras: Sequence[tuple[str, float]]) -> None:
    takers = {output: list(_links_to(graph, loader, output)) for output in (0, 1)}  # MODEL, CLIP
    model, clip = [loader, 0], [loader, 1]
    for name, weight in loras:
        node_id = _new_id(graph)
        graph[node_id] = {"class_type": LORA_LOADER, "inputs": {
            "model": model, "clip": clip, "lora_name": name, "strength_model": weight, "strength_clip": weight},
            "_meta": {"title": "Load LoRA"}}
        model, clip = [node_id, 0], [node_id, 1]
    for output, last in ((0, model), (1, clip)):
        for inputs, name in takers[output]:
            inputs[name] = last


def _img2img_points(graph: dict) -> list[tuple[str, str, list]]:
    """(sampler, empty latent, VAE link) of each sampler with a denoise that starts from an
    EmptyLatentImage, where a VAEDecode gives the VAE to encode the picture with."""
    vaes = [graph[node_id]["inputs"].get("vae") for node_id in nodes_of(graph, VAE_DECODE)]
    vae = next((link for link in vaes if isinstance(link, list)), None)
    if vae is None:
        return []
    points = []
    for sampler_id, sampler in graph.items():
        inputs = sampler.get("inputs", {}) if isinstance(sampler, dict) else {}
        latent = inputs.get("latent_image")
        if ("denoise" in inputs and isinstance(latent, list) and latent[0] in graph
                and graph[latent[0]].get("class_type") == EMPTY_LATENT):
            points.append((sampler_id, latent[0], vae))
    return points


def _img2img(graph: dict, strength: float) -> None:
    picture = [input_node(graph), INPUT_IMAGE]
    for sampler, empty, vae in _img2img_points(graph):
        encode = _new_id(graph)
        graph[encode] = {"class_type": VAE_ENCODE, "inputs": {"pixels": picture, "vae": vae},
                         "_meta": {"title": "VAE Encode"}}
        graph[sampler]["inputs"].update(latent_image=[encode, 0], denoise=strength)
        if not any(_links_to(graph, empty, 0)):
            del graph[empty]
