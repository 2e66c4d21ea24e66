"""Find the pack's own trouble in a ComfyUI log.

ComfyUI logs bare messages (no level, no logger name), and its own log has
tracebacks of its own (a missing torchaudio, say), so we look at what names the
pack: its folder in custom_nodes, its real path, or "courier"; and at every
line our logger marks with a level (``[Courier] WARNING ...``, see core/logs.py).
Paths inside a virtual environment do not count: CI keeps its venv in the
clone, so a third-party warning's path can contain the pack's folder name.
"""

import re

_TROUBLE = re.compile(r"warn|error|fail|exception|traceback|cannot import", re.IGNORECASE)
_OUR_LEVELS = re.compile(r"\[Courier\] (WARNING|ERROR|CRITICAL)\b")
_VENV_PATH = re.compile(r"\S*/(?:\.venv|site-packages)/\S*")


def traceback_blocks(log: str) -> list[str]:
    """Each "Traceback (most recent call last):" with its frames and the exception line."""
    blocks, current = [], None
    for line in log.splitlines():
        if line.startswith("Traceback (most recent call last):"):
            current = [line]
            blocks.append(current)
        elif current is not None:
            current.append(line)
            if line and not line.startswith(" "):  # the exception line ends the block
                current = None
    return ["\n".join(block) for block in blocks]


def pack_problems(log: str, markers: list[str]) -> list[str]:
    """Tracebacks and warning/error lines that mention any of ``markers`` outside a venv, and
    every warning or error line of the pack's logger."""
    markers = [m.lower() for m in markers]

    def ours(text):
        text = _VENV_PATH.sub("", text).lower()
        return any(m in text for m in markers)

    problems = [block for block in traceback_blocks(log) if ours(block)]
    problems += [line for line in log.splitlines()
                 if _OUR_LEVELS.search(line)
                 or (ours(line) and _TROUBLE.search(line) and not line.startswith("  File "))]
    return problems
