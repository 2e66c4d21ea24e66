"""Where Telegram Output's files go: plain logic, shared with the ComfyUI test double (no comfy_api)."""

from __future__ import annotations

import re

SUBFOLDER = "courier"


def courier_prefix(filename_prefix: str) -> str:
    """``filename_prefix`` under ``courier/`` (added when missing); ValueError for a way out of it."""
    prefix = filename_prefix.strip()
    parts = re.split(r"[/\\]", prefix)
    if not prefix or prefix.startswith(("/", "\\")) or ":" in prefix or ".." in parts:
        raise ValueError(f"filename_prefix must be a relative name under {SUBFOLDER}/ without '..', "
                         f"not {filename_prefix!r}")
    return prefix if parts[0] == SUBFOLDER and len(parts) > 1 else f"{SUBFOLDER}/{prefix}"
