"""Which node inputs name a file, and what a Courier graph may let them name.

A graph reaches ComfyUI from a bot job, a published command or, through the hidden service's
gateway, from whoever holds a credential. ComfyUI resolves a picture's name with
``folder_paths.get_annotated_filepath``, which takes an absolute path, ``..`` and a
``name [output]`` annotation: a graph that names any file could read any picture on the server
and save it where ``/view`` hands it out. So every input that names a file may name only:

- a picture (``PICTURES``: Telegram Input's and LoadImage's ``image``, ComfyUI's other loaders
  that take an annotated name): ``courier/<plain name>``, the folder a job's picture is uploaded
  to (``store.privacy.INPUT_SUBFOLDER``); Telegram Input's may also be empty (no picture);
- where results are saved (``SAVERS``): a relative prefix, under ``courier/`` for ComfyUI's own
  savers (Telegram Output puts its prefix under ``courier/`` itself: ``nodes/prefix.py``);
- a model (``errors.MODEL_FOLDERS``' loaders): a relative name. ComfyUI checks a model's name
  against the list of its folder (an absolute ``ckpt_name`` is "Value not in list"); refusing a
  path here only keeps the reason plain.

Every such value is written in the graph: a link (another node's output) is refused, since its
value is known only when the graph runs. Nothing here touches the file system or ComfyUI; the
Telegram Input checks again where it reads (``nodes/telegram_input.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..store.privacy import INPUT_SUBFOLDER, OUTPUT_SUBFOLDER
from .errors import MODEL_FOLDERS, Problem

PICTURES: Mapping[str, tuple[str, ...]] = {  # node type -> inputs ComfyUI reads as annotated file names
    "CourierTelegramInput": ("image",),
    "LoadImage": ("image",), "LoadImageMask": ("image",), "LoadImageOutput": ("image",),
    "WebcamCapture": ("image",), "LoadLatent": ("latent",), "LoadAudio": ("audio",), "LoadVideo": ("file",),
}
NO_PICTURE = frozenset({"CourierTelegramInput"})  # where an empty name means "no picture"
SAVERS: Mapping[str, tuple[str, ...]] = {  # node type -> inputs naming where results are saved
    "CourierTelegramOutput": ("filename_prefix",),
    **{saver: ("filename_prefix",) for saver in (
        "SaveImage", "SaveVideo", "SaveAnimatedWEBP", "SaveAnimatedPNG", "SaveWEBM", "SaveLatent", "SaveAudio")},
}
CONFINES_ITSELF = frozenset({"CourierTelegramOutput"})  # puts a relative prefix under courier/ by itself
MAX_NAME = 255
NOT_A_COURIER_PICTURE = "image: not a Courier input picture (the job's upload, courier/<name> in ComfyUI's input)"
"""Telegram Input's one answer to every refused ``image``: it never tells whether a path exists, nor where."""
_SEGMENTS = re.compile(r"[/\\]")


def graph_file_problem(graph: Mapping) -> Problem | None:
    """The first file input of ``graph`` (API format) that names what a job may not use, else None.

    The ``Problem`` names the node and the input, never the value or a server path.
    """
    for node_id, node in graph.items():
        class_type = node.get("class_type") if isinstance(node, Mapping) else None
        if not isinstance(class_type, str) or not isinstance(node.get("inputs"), Mapping):
            continue
        for name, value in node["inputs"].items():
            if not _allowed(class_type, name, value):
                return Problem("file_input_refused", {"node_id": node_id, "node_type": class_type,
                                                      "input_name": name})
    return None


def refusal(graph: Mapping) -> str | None:
    """``graph_file_problem`` in English words (the gateway's ``Policy.graph_check``)."""
    problem = graph_file_problem(graph)
    return None if problem is None else str(problem)


def courier_picture_name(value: object) -> str | None:
    """The plain file name in ``courier/<name>``, else None (a path, an annotation, another folder)."""
    if not isinstance(value, str):
        return None
    folder, _, name = value.partition("/")
    return name if folder == INPUT_SUBFOLDER and plain_name(name) else None


def plain_name(name: object) -> bool:
    """A file's own name: no folder, no hidden or dot name, no ``[output]``-style annotation."""
    return (isinstance(name, str) and 0 < len(name) <= MAX_NAME and not name.startswith(".")
            and not name.endswith("]") and not any(c in name for c in "/\\:\0"))


def _allowed(class_type: object, name: str, value: object) -> bool:
    if name in PICTURES.get(class_type, ()):
        return (value == "" and class_type in NO_PICTURE) or courier_picture_name(value) is not None
    if name in SAVERS.get(class_type, ()):
        return _relative(value) and (class_type in CONFINES_ITSELF
                                     or _SEGMENTS.split(value)[0] == OUTPUT_SUBFOLDER)
    if any(name.startswith(prefix) for prefix in MODEL_FOLDERS.get(class_type, {})):
        return _relative(value)
    return True


def _relative(value: object) -> bool:
    """A relative path that stays below where ComfyUI joins it (no root, drive, ``..``, annotation)."""
    return (isinstance(value, str) and 0 < len(value) <= 4 * MAX_NAME and not value.startswith(("/", "\\"))
            and not value.endswith("]") and not any(c in value for c in ":\0")
            and not any(part in ("", ".", "..") for part in _SEGMENTS.split(value)))
