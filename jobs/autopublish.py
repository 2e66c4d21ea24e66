"""Publishing a graph that has no Telegram nodes: find where the user's words and picture go, and
put the pack's nodes there.

``analyze`` reads an API-format graph (shape already checked: ``server_routes/publish.py``) and
finds

- the prompt: the node with a text widget (``TEXT_INPUTS``: CLIPTextEncode's ``text``, the Flux
  and SD3 encoders' ``clip_l``/``t5xxl``, a ``prompt`` …) that a sampler's ``positive`` input comes
  from, through any conditioning nodes; a text widget fed by a node holding one string (a string
  primitive) counts as the widget. The caller may pick another text node;
- the negative prompt the same way from ``negative``, where it is another node;
- the picture: the one ``LoadImage`` (the caller may pick one, or none);
- seed widgets (``seed``, ``noise_seed``), the latent's size (an ``Empty…Latent…`` node's
  width and height) and the sampler's steps (next to a ``scheduler``, not a step range);
- the outputs: saving nodes (``SAVERS``); previews only when nothing saves.

``rewritten`` then inserts one Telegram Input whose widgets hold the graph's own values (so the
command runs as the graph did until the user says otherwise), links the places found to its
outputs, puts the Input's picture where the LoadImage's was, and replaces the outputs by
Telegram Output nodes writing under ``courier/<name>`` (the nodes left out are removed).
What cannot be published yet is ``Found.problem``: an ``Unusable`` with a code and a message.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ..gpu.session import is_link
from .options import (
    DEFAULT_SIZE,
    DEFAULT_STEPS,
    HEIGHT,
    IMAGE,
    MAX_SEED,
    NEGATIVE,
    SIZE_LIMITS,
    STEPS,
    STEPS_LIMITS,
    WIDTH,
)
from .workflow import INPUT_NODE, OUTPUT_NODE, WorkflowError

TEXT_INPUTS = ("text", "prompt", "text_g", "text_l", "clip_l", "clip_g", "t5xxl", "llama", "user_prompt")
SEED_INPUTS = ("seed", "noise_seed")
IMAGE_LOADER = "LoadImage"
SAVERS = {  # output node -> (the input it saves, what Telegram Output takes it as)
    "SaveImage": ("images", "images"), "PreviewImage": ("images", "images"),
    "SaveImageWebsocket": ("images", "images"), "SaveVideo": ("video", "video"),
    "SaveAnimatedWEBP": ("images", "animation"), "SaveAnimatedPNG": ("images", "animation"),
    "SaveWEBM": ("images", "animation"),
}
PREVIEWS = ("PreviewImage",)
GUIDERS = {"BasicGuider": "conditioning"}  # custom sampling: a guider takes the prompt's conditioning
PROMPT, MASK, SEED = 0, 2, 3  # Telegram Input outputs (the others are jobs.options')
FPS_LIMITS = (1.0, 120.0)  # Telegram Output's fps
SHOWN_TEXT = 120  # characters of a prompt the summary shows


class Unusable(WorkflowError):
    """The graph cannot be published by itself (yet): ``code`` says what is missing or ambiguous."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class Found:
    """What ``analyze`` found in a graph; node ids, in the graph's order."""

    texts: tuple[str, ...]  # every node with a text widget: what the prompt may be
    prompt: str | None
    negative: str | None
    images: tuple[str, ...]  # every LoadImage
    image: str | None
    seeds: tuple[str, ...]
    size: tuple[str, ...]  # the latent nodes whose width and height the command sets
    steps: tuple[str, ...]
    savers: tuple[str, ...]
    outputs: tuple[str, ...]
    problem: Unusable | None = None


_AUTO = object()


