"""Options in the command text: ``/f --seed 7 --ar 16:9 a cat --neg blurry``.

An option is a word made of ``--`` (or the dash a phone's keyboard turns it into, — or –) and a
name, anywhere in the text. It takes the next word as its value (or what follows ``=`` in
``--seed=7``); ``--neg`` takes the text up to the next option. A ``--`` alone is refused
(``option_bare``), not taken for the prompt. What is left, in order, is the prompt. What each option means, and its
checks, are in ``jobs/options.py``; this module reads and writes the text, and says what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from ..jobs.options import LORA_WEIGHTS, MAX_SEED, REPEATABLE, TARGETS, OptionError, OptionSpec, check, offered
from .parsing import is_blank, strip_blank

OPTION = re.compile(r"(?:--|—|–)([A-Za-z][A-Za-z0-9_]*)(?:=(.*))?|--", re.DOTALL)
"""An option word: its name and the value after ``=``, if any; or "--" alone, an option without its
name (a dash alone, — or –, is the prompt's)."""
REST = "neg"  # the option whose value is the text up to the next option
EXAMPLES = {"seed": "7", "ar": "16:9", "size": "1024x768", "steps": "4", "n": "2", "neg": "blurry",
            "model": "sdxl", "lora": "detail:0.8", "cfg": "6.5", "strength": "0.6"}

Pairs = list[tuple[str, str | None]]


def words_of(text: str) -> list[tuple[int, int]]:
    """(start, end) of each word: a run of characters that are not blank (``parsing.is_blank``)."""
    spans, start = [], None
    for index, char in enumerate(text + " "):
        if is_blank(char) and start is not None:
            spans.append((start, index))
            start = None
        elif not is_blank(char) and start is None:
            start = index
    return spans


def split_options(text: str) -> tuple[str, Pairs]:
    """(prompt, [(option name, value or None), ...]) of a command's text; names lowercased ("" for a bare ``--``)."""
    spans = words_of(text)
    words = [text[begin:end] for begin, end in spans]
    options = [OPTION.fullmatch(word) for word in words]
    is_option = [match is not None for match in options]
    parts, pairs, start, i = [], [], 0, 0
    while i < len(words):
        if not is_option[i]:
            i += 1
            continue
        parts.append(text[start:spans[i][0]])
        name, inline = (options[i][1] or "").lower(), options[i][2]  # "" for a bare "--"
        if name == REST:
            after = next((k for k in range(i + 1, len(words)) if is_option[k]), len(words))
            start = spans[after][0] if after < len(words) else len(text)
            value = strip_blank((inline or "") + text[spans[i][1]:start]) or None
            i = after
        elif inline is not None or not name:  # --name=value, or "--" alone: no next word taken
            value = inline or None
            i += 1
            start = spans[i - 1][1]
        else:
            value = words[i + 1] if i + 1 < len(words) and not is_option[i + 1] else None
            i += 1 if value is None else 2
            start = spans[i - 1][1]
        pairs.append((name, value))
    parts.append(text[start:])
    return " ".join(part for part in map(strip_blank, parts) if part), pairs


def format_options(pairs: Iterable[tuple[str, str]], prompt: str = "") -> str:
    """The text ``split_options`` reads back as (prompt, pairs): ``--neg`` last, after the prompt."""
    pairs = list(pairs)
    words = [f"--{name} {value}" for name, value in pairs if name != REST]
    words += [prompt] + [f"--{name} {value}" for name, value in pairs if name == REST]
    return " ".join(word for word in words if word)


def choose(typed: Pairs, defaults: Pairs, spec: OptionSpec) -> tuple[dict, Pairs]:
    """(target -> checked value, the pairs used) of the typed options over the user's defaults.

    A typed option must be offered and valid (else OptionError); a default is used only where
    the command offers it, takes its value, and nothing typed sets the same thing. A repeatable
    option (``--lora``) gives a tuple of its values, up to its range's high.
    """
    chosen, used, by = {}, [], {}
    for name, value in typed:
        target, checked = check(name, value, spec)
        if target in REPEATABLE:
            checked = _repeated(chosen, target, checked, spec)
        elif target in chosen:
            both = name if by[target] == name else "/--".join((by[target], name))  # --ar/--size
            raise OptionError("option_twice", name=both)
        chosen[target], by[target] = checked, name
        used.append((name, value))
    typed_targets = set(chosen)
    for name, value in defaults:
        target = TARGETS.get(name)
        if target in typed_targets or (target in chosen and target not in REPEATABLE):
            continue
        try:
            target, checked = check(name, value, spec)
            if target in REPEATABLE:
                checked = _repeated(chosen, target, checked, spec)
        except OptionError:
            continue  # this command cannot take it: its own default stands
        chosen[target] = checked
        used.append((name, value))
    return chosen, used


def _repeated(chosen: dict, target: str, value, spec: OptionSpec) -> tuple:
    """The values of a repeatable option with one more; OptionError beyond its high."""
    values = (*chosen.get(target, ()), value)
    high = int(spec.ranges[target][1])
    if len(values) > high:
        raise OptionError("option_too_many", name=target, high=high)
    return values


def layered(*sources: Pairs) -> Pairs:
    """The pairs of each source but those setting what an earlier source sets (the user's defaults
    over the command's)."""
    pairs, taken = [], set()
    for source in sources:
        pairs += [(name, value) for name, value in source if TARGETS.get(name) not in taken]
        taken |= {TARGETS.get(name) for name, _ in source}
    return pairs


def option_message(error: OptionError, say: Callable[..., str], command: str, spec: OptionSpec) -> str:
    """The user's message for ``error`` in the command ``command``."""
    extra = {"command": command, "offered": ", ".join(f"--{name}" for name in offered(spec))}
    if error.key == "option_no_value":
        extra["example"] = f"--{error.params['name']} {EXAMPLES.get(error.params['name'], '')}"
    return say(error.key, **error.params, **extra)


def option_lines(spec: OptionSpec, say: Callable[..., str]) -> list[str]:
    """One line per option the command takes, for /help <command>."""
    width, height = spec.size
    size = spec.ranges.get("size") or (None, None)
    steps = spec.ranges.get("steps") or (None, None)
    lines = {
        "seed": lambda: say("help_opt_seed", high=MAX_SEED),
        "ar": lambda: (say("help_opt_ar_native", limit=format(spec.max_ratio, "g")) if spec.native
                       else say("help_opt_ar", limit=format(spec.max_ratio, "g"), width=width, height=height)),
        "size": lambda: (say("help_opt_size_native", low=size[0], high=size[1]) if spec.native
                         else say("help_opt_size", low=size[0], high=size[1], width=width, height=height)),
        "steps": lambda: say("help_opt_steps", low=steps[0], high=steps[1], default=spec.steps),
        "n": lambda: say("help_opt_n", high=spec.ranges.get("n", (1, 1))[1]),
        "neg": lambda: say("help_opt_neg"),
        "model": lambda: say("help_opt_model"),
        "lora": lambda: say("help_opt_lora", high=int(spec.ranges["lora"][1]), low=format(LORA_WEIGHTS[0], "g"),
                            top=format(LORA_WEIGHTS[1], "g")),
        "cfg": lambda: say("help_opt_cfg", **_bounds(spec, "cfg")),
        "strength": lambda: say("help_opt_strength", **_bounds(spec, "strength")),
    }
    return [lines[name]() for name in offered(spec)]


def _bounds(spec: OptionSpec, target: str) -> dict[str, str]:
    """``low`` and ``high`` of a decimal option's range, as a reply shows them (0.05, 1)."""
    return dict(zip(("low", "high"), (format(bound, "g") for bound in spec.ranges.get(target) or (0, 0)), strict=True))
