"""Loggers of the pack: ``courier.<part>``, every message prefixed ``[Courier]``.

ComfyUI's log shows bare messages (no level, no logger name), so without the prefix a
line of ours could not be told apart from ComfyUI's own, and without the level in it a
warning of ours could not be told from an info line: ``[Courier] WARNING ...``.
"""

from __future__ import annotations

import logging


class _Prefixed(logging.LoggerAdapter):
    def log(self, level, msg, *args, **kwargs):
        tag = f" {logging.getLevelName(level)}" if level >= logging.WARNING else ""
        kwargs.setdefault("stacklevel", 2)  # the caller's line, not this one
        super().log(level, f"[Courier]{tag} {msg}", *args, **kwargs)


def get_logger(part: str) -> logging.LoggerAdapter:
    return _Prefixed(logging.getLogger(f"courier.{part}"), {})
