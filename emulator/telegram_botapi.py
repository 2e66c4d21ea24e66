"""Entry point for ``python . emulator``: the Bot API emulator lives in ``emulator/botapi``."""

from .botapi import BotApiEmulator, main

__all__ = ["BotApiEmulator", "main"]
