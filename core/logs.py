"""Loggers of the pack: ``courier.<part>``, every message prefixed ``[Courier]``.

ComfyUI's log shows bare messages (no level, no logger name), so without the prefix a
line of ours could not be told apart from ComfyUI's own, and without the level in it a
warning of ours could not be told from an info line: ``[Courier] WARNING ...``. A console
of our own (``python <pack> run``) adds the level only to other loggers' lines
(``ConsoleFormat``), so ours say it once.
"""

from __future__ import annotations

import logging

PREFIX = "[Courier]"


class _Prefixed(logging.LoggerAdapter):
    def log(self, level, msg, *args, **kwargs):
        tag = f" {logging.getLevelName(level)}" if level >= logging.WARNING else ""
        kwargs.setdefault("stacklevel", 2)  # the caller's line, not this one
        super().log(level, f"{PREFIX}{tag} {msg}", *args, **kwargs)


def get_logger(part: str) -> logging.LoggerAdapter:
    return _Prefixed(logging.getLogger(f"courier.{part}"), {})


class ConsoleFormat(logging.Formatter):
    """Time, logger and message; the level too, but where the message says it already (ours)."""

    def __init__(self):
        super().__init__("%(asctime)s %(name)s %(levelname)s %(message)s")
        self._ours = logging.Formatter("%(asctime)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if record.name.startswith("courier.") and str(record.msg).startswith(PREFIX):
            return self._ours.format(record)
        return super().format(record)


def log_to_console(level: int = logging.INFO) -> None:
    """The root logger writes to stderr in ``ConsoleFormat`` (a standalone process, not in ComfyUI)."""
    handler = logging.StreamHandler()
    handler.setFormatter(ConsoleFormat())
    logging.basicConfig(level=level, handlers=[handler])
