"""Loggers of the pack: ``courier.<part>``, every message prefixed ``[Courier]``.

ComfyUI's log shows bare messages, so without the prefix a warning of ours could
not be told apart from ComfyUI's own.
"""

from __future__ import annotations

import logging


class _Prefixed(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"[Courier] {msg}", kwargs


def get_logger(part: str) -> logging.LoggerAdapter:
    return _Prefixed(logging.getLogger(f"courier.{part}"), {})
