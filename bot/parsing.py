"""Parse `/name@bot args` command messages into a validated request; clean user text for SQL and JSON.

User text is cleaned, not refused: control characters (NUL included; newline and tab
stay) and unpaired surrogates are dropped, since PostgreSQL text cannot hold NUL and
JSON text cannot hold a lone surrogate, and a Telegram client cannot type either.
Text made only of invisible characters (zero-width spaces, joiners, BOM...) is empty.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata

COMMAND_RE = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:@([A-Za-z0-9_]{3,64}))?(.*)$", re.DOTALL)
MAX_PROMPT_CHARS = 2000
MAX_ECHO_CHARS = 64
"""Of the user's own text quoted back in a reply (an unknown name): a reply must stay within Telegram's 4,096."""
BLANK_LETTERS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
"""Characters that show nothing although Unicode does not call them format or space characters."""


@dataclasses.dataclass(frozen=True)
class CommandRequest:
    name: str
    args: str


def clean_text(text: str | None) -> str | None:
    """``text`` without control characters (but newline and tab) and unpaired surrogates; None stays None."""
    if text is None or (text.isascii() and text.isprintable()):  # nearly every message: nothing to drop
        return text
    return "".join(c for c in text if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cs"))


def echo(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` to quote back to its sender: cut to ``limit`` characters, the cut shown with an ellipsis."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def profile(user) -> tuple[str | None, str | None, str | None]:
    """(username, first_name, language_code) of a Telegram user, cleaned for the database."""
    return clean_text(user.username), clean_text(user.first_name), clean_text(user.language_code)


def is_blank(char: str) -> bool:
    """Whitespace, or a character that shows nothing (zero-width space, joiner, BOM...)."""
    if char.isascii():
        return char.isspace()
    return char.isspace() or char in BLANK_LETTERS or unicodedata.category(char) == "Cf"


def strip_blank(text: str) -> str:
    """``text`` without whitespace and invisible characters at either end ("" if it has nothing else)."""
    if text.isascii():
        return text.strip()
    start, end = 0, len(text)
    while start < end and is_blank(text[start]):
        start += 1
    while end > start and is_blank(text[end - 1]):
        end -= 1
    return text[start:end]


def parse_command(text: str | None, bot_username: str | None = None) -> CommandRequest | None:
    """The command in a message, or None if it is not one (or is addressed to another bot)."""
    match = COMMAND_RE.match(strip_blank(clean_text(text or "")))
    if not match:
        return None
    name, addressee, args = match.groups()
    if args and not is_blank(args[0]):  # "/demo!" is no command; "/demo<zero-width space>text" is
        return None
    if addressee and bot_username and addressee.lower() != bot_username.lower():
        return None
    return CommandRequest(name=name.lower(), args=strip_blank(args))