def analyze(workflow: dict, *, prompt: str | None = None, image: Any = _AUTO,
            outputs: list | None = None) -> Found:
    """What the graph offers, with the caller's choices: ``prompt`` (a text node's id), ``image`` (a
    LoadImage's id, or None for none), ``outputs`` (saving nodes' ids). Unusable if the graph has the
    pack's nodes already or a choice names no such node; other problems go to ``Found.problem``."""
    if any(node["class_type"] in (INPUT_NODE, OUTPUT_NODE) for node in workflow.values()):
        raise Unusable("has_telegram_nodes", "this graph has Telegram Input or Output nodes already: "
                                             "publish it as it is (without auto)")
    nodes = sorted(workflow, key=_order)
    texts = tuple(n for n in nodes if workflow[n]["class_type"] not in (*SAVERS, IMAGE_LOADER) and _texts(workflow, n))
    starts = [(n, "positive") for n in nodes if is_link(workflow[n]["inputs"].get("positive"))]
    starts += [(n, via) for n in nodes for kind, via in GUIDERS.items() if workflow[n]["class_type"] == kind]
    encoders = _sources(workflow, starts, texts)
    if prompt is not None:
        if prompt not in texts:
            raise Unusable("bad_choice", f"node {_shown(prompt)} is not a node with a text widget "
                                         f"({', '.join(map(repr, TEXT_INPUTS[:3]))}, …) in this graph")
        encoders = (prompt,)
    chosen_prompt = encoders[0] if len(encoders) == 1 else None
    negatives = _sources(workflow, [(n, "negative") for n, _ in starts if "negative" in workflow[n]["inputs"]],
                         texts)
    negative = negatives[0] if len(negatives) == 1 and negatives[0] != chosen_prompt else None
    images = tuple(n for n in nodes if workflow[n]["class_type"] == IMAGE_LOADER)
    image_unchosen = image is _AUTO and len(images) > 1
    if image is _AUTO:
        image = images[0] if len(images) == 1 else None
    elif image is not None and image not in images:
        raise Unusable("bad_choice", f"node {_shown(image)} is not a LoadImage of this graph")
    savers = tuple(n for n in nodes if workflow[n]["class_type"] in SAVERS
                   and is_link(workflow[n]["inputs"].get(SAVERS[workflow[n]["class_type"]][0])))
    if outputs is not None:
        strange = [o for o in outputs if o not in savers]
        if strange or not outputs:
            raise Unusable("bad_choice", f"outputs must name saving nodes of this graph ({', '.join(savers)}), "
                                         f"not {', '.join(_shown(o) for o in strange) or 'none'}")
        chosen_outputs = tuple(n for n in savers if n in outputs)
    else:
        saving = tuple(n for n in savers if workflow[n]["class_type"] not in PREVIEWS)
        chosen_outputs = saving or savers
    found = Found(texts, chosen_prompt, negative, images, image, _seeds(workflow, nodes),
                  _same(workflow, _latents(workflow, nodes), ("width", "height"), SIZE_LIMITS),
                  _same(workflow, _schedulers(workflow, nodes), ("steps",), STEPS_LIMITS), savers, chosen_outputs)
    problem = _problem(workflow, found, encoders, starts, image_unchosen)
    return dataclasses.replace(found, problem=problem) if problem else found


def _problem(workflow: dict, found: Found, encoders: tuple[str, ...], starts: list,
             image_unchosen: bool) -> Unusable | None:
    if not found.outputs:
        return Unusable("no_output", "the graph has no output to send: add a SaveImage, PreviewImage or "
                                     "SaveVideo node (or SaveAnimatedWEBP, SaveAnimatedPNG, SaveWEBM)")
    if len(encoders) > 1:
        return Unusable("two_prompts", f"{len(encoders)} text nodes feed the samplers' positive inputs "
                                       f"({', '.join(_named(workflow, n) for n in encoders)}): choose the prompt")
    if image_unchosen:
        return Unusable("two_images", f"{len(found.images)} LoadImage nodes "
                                      f"({', '.join(_named(workflow, n) for n in found.images)}): choose the "
                                      "user's picture, or none")
    if found.prompt is None and found.image is None:
        if not starts:
            return Unusable("no_sampler", "found no sampler (a node with a positive input, as KSampler) and no "
                                          "LoadImage: there is nowhere for the user's words or picture to go")
        return Unusable("no_prompt", "no node with a text widget feeds the positive input of "
                                     f"{_named(workflow, starts[0][0])}: choose the prompt node")
    return None


