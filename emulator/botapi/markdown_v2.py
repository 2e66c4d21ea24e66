"""MarkdownV2 as TDLib's ``parse_markdown_v2`` (td/telegram/MessageEntity.cpp) reads it: markup Telegram
rejects is rejected with the same description (``MarkupError``)."""

from __future__ import annotations

import re

from .markup import Entity, MarkupError, Out, byte_offset, pre_start, sorted_entities

_V2_TYPES = {
    "bold": "Bold", "italic": "Italic", "underline": "Underline", "strikethrough": "Strikethrough",
    "spoiler": "Spoiler", "code": "Code", "pre": "Pre", "text_link": "TextUrl", "custom_emoji": "CustomEmoji",
    "blockquote": "BlockQuote",
}


class _Open:
    """An entity whose closing markup has not been read yet."""

    def __init__(self, kind: str, offset: int, at: int, index: int, argument: str = ""):
        self.kind, self.offset, self.at, self.index, self.argument = kind, offset, at, index, argument

    def name(self) -> str:
        return "PreCode" if self.kind == "pre" and self.argument else _V2_TYPES[self.kind]

    def unclosed(self) -> MarkupError:
        return MarkupError(f"Can't find end of {self.name()} entity at byte offset {self.at}")


def _reserved(char: str) -> MarkupError:
    return MarkupError(f"Character '{char}' is reserved and must be escaped with the preceding '\\'")


def _read_url(src: str, i: int) -> tuple[str, int]:
    """Reads a "(url)" whose '(' is at ``i - 1``; returns the URL and the index of ')'."""
    start, url = i, []
    while i < len(src) and src[i] != ")":
        if src[i] == "\\" and i + 1 < len(src) and 0 < ord(src[i + 1]) <= 126:
            url.append(src[i + 1])
            i += 2
            continue
        url.append(src[i])
        i += 1
    if i >= len(src):
        raise MarkupError(f"Can't find end of a URL at byte offset {byte_offset(src, start)}")
    return "".join(url), i


def parse_markdown_v2(src: str) -> tuple[str, list[Entity]]:
    return _MarkdownV2(src).parse()


_V2_RESERVED = "_*[]()~`>#+-=|{}.!\n"
"""What MarkdownV2 reserves outside code; inside code and pre only "`" is."""


