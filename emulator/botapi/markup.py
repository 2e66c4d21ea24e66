"""What the ``parse_mode`` parsers share: the plain text being built, the error they raise, offsets.

Offsets and lengths are in UTF-16 code units, as in the Bot API; byte offsets in error messages are
UTF-8 offsets, as TDLib's.
"""

from __future__ import annotations

from typing import Any

Entity = dict[str, Any]


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class MarkupError(ValueError):
    """Markup Telegram rejects; the message is TDLib's description."""


class Out:
    """The plain text being built, with its length in UTF-16 code units."""

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.u16 = 0

    def add(self, chars: str) -> None:
        self.chars.append(chars)
        self.u16 += utf16_len(chars)

    def text(self, start: int = 0) -> str:
        return "".join(self.chars[start:])


def byte_offset(src: str, pos: int) -> int:
    return len(src[:pos].encode())


def sorted_entities(entities: list[Entity]) -> list[Entity]:
    return sorted(entities, key=lambda e: (e["offset"], -e["length"]))


def pre_start(src: str, i: int) -> tuple[str, int]:
    """After an opening ```, reads the optional language and skips one newline; returns (language, index)."""
    end = i
    while end < len(src) and not src[end].isspace() and src[end] != "`":
        end += 1
    language = ""
    if end != i and end < len(src) and src[end] != "`":
        language, i = src[i:end], end
    if i < len(src) and src[i] in "\r\n":
        i += 2 if i + 1 < len(src) and src[i + 1] in "\r\n" and src[i + 1] != src[i] else 1
    return language, i