def _order(node_id: str) -> tuple:
    return (0, int(node_id), "") if node_id.isdigit() else (1, 0, node_id)


def _texts(workflow: dict, node_id: str) -> dict[str, str]:
    """The node's text widgets and their texts; a widget fed by a node that holds one string (a
    string primitive) has that string."""
    found = {}
    for name, value in workflow[node_id]["inputs"].items():
        text = value
        if name in TEXT_INPUTS and is_link(value) and value[0] in workflow:
            held = list(workflow[value[0]]["inputs"].values())
            strings = [v for v in held if isinstance(v, str)]
            text = strings[0] if len(strings) == 1 and not any(is_link(v) for v in held) else None
        if name in TEXT_INPUTS and isinstance(text, str):
            found[name] = text
    return found


def _sources(workflow: dict, starts: list[tuple[str, str]], texts: tuple[str, ...] | set[str]) -> tuple[str, ...]:
    """The text nodes the ``starts`` (node, input) come from, through nodes without text widgets.

    Through a node that carries both sides (ControlNetApplyAdvanced: positive and negative), only
    the input of the side walked is followed.
    """
    found, seen, texts = set(), set(), set(texts)
    todo = [(workflow[node]["inputs"][via][0], via) for node, via in starts if is_link(workflow[node]["inputs"][via])]
    while todo:
        node_id, via = todo.pop()
        if node_id in seen or node_id not in workflow:
            continue
        seen.add(node_id)
        if node_id in texts:
            found.add(node_id)
            continue
        inputs = workflow[node_id]["inputs"]
        names = [via] if via in inputs else list(inputs)
        todo += [(inputs[name][0], via) for name in names if is_link(inputs[name])]
    return tuple(sorted(found, key=_order))


def _whole(value: Any, limits: tuple[int, int]) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and limits[0] <= value <= limits[1]


def _seeds(workflow: dict, nodes: list[str]) -> tuple[str, ...]:
    return tuple(n for n in nodes if any(_whole(workflow[n]["inputs"].get(name), (0, MAX_SEED))
                                         for name in SEED_INPUTS))


def _latents(workflow: dict, nodes: list[str]) -> list[str]:
    return [n for n in nodes if workflow[n]["class_type"].startswith("Empty") and "Latent" in workflow[n]["class_type"]]


def _schedulers(workflow: dict, nodes: list[str]) -> list[str]:
    """Samplers and schedulers whose steps are the whole run (not KSamplerAdvanced's step range)."""
    return [n for n in nodes if "scheduler" in workflow[n]["inputs"] and "start_at_step" not in workflow[n]["inputs"]]


def _same(workflow: dict, nodes: list[str], names: tuple[str, ...], limits: tuple[int, int]) -> tuple[str, ...]:
    """Those of ``nodes`` whose widgets ``names`` hold whole numbers within ``limits``, equal to the first's."""
    usable = [n for n in nodes if all(_whole(workflow[n]["inputs"].get(name), limits) for name in names)]
    values = [tuple(workflow[n]["inputs"][name] for name in names) for n in usable]
    return tuple(n for n, value in zip(usable, values, strict=True) if value == values[0])