class _MarkdownV2:
    """One MarkdownV2 text read character by character, as TDLib's ``parse_markdown_v2`` reads it:
    ``stack`` holds the entities opened and not yet closed, ``in_quote`` whether a blockquote is open,
    ``line_start`` whether the next character begins a line (where ">" opens a blockquote)."""

    def __init__(self, src: str):
        self.src, self.i = src, 0
        self.out, self.entities, self.stack = Out(), [], []
        self.in_quote = False
        self.line_start = True

    def parse(self) -> tuple[str, list[Entity]]:
        src = self.src
        while self.i < len(src):
            c = src[self.i]
            if c == "\\" and self.i + 1 < len(src) and 0 < ord(src[self.i + 1]) <= 126:
                self.i += 1
                self._plain(src[self.i], escaped=True)
            elif c not in ("`" if self.stack and self.stack[-1].kind in ("code", "pre") else _V2_RESERVED):
                self._plain(c, escaped=False)
            elif self._closes(c):
                self._close(c)
            else:
                self._open(c)
            self.i += 1
        self._finish()
        return self.out.text(), sorted_entities(self.entities)

    def _plain(self, char: str, *, escaped: bool) -> None:
        """A character of the text itself; of those, only an escaped newline starts a line."""
        self.out.add(char)
        if char != "\r":
            self.line_start = escaped and char == "\n"

    def _closes(self, c: str) -> bool:
        """Whether ``c`` ends the innermost open entity (a newline not followed by ">" ends a quote)."""
        if not self.stack:
            return False
        src, i = self.src, self.i
        return (self.in_quote and c == "\n" and not src.startswith(">", i + 1)) or {
            "bold": c == "*", "italic": c == "_" and not src.startswith("_", i + 1), "code": c == "`",
            "pre": src.startswith("```", i), "text_link": c == "]", "underline": src.startswith("__", i),
            "strikethrough": c == "~", "spoiler": src.startswith("||", i), "custom_emoji": c == "]",
            "blockquote": False}[self.stack[-1].kind]

    def _open(self, c: str) -> None:
        """Markup that opens an entity, a newline, or a quote's next ">"; any other ``c`` is reserved."""
        src, i = self.src, self.i
        at = byte_offset(src, i)
        if c == "\n":
            self.out.add("\n")
            self.line_start = True
            return
        argument = ""
        if c == "_":
            kind = "underline" if src.startswith("__", i) else "italic"
            i += 1 if kind == "underline" else 0
        elif c in "*~":
            kind = {"*": "bold", "~": "strikethrough"}[c]
        elif c == "|" and src.startswith("||", i):
            kind = "spoiler"
            i += 1
        elif c == "[":
            kind = "text_link"
        elif c == "`" and src.startswith("```", i):
            kind = "pre"
            argument, i = pre_start(src, i + 3)
            i -= 1
        elif c == "`":
            kind = "code"
        elif c == "!" and src.startswith("[", i + 1):
            kind = "custom_emoji"
            i += 1
        elif c == ">" and self.line_start:
            if self.in_quote:
                return
            kind, self.in_quote = "blockquote", True
        else:
            raise _reserved(c)
        self.stack.append(_Open(kind, self.out.u16, at, len(self.out.chars), argument))
        self.i = i

    def _close(self, c: str) -> None:
        """Closes the innermost entity, reading the rest of its markup (a link's URL, a fence)."""
        top = self.stack[-1]
        kind = top.kind
        if c == "\n" and kind != "blockquote":
            top, kind = self._expandable(top)
        skip = self.out.u16 == top.offset
        entity: Entity = {"type": kind, "offset": top.offset}
        if kind in ("underline", "spoiler"):
            self.i += 1
        elif kind == "pre":
            self.i += 2
            if top.argument:
                entity["language"] = top.argument
        elif kind == "text_link":
            entity["url"] = self._url() if self.src.startswith("(", self.i + 1) else self.out.text(top.index)
            skip = skip or not entity["url"]
        elif kind == "custom_emoji":
            entity["custom_emoji_id"] = self._emoji_id()
        elif kind in ("blockquote", "expandable_blockquote"):
            self.in_quote = False
            self.out.add("\n")
            self.line_start, skip = True, False
        if not skip:
            entity["length"] = self.out.u16 - top.offset
            self.entities.append(entity)
        self.stack.pop()

    def _expandable(self, top: _Open) -> tuple[_Open, str]:
        """A quote's end right after a spoiler's "||" makes the quote expandable; else ``top`` is unclosed."""
        if top.kind != "spoiler" or top.at != byte_offset(self.src, self.i) - 2:
            raise top.unclosed()
        self.stack.pop()
        quote = self.stack[-1]
        if quote.kind != "blockquote":
            raise quote.unclosed()
        return quote, "expandable_blockquote"

    def _url(self) -> str:
        """The "(url)" right after the current "]"; moves to its ")"."""
        url, self.i = _read_url(self.src, self.i + 2)
        return url

    def _emoji_id(self) -> str:
        if not self.src.startswith("(", self.i + 1):
            raise MarkupError("The entity must contain a tg://emoji or tg://time URL")
        match = re.fullmatch(r"tg://emoji\?id=([1-9][0-9]*)", self._url())
        if not match:
            raise MarkupError("Invalid tg://emoji or tg://time URL specified")
        return match.group(1)

    def _finish(self) -> None:
        """At the end of the text a quote still open closes (expandable after "||"); anything else is unclosed."""
        stack, out = self.stack, self.out
        if self.in_quote:
            kind = "blockquote"
            if stack[-1].kind == "spoiler" and stack[-1].at == len(self.src.encode()) - 2:
                stack.pop()
                kind = "expandable_blockquote"
            if stack and stack[-1].kind == "blockquote":
                top = stack.pop()
                if out.u16 > top.offset:
                    self.entities.append({"type": kind, "offset": top.offset, "length": out.u16 - top.offset})
        if stack:
            raise stack[-1].unclosed()
