"""Which model file a typed name means: the backends' checkpoints and LoRAs, and the match.

The backends' ``/object_info`` is the list: a file is a checkpoint where a node's ``ckpt_name``
offers it, a LoRA where a ``lora_name`` does (``kinds``). A typed name means the file it names
exactly with its folder (``sub/x.safetensors``; ``x.safetensors`` is the one at the top), else the
one file it names without its folder or extension, else the one file it begins, else the one it
is part of; several, or none, are an ``OptionError`` naming the close ones. ``job_graph`` puts
the files meant into the graph a job runs.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from . import model_graph
from .options import OptionError

KINDS = {"ckpt_name": "checkpoints", "lora_name": "loras"}
"""The input that offers a model file -> its kind."""
CHECKPOINTS, LORAS = KINDS.values()
DEFAULT_STRENGTH = 0.6
"""Of img2img on a picture given without ``--strength``."""
MAX_LISTED = 8  # names in a reply about a name that matches several or none


def kinds(object_info: Mapping[str, Any]) -> dict[str, list[str]]:
    """kind -> the file names some node's input of that kind offers, sorted."""
    found: dict[str, set[str]] = {kind: set() for kind in KINDS.values()}
    for schema in object_info.values():
        for section in (schema.get("input") or {}).values():  # required, optional
            for name, spec in section.items() if isinstance(section, dict) else ():
                if name in KINDS:
                    found[KINDS[name]].update(o for o in choices(spec) if isinstance(o, str))
    return {kind: sorted(names) for kind, names in found.items()}


def choices(spec: Any) -> list:
    """The choices of an input spec: ``[[option, ...], {...}]``, or V3's ``["COMBO", {"options": [...]}]``."""
    if not isinstance(spec, list) or not spec:
        return []
    if isinstance(spec[0], list):
        return spec[0]
    if spec[0] == "COMBO" and len(spec) > 1 and isinstance(spec[1], dict):
        return spec[1].get("options") or []
    return []


def _path(name: str) -> str:
    return name.replace("\\", "/").lower()


def _base(name: str) -> str:
    return _path(name).rsplit("/", 1)[-1]


def _stem(name: str) -> str:
    return _base(name).rsplit(".", 1)[0]


def resolve(option: str, typed: str, names: Iterable[str]) -> str:
    """The file of ``names`` that ``typed`` (the value of ``--option``) means.

    :raises OptionError: ``model_none`` (there are no such files), ``model_ambiguous`` (several
        match) or ``model_unknown`` (none does; the close ones are named).
    """
    names = sorted(set(names))
    if not names:
        raise OptionError("model_none", option=option)
    want = typed.strip().lower()
    for matching in ([n for n in names if _path(n) == _path(want)],
                     [n for n in names if want in (n.lower(), _base(n), _stem(n))],
                     [n for n in names if _base(n).startswith(want) or n.lower().startswith(want)],
                     [n for n in names if want in n.lower()]):
        if len(matching) == 1:
            return matching[0]
        if matching:
            raise OptionError("model_ambiguous", option=option, name=typed, count=len(matching),
                              matches=_listed(matching))
    close = difflib.get_close_matches(want, [_stem(n) for n in names], n=MAX_LISTED, cutoff=0.5)
    near = [n for n in names if _stem(n) in close] or names
    raise OptionError("model_unknown", option=option, name=typed, matches=_listed(near))


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (", …" if len(names) > MAX_LISTED else "")


def job_graph(workflow: dict, chosen: Mapping[str, Any], files: Mapping[str, Iterable[str]], *,
              picture: bool, exact_size: bool = False) -> dict:
    """The graph a job of ``workflow`` runs with the model options ``chosen`` (``bot.options.choose``),
    the names meaning files of ``files`` (kind -> names, what the backends have); img2img where a
    ``picture`` is given. ``exact_size`` (a ``--size``) keeps the size as chosen; without it the
    Native Size node brings it to the model's pixel count (an ``--ar`` keeping its aspect ratio).

    Without ``--model`` the graph keeps its checkpoint where a backend has it, else takes the first
    one there is (a shipped graph's is a stand-in); with no list yet, it is left as it is.
    :raises OptionError: a name means no file, or several; ``checkpoint_none``: the backends' lists
        hold no checkpoint at all (the stand-in's name would only confuse).
    """
    checkpoints = sorted(files.get(CHECKPOINTS, ()))
    if "model" in chosen:
        checkpoint = resolve("model", chosen["model"], checkpoints)
    elif CHECKPOINTS in files and not checkpoints:
        raise OptionError("checkpoint_none")
    else:
        stored = {model_graph.checkpoint_of(workflow)} & set(checkpoints)
        checkpoint = next(iter(stored), checkpoints[0] if checkpoints else None)
    loras = [(resolve("lora", name, files.get(LORAS, ())), weight) for name, weight in chosen.get("lora", ())]
    return model_graph.apply(workflow, checkpoint=checkpoint, loras=loras, cfg=chosen.get("cfg"),
                             strength=chosen.get("strength", DEFAULT_STRENGTH) if picture else None,
                             sized=exact_size)
