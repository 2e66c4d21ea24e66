"""Find the pack's own trouble in a ComfyUI log.

ComfyUI logs bare messages (no level, no logger name), and its own log has
tracebacks of its own (a missing torchaudio, say), so we look only at what
names the pack: its folder in custom_nodes, its real path, or "courier".
"""

import re

_TROUBLE = re.compile(r"warn|error|fail|exception|traceback|cannot import", re.IGNORECASE)


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
    """Tracebacks and warning/error lines that mention any of ``markers``."""
    markers = [m.lower() for m in markers]

    def ours(text):
        return any(m in text.lower() for m in markers)

    problems = [block for block in traceback_blocks(log) if ours(block)]
    problems += [line for line in log.splitlines()
                 if ours(line) and _TROUBLE.search(line) and not line.startswith("  File ")]
    return problems
