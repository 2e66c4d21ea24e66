"""A command's options: what its workflow lets a user set, checked, and the Input values they give.

A command declares its options on its Telegram Input, in the ``options`` input (commands.json
writes it for the shipped commands; the node's widget holds it for published ones), for example
``size=256-2048 steps=1-8 n=4 neg``: a name, optionally ``=low-high`` (or ``=high`` from the
lowest it takes); a name alone takes ``DEFAULT_RANGES``' range widened to the Input's own width,
height and steps (``graph_ranges``), so a published graph's own values lie within it (a side down
to 64 px). An option is offered only where the graph uses what it sets, so it never silently does
nothing: ``size`` where the Input's width, height or prompt card feeds a node, ``steps`` and
``neg`` where their outputs do. ``seed`` is always offered; ``n`` wherever it is declared: one batch
when the graph takes the Input's ``batch`` output, else ``n`` jobs from seeds seed, seed + 1, ...

The model options set the graph's own nodes, not the Input (``jobs/model_graph.py`` applies them
when the job is queued): ``model`` (a name) the checkpoint loader's file, ``lora=4`` (a name and
its weight, ``--lora name:0.8``, given up to 4 times) a LoRA chain after it, ``cfg=1-30`` (a
decimal) the sampler's cfg, and ``strength=0.05-1`` (a decimal) makes the command img2img on a
picture (its denoise). Each is offered where the graph has the node it sets.

A bad value raises ``OptionError``: a message key of the i18n catalog and its parameters.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any

from . import model_graph
from .workflow import WorkflowError, input_node, used_outputs

MAX_SEED = 0xFFFFFFFFFFFFFFFF  # what the Telegram Input and ComfyUI's samplers take
MAX_N = 4
SIZE_LIMITS = (16, 8192)  # the Input's width and height widgets
STEPS_LIMITS = (1, 10000)  # ComfyUI's samplers
DEFAULT_SIZE, DEFAULT_STEPS = 1024, 20  # the Input's widgets' defaults: what a graph that leaves them out runs with
MAX_LORAS = 4
CFG_LIMITS = (0.0, 100.0)  # KSampler's cfg
STRENGTH_LIMITS = (0.0, 1.0)  # KSampler's denoise
LORA_WEIGHTS = (-10.0, 10.0)  # of a --lora name:weight (LoraLoader takes -100 to 100)
MAX_NAME_CHARS = 200  # of a --model or --lora name as typed
DEFAULT_RANGES = {"size": (256, 2048), "steps": (1, 100), "n": (1, MAX_N), "neg": None,
                  "model": None, "lora": (1, MAX_LORAS), "cfg": (1.0, 30.0), "strength": (0.05, 1.0)}
LIMITS = {"size": SIZE_LIMITS, "steps": STEPS_LIMITS, "n": (1, MAX_N), "neg": None,
          "model": None, "lora": (1, MAX_LORAS), "cfg": CFG_LIMITS, "strength": STRENGTH_LIMITS}
DECIMALS = frozenset(("cfg", "strength"))
"""Options whose values (and declared ranges) are decimals, not whole numbers."""
REPEATABLE = frozenset(("lora",))
"""Options a command takes several times: its range is how many (``lora=2``: up to two)."""
DEFAULT_DECLARATION = "size steps n neg"
"""What an Input without an ``options`` input offers (the widget's default, and old graphs')."""
TARGETS = {"seed": "seed", "ar": "size", "size": "size", "steps": "steps", "n": "n", "neg": "neg",
           "model": "model", "lora": "lora", "cfg": "cfg", "strength": "strength"}
"""Option name as typed -> what it sets (``--ar`` and ``--size`` both set the size)."""
SHOWN = ("seed", "ar", "size", "steps", "n", "neg", "model", "lora", "cfg", "strength")
"""The order /help, the errors and the editor panel list the options in."""
AR_STEP, SIZE_STEP = 16, 8  # sides from --ar are rounded to multiples of 16, from --size to 8
LOWEST_GRAPH_SIDE = 64
"""Where the default --size range starts for a graph smaller than its usual lowest (a small model's)."""
AR_FLOOR = 4
"""The widest ratio --ar always offers (where the size range allows it), even for a graph too small to keep its area."""

# Outputs of the Telegram Input (nodes/telegram_input.py RETURN_NAMES)
IMAGE, WIDTH, HEIGHT, STEPS, NEGATIVE, BATCH = 1, 4, 5, 8, 9, 10

_ITEM = re.compile(r"([a-z]+)(?:=([0-9.]{1,8})(?:-([0-9.]{1,8}))?)?")
_DECIMAL = re.compile(r"[0-9]{1,5}(?:\.[0-9]{0,6})?|\.[0-9]{1,6}")
_SIZE = re.compile(r"([0-9]{1,5})[xX×]([0-9]{1,5})")
_SIDE = re.compile(r"([0-9]{1,5})")
_RATIO = re.compile(r"([0-9]{1,4}):([0-9]{1,4})")


class OptionError(ValueError):
    """A typed option cannot be used; ``key`` and ``params`` make the user's message."""

    def __init__(self, key: str, **params: Any):
        super().__init__(f"{key} {params}")
        self.key, self.params = key, params


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """What one command offers: target -> (low, high), or None for a text; plus its defaults."""

    ranges: Mapping[str, tuple[float, float] | None]
    size: tuple[int, int] = (DEFAULT_SIZE, DEFAULT_SIZE)  # the Input's width and height: what --ar keeps the area of
    steps: int = DEFAULT_STEPS  # the Input's steps
    batch: bool = False  # --n makes one batch (else n jobs)
    native: bool = False  # without --size, the model's own size (``model_graph.native_sized``), not ``size``

    def offers(self, target: str) -> bool:
        return target == "seed" or target in self.ranges

    @property
    def max_ratio(self) -> float:
        """The widest aspect ratio --ar can give within the size range (to 1/100): keeping the area, and
        at least ``AR_FLOOR``:1 where the area is small, the shorter side then growing to the lowest
        size (``ratio_sides``)."""
        low, high = self.ranges["size"]
        area = self.size[0] * self.size[1]
        return math.floor(100 * min(high * high / area, high / low, max(area / (low * low), AR_FLOOR))) / 100

    def ratio_sides(self, ratio: float) -> tuple[float, float]:
        """Width and height of ``ratio`` (within ``max_ratio``) about as many pixels as ``size``, the
        shorter side no less than the lowest size."""
        low = self.ranges["size"][0]
        area = self.size[0] * self.size[1]
        width, height = math.sqrt(area * ratio), math.sqrt(area / ratio)
        grow = max(1.0, low / min(width, height))
        return width * grow, height * grow


@dataclasses.dataclass(frozen=True)
class Run:
    """One job of a command: its seed and the values it sets on the Telegram Input."""

    seed: int
    inputs: dict[str, Any]


def declared(text: str, defaults: Mapping[str, tuple[float, float] | None] = DEFAULT_RANGES,
             ) -> dict[str, tuple[float, float] | None]:
    """The options a declaration names, with their ranges (``defaults``' where it gives none); ValueError
    (saying why) if it is malformed."""
    ranges: dict[str, tuple[float, float] | None] = {}
    for item in text.replace(",", " ").lower().split():
        match = _ITEM.fullmatch(item)
        if not match or match[1] not in DEFAULT_RANGES:
            raise ValueError(f"options: {item!r} is not one of {', '.join(DEFAULT_RANGES)} "
                             "(with =low-high or =high where it takes a number)")
        name, first, second = match.groups()
        limits = LIMITS[name]
        if first is None:
            ranges[name] = defaults[name]
            continue
        if limits is None:
            raise ValueError(f"options: {name} takes no range")
        bounds = [_bound(name, value) for value in (first, second) if value is not None]
        low, high = bounds if len(bounds) == 2 else (limits[0], bounds[0])
        if not limits[0] <= low <= high <= limits[1]:
            raise ValueError(f"options: {name} must lie within {limits[0]:g}-{limits[1]:g}, low before high")
        ranges[name] = (low, high)
    return ranges


def _bound(name: str, text: str) -> float:
    """One end of a declared range: a decimal for ``DECIMALS``, else a whole number."""
    if name in DECIMALS and _DECIMAL.fullmatch(text):
        return float(text)
    if text.isdigit():
        return int(text)
    kind = "a decimal" if name in DECIMALS else "a whole number"
    raise ValueError(f"options: {name} takes {kind} range, not {text!r}")


def command_options(workflow: dict) -> OptionSpec:
    """The options the command's workflow offers; WorkflowError if its declaration is malformed."""
    inputs = workflow[input_node(workflow)].get("inputs", {})
    declaration = inputs.get("options", DEFAULT_DECLARATION)
    if not isinstance(declaration, str):
        raise WorkflowError("options: the Telegram Input's options must be a text")
    size = (_number_or(inputs.get("width"), DEFAULT_SIZE), _number_or(inputs.get("height"), DEFAULT_SIZE))
    steps = _number_or(inputs.get("steps"), DEFAULT_STEPS)
    try:
        ranges = declared(declaration, graph_ranges(size, steps))
    except ValueError as exc:
        raise WorkflowError(str(exc)) from None
    used = used_outputs(workflow)
    card = IMAGE in used and not inputs.get("require_image", False)  # the prompt card, sized width x height
    reaches = {"size": bool({WIDTH, HEIGHT} & used) or card, "steps": STEPS in used,
               "neg": NEGATIVE in used, "n": True, **model_graph.offered(workflow)}
    return OptionSpec({name: rng for name, rng in ranges.items() if reaches[name]}, size=size, steps=steps,
                      batch=BATCH in used, native=model_graph.native_sized(workflow))


def graph_ranges(size: tuple[int, int], steps: int) -> dict[str, tuple[float, float] | None]:
    """``DEFAULT_RANGES`` widened to take the graph's own size and steps (a graph smaller than the
    default lowest size goes down to ``LOWEST_GRAPH_SIDE``): what an option declared without a range
    offers. A declared range is the owner's word and stays as written."""
    low, high = DEFAULT_RANGES["size"]
    low = low if min(size) >= low else LOWEST_GRAPH_SIDE
    high = min(SIZE_LIMITS[1], max(high, SIZE_STEP * math.ceil(max(size) / SIZE_STEP)))
    most_steps = min(STEPS_LIMITS[1], max(DEFAULT_RANGES["steps"][1], steps))
    return {**DEFAULT_RANGES, "size": (low, high), "steps": (DEFAULT_RANGES["steps"][0], most_steps)}


def _number_or(value: Any, default: int) -> int:
    """A widget's whole number; ``default`` where it is missing or a link (a widget turned input)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def offered(spec: OptionSpec) -> list[str]:
    """The option names the command takes, in the order /help lists them."""
    return [name for name in SHOWN if spec.offers(TARGETS[name])]


def listing(spec: OptionSpec) -> list[dict[str, Any]]:
    """The options ``spec`` offers as the editor panel lists them: ``{"name", "low", "high"}``, the
    bounds only where the command sets them (not for --seed, which takes any 64-bit number, nor --ar)."""
    bounded = {"size", "steps", "n", "cfg", "strength"}
    return [{"name": name, **dict(zip(("low", "high"), spec.ranges[name], strict=True))} if name in bounded
            else {"name": name} for name in offered(spec)]


WIDEST = OptionSpec(dict(LIMITS))
"""Every option at the widest range a graph can take: what a user's default options are checked against."""


def check(name: str, value: str | None, spec: OptionSpec) -> tuple[str, Any]:
    """(target, value) of the typed option ``--name value`` (name "": a bare ``--``); OptionError if it
    cannot be used."""
    if not name:
        raise OptionError("option_bare")
    target = TARGETS.get(name)
    if target is None or not spec.offers(target):
        raise OptionError("option_unknown", name=_shown(name))
    if value is None:
        raise OptionError("option_no_value", name=name)
    if name == "neg":
        return target, value
    if name == "ar":
        return target, _ratio_size(value, spec)
    if name == "size":
        return target, _size(value, spec)
    if name == "model":
        return target, _name(value)
    if name == "lora":
        return target, _lora(value)
    if name in DECIMALS:
        return target, _decimal(name, value, *spec.ranges[name])
    low, high = (0, MAX_SEED) if name == "seed" else spec.ranges[name]
    return target, _number(name, value, low, high)


def _decimal(name: str, value: str, low: float, high: float) -> float:
    number = float(value) if _DECIMAL.fullmatch(value) else None
    if number is None or not low <= number <= high:
        raise OptionError("option_bad_decimal", name=name, value=_shown(value), low=_g(low), high=_g(high))
    return number


def _name(value: str) -> str:
    """A model's name as typed (which file it means is decided against the backends' lists)."""
    if len(value) > MAX_NAME_CHARS:
        raise OptionError("option_bad_name", value=_shown(value), limit=MAX_NAME_CHARS)
    return value


def _lora(value: str) -> tuple[str, float]:
    """(name, weight) of ``name`` or ``name:weight`` (weight 1 where none is given)."""
    name, colon, weight = value.rpartition(":")
    if not colon:
        return _name(value), 1.0
    low, high = LORA_WEIGHTS
    sign, digits = ("-", weight[1:]) if weight.startswith("-") else ("", weight)
    number = float(sign + digits) if name and _DECIMAL.fullmatch(digits) else None
    if number is None or not low <= number <= high:
        raise OptionError("option_bad_lora", value=_shown(value), low=_g(low), high=_g(high))
    return _name(name), number


def _g(number: float) -> str:
    """A bound as a reply shows it: 1, 0.05."""
    return format(number, "g")


def _number(name: str, value: str, low: int, high: int) -> int:
    number = int(value) if value.isascii() and value.isdigit() else None
    if number is None or not low <= number <= high:
        raise OptionError("option_bad_number", name=name, value=_shown(value), low=low, high=high)
    return number


def _size(value: str, spec: OptionSpec) -> tuple[int, int]:
    low, high = spec.ranges["size"]
    match = _SIZE.fullmatch(value) or _SIDE.fullmatch(value)  # WxH, or one side of a square
    sides = (int(match[1]), int(match[match.lastindex])) if match else ()
    if not sides or not all(low <= side <= high for side in sides):
        raise OptionError("option_bad_size", value=_shown(value), low=low, high=high)
    return tuple(_round(side, SIZE_STEP, low, high) for side in sides)


def _ratio_size(value: str, spec: OptionSpec) -> tuple[int, int]:
    low, high = spec.ranges["size"]
    limit = spec.max_ratio
    match = _RATIO.fullmatch(value)
    ratio = int(match[1]) / int(match[2]) if match and int(match[1]) and int(match[2]) else 0
    if not 1 / limit <= ratio <= limit:
        raise OptionError("option_bad_ar", value=_shown(value), limit=format(limit, "g"))
    width, height = spec.ratio_sides(ratio)
    return _round(width, AR_STEP, low, high), _round(height, AR_STEP, low, high)


def _round(side: float, step: int, low: int, high: int) -> int:
    return min(high, max(low, step * round(side / step)))


def _shown(value: str) -> str:
    return value if len(value) <= 24 else value[:23] + "…"


def plan(chosen: Mapping[str, Any], spec: OptionSpec, seed: int) -> list[Run]:
    """The jobs of one command: ``chosen`` (target -> value, from ``check``) over ``seed`` if it has none."""
    n = chosen.get("n", 1)
    seed = chosen.get("seed", seed)
    if seed + n - 1 > MAX_SEED:
        raise OptionError("option_bad_number", name="seed", value=str(seed), low=0, high=MAX_SEED - n + 1)
    inputs: dict[str, Any] = {}
    if "size" in chosen:
        inputs["width"], inputs["height"] = chosen["size"]
    if "steps" in chosen:
        inputs["steps"] = chosen["steps"]
    if "neg" in chosen:
        inputs["negative"] = chosen["neg"]
    if spec.batch:
        return [Run(seed, {**inputs, "batch": n} if "n" in chosen else inputs)]
    return [Run(seed + i, dict(inputs)) for i in range(n)]