def rewritten(workflow: dict, found: Found, name: str) -> dict:
    """The graph as the command ``name`` runs it; ``found.problem`` if it has one."""
    if found.problem is not None:
        raise found.problem
    graph = copy.deepcopy(workflow)
    source = str(max((int(n) for n in graph if n.isdigit()), default=0) + 1)
    values = {"command": name, "prompt": "", "seed": 0, "width": DEFAULT_SIZE, "height": DEFAULT_SIZE,
              "image": "", "require_image": found.image is not None, "chat_id": "", "user_id": "",
              "steps": DEFAULT_STEPS, "negative": ""}
    for node_id, output, value in ((found.prompt, PROMPT, "prompt"), (found.negative, NEGATIVE, "negative")):
        if node_id is not None:
            texts = _texts(workflow, node_id)
            values[value] = next((text for text in texts.values() if text), "")
            graph[node_id]["inputs"].update({input_name: [source, output] for input_name in texts})
    widgets = {"seed": ("seed", SEED), "noise_seed": ("seed", SEED), "width": ("width", WIDTH),
               "height": ("height", HEIGHT), "steps": ("steps", STEPS)}  # widget -> the Input's value and output
    first: dict[str, Any] = {}
    for node_ids, names in ((found.seeds, SEED_INPUTS), (found.size, ("width", "height")), (found.steps, ("steps",))):
        for node_id in node_ids:
            inputs = graph[node_id]["inputs"]
            for input_name in names:
                if _whole(inputs.get(input_name), (0, MAX_SEED)):
                    value, output = widgets[input_name]
                    first.setdefault(value, inputs[input_name])  # the graph's own value is the command's default
                    inputs[input_name] = [source, output]
    values |= first
    if found.image is not None:
        for node in graph.values():
            for input_name, value in node["inputs"].items():
                if is_link(value) and value[0] == found.image:
                    node["inputs"][input_name] = [source, IMAGE if value[1] == 0 else MASK]
        del graph[found.image]
    for node_id in found.savers:
        if node_id in found.outputs:
            graph[node_id] = _telegram_output(graph[node_id], name)  # its link rewired if it took the LoadImage
        else:
            del graph[node_id]
    graph[source] = {"class_type": INPUT_NODE, "inputs": values, "_meta": {"title": "Telegram Input (Courier)"}}
    return graph


def _telegram_output(saver: dict, name: str) -> dict:
    saved, kind = SAVERS[saver["class_type"]]
    inputs = {"filename_prefix": f"courier/{name}", saved: saver["inputs"][saved], "keep_metadata": False}
    if kind == "animation":
        fps = saver["inputs"].get("fps", 8.0)
        fps = fps if isinstance(fps, int | float) and not isinstance(fps, bool) else 8.0
        inputs |= {"images_as": "animation", "fps": float(min(FPS_LIMITS[1], max(FPS_LIMITS[0], fps)))}
    return {"class_type": OUTPUT_NODE, "inputs": inputs, "_meta": {"title": "Telegram Output (Courier)"}}


def summary(workflow: dict, found: Found) -> dict[str, Any]:
    """What was found, as the editor's dialog shows it (each node with its class and title)."""
    def node(node_id: str | None, **extra) -> dict | None:
        if node_id is None:
            return None
        meta = workflow[node_id].get("_meta")
        title = meta.get("title") if isinstance(meta, dict) and isinstance(meta.get("title"), str) else None
        return {"node": node_id, "class_type": workflow[node_id]["class_type"], "title": title or None, **extra}

    def text(node_id: str) -> dict:
        shown = next((t for t in _texts(workflow, node_id).values() if t), "")
        return node(node_id, text=shown if len(shown) <= SHOWN_TEXT else shown[:SHOWN_TEXT - 1] + "…")

    return {
        "prompt": None if found.prompt is None else text(found.prompt),
        "negative": None if found.negative is None else text(found.negative),
        "texts": [text(n) for n in found.texts], "image": node(found.image),
        "images": [node(n) for n in found.images], "seeds": list(found.seeds), "size": list(found.size),
        "steps": list(found.steps),
        "outputs": [node(n, sent_as=SAVERS[workflow[n]["class_type"]][1]) for n in found.outputs],
        "left_out": [node(n) for n in found.savers if n not in found.outputs],
        "problem": None if found.problem is None else {"code": found.problem.code, "message": str(found.problem)},
    }


def _named(workflow: dict, node_id: str) -> str:
    return f"#{node_id} {workflow[node_id]['class_type']}"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"
