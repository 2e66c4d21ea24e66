"""Parse `/name@bot args` command messages into a validated request."""

from __future__ import annotations

import dataclasses
import re

COMMAND_RE = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]{3,64}))?(?:\s+(.*))?$", re.DOTALL)
MAX_PROMPT_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class CommandRequest:
    name: str
    args: str


def parse_command(text: str | None, bot_username: str | None = None) -> CommandRequest | None:
    """The command in a message, or None if it is not one (or is addressed to another bot)."""
    match = COMMAND_RE.match((text or "").strip())
    if not match:
        return None
    name, addressee, args = match.groups()
    if addressee and bot_username and addressee.lower() != bot_username.lower():
        return None
    return CommandRequest(name=name.lower(), args=(args or "").strip())
