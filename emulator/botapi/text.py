"""Formatted text as Telegram stores it: markup in, plain text plus MessageEntity list out.

The three ``parse_mode`` parsers follow TDLib's (td/telegram/MessageEntity.cpp:
``parse_html``, ``parse_markdown_v2`` in ``markdown_v2``, ``parse_markdown``) closely enough that
markup Telegram rejects is rejected here with the same description, so a bot's
escaping bug fails in tests as it would in production. ``normalize`` then trims
the text as ``fix_formatted_text`` does. Offsets and lengths are in UTF-16 code
units, as in the Bot API; byte offsets in error messages are UTF-8 offsets.
Not done: the automatic entities (url, mention, hashtag) Telegram adds to the
text a bot sends.
"""

from __future__ import annotations

import re
import string
from typing import Any

from .markdown_v2 import parse_markdown_v2
from .markup import Entity, MarkupError, Out, byte_offset, pre_start, sorted_entities, utf16_len
from .wire import bad_request

_COMMAND = re.compile(r"(?<!\S)/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{1,32})?(?!\S)")


def parse(text: str, parse_mode: str | None, entities: Any) -> tuple[str, list[Entity]]:
    """Applies ``parse_mode`` (or takes explicit ``entities``), then trims as Telegram does."""
    mode = (parse_mode or "").lower()
    if mode in ("", "none"):
        if entities is None:
            entities = []
        if not isinstance(entities, list) or not all(_is_entity(e) for e in entities):
            raise bad_request("can't parse entities JSON object")
        found = sorted(entities, key=lambda e: (e["offset"], -e["length"]))
    elif mode in _PARSERS:
        try:
            text, found = _PARSERS[mode](text)
        except MarkupError as error:
            raise bad_request(f"can't parse entities: {error}") from None
    else:
        raise bad_request("unsupported parse_mode")
    return normalize(text, found)


def normalize(text: str, entities: list[Entity]) -> tuple[str, list[Entity]]:
    """Right-trims whitespace and left-trims spaces and newlines that precede the first entity."""
    stripped = text.rstrip()
    end = utf16_len(stripped)
    kept = []
    for entity in entities:
        if entity["length"] > 0 and entity["offset"] < end:
            kept.append({**entity, "length": min(entity["length"], end - entity["offset"])})
    first = kept[0]["offset"] if kept else end
    lead = 0
    while lead < first and stripped[lead] in " \n":
        lead += 1
    return stripped[lead:], [{**e, "offset": e["offset"] - lead} for e in kept]


def command_entities(text: str) -> list[Entity]:
    """The bot_command entities a Telegram client marks in a user's message."""
    return [{"type": "bot_command", "offset": utf16_len(text[:m.start()]), "length": utf16_len(m.group())}
            for m in _COMMAND.finditer(text)]


def _is_entity(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("type"), str)
            and isinstance(value.get("offset"), int) and isinstance(value.get("length"), int))


# --- HTML -------------------------------------------------------------------

_HTML_TAGS = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
    "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "tg-spoiler": "spoiler",
    "span": "spoiler", "a": "text_link", "code": "code", "pre": "pre", "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
_NAMED_REFERENCES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


def _html_reference(src: str, i: int) -> tuple[str, int]:
    """Decodes the character reference at ``src[i] == '&'``; ("", i) when there is none."""
    j = i + 1
    if src.startswith("#", j):
        j += 1
        hexadecimal = src.startswith("x", j)
        j += hexadecimal
        digits, start = (string.hexdigits if hexadecimal else string.digits), j
        while j < len(src) and src[j] in digits:
            j += 1
        code = int(src[start:j], 16 if hexadecimal else 10) if j > start else 0
        if code == 0 or code >= 0x10FFFF or j - i >= 10:
            return "", i
        if 0xD800 <= code <= 0xDFFF:
            raise MarkupError("Text contains invalid Unicode characters after decoding HTML entities, "
                               "check for unmatched surrogate code units")
        char = chr(code)
    else:
        start = j
        while j < len(src) and src[j] in string.ascii_letters:
            j += 1
        char = _NAMED_REFERENCES.get(src[start:j], "")
        if not char:
            return "", i
    return char, j + src.startswith(";", j)


def _html_attributes(src: str, i: int, tag: str, at: int) -> tuple[str, int]:
    """Reads a start tag's attributes up to '>'; returns the tag's argument and the index after '>'."""
    argument = ""

    def unclosed() -> MarkupError:
        return MarkupError(f'Unclosed start tag "{tag}" at byte offset {at}')

    while True:
        while i < len(src) and src[i].isspace():
            i += 1
        if i >= len(src):
            raise MarkupError(f"Unclosed start tag at byte offset {at}")
        if src[i] == ">":
            return argument, i + 1
        start = i
        while i < len(src) and not src[i].isspace() and src[i] not in "=>/\"'":
            i += 1
        name = src[start:i]
        if not name:
            raise MarkupError(f'Empty attribute name in the tag "{tag}" at byte offset {at}')
        while i < len(src) and src[i].isspace():
            i += 1
        if i >= len(src):
            raise unclosed()
        if src[i] != "=":
            if tag == "blockquote" and name == "expandable":
                argument = "1"
            continue
        i += 1
        while i < len(src) and src[i].isspace():
            i += 1
        if i >= len(src):
            raise unclosed()
        if src[i] in "\"'":
            quote, value = src[i], []
            i += 1
            while i < len(src) and src[i] != quote:
                char, j = _html_reference(src, i) if src[i] == "&" else ("", i)
                value.append(char or src[i])
                i = j if char else i + 1
            i += i < len(src)
            text = "".join(value)
        else:
            start = i
            while i < len(src) and (src[i] in string.ascii_letters + string.digits + ".-"):
                i += 1
            text = src[start:i].lower()
            if i < len(src) and not (src[i].isspace() or src[i] == ">"):
                raise MarkupError(f"Unexpected end of name token at byte offset {byte_offset(src, start)}")
        if i >= len(src):
            raise MarkupError(f"Unclosed start tag at byte offset {at}")
        if (tag, name) in (("a", "href"), ("tg-emoji", "emoji-id")):
            argument = text
        elif (tag, name) == ("code", "class") and text.startswith("language-"):
            argument = text[len("language-"):]
        elif (tag, name) == ("span", "class") and text.startswith("tg-"):
            argument = text[len("tg-"):]
        elif (tag, name) == ("blockquote", "expandable"):
            argument = "1"


def parse_html(src: str) -> tuple[str, list[Entity]]:
    out, entities = Out(), []
    open_tags: list[tuple[str, str, int, int]] = []  # tag, argument, UTF-16 offset, index in out
    i = 0
    while i < len(src):
        if src[i] == "&":
            char, j = _html_reference(src, i)
            if char:
                out.add(char)
                i = j
                continue
        if src[i] != "<":
            out.add(src[i])
            i += 1
            continue
        at = byte_offset(src, i)
        if not src.startswith("/", i + 1):
            j = i + 1
            while j < len(src) and not src[j].isspace() and src[j] != ">":
                j += 1
            if j >= len(src):
                raise MarkupError(f"Unclosed start tag at byte offset {at}")
            tag = src[i + 1:j].lower()
            if tag not in _HTML_TAGS:
                raise MarkupError(f'Unsupported start tag "{tag}" at byte offset {at}')
            argument, i = _html_attributes(src, j, tag, at)
            if tag == "span" and argument != "spoiler":
                raise MarkupError(f'Tag "span" must have class "tg-spoiler" at byte offset {at}')
            open_tags.append((tag, argument, out.u16, len(out.chars)))
            continue
        if not open_tags:
            raise MarkupError(f"Unexpected end tag at byte offset {at}")
        j = i + 2
        while j < len(src) and not src[j].isspace() and src[j] != ">":
            j += 1
        end_tag = src[i + 2:j].lower()
        while j < len(src) and src[j].isspace():
            j += 1
        if j >= len(src) or src[j] != ">":
            raise MarkupError(f"Unclosed end tag at byte offset {at}")
        tag, argument, offset, index = open_tags.pop()
        if end_tag and end_tag != tag:
            raise MarkupError(f'Unmatched end tag at byte offset {at}, expected "</{tag}>", found "</{end_tag}>"')
        i = j + 1
        if out.u16 > offset:
            _close_html_entity(entities, tag, argument, offset, out.u16 - offset, out.text(index))
    if open_tags:
        raise MarkupError(f'Can\'t find end tag corresponding to start tag "{open_tags[-1][0]}"')
    for entity in entities:
        if entity["type"] == "code":
            entity.pop("language", None)
    return out.text(), sorted_entities(entities)


def _close_html_entity(entities: list[Entity], tag: str, argument: str, offset: int, length: int,
                       inner: str) -> None:
    kind = _HTML_TAGS[tag]
    last = entities[-1] if entities else {}
    same_span = last.get("offset") == offset and last.get("length") == length
    if tag == "pre" and same_span and last["type"] == "code" and last.get("language"):
        last["type"] = "pre"
        return
    if tag == "code" and same_span and last["type"] == "pre" and argument:
        last["language"] = argument
        return
    entity: Entity = {"type": kind, "offset": offset, "length": length}
    if tag == "a":
        entity["url"] = argument or inner
    elif tag == "code" and argument:
        entity["language"] = argument
    elif tag == "tg-emoji":
        if not argument.isdigit() or int(argument) == 0:
            raise MarkupError("Invalid custom emoji identifier specified")
        entity["custom_emoji_id"] = argument
    elif tag == "blockquote" and argument:
        entity["type"] = "expandable_blockquote"
    entities.append(entity)


# --- Markdown (legacy) --------------------------------------------------------

def parse_markdown(src: str) -> tuple[str, list[Entity]]:
    out, entities = Out(), []
    i = 0
    while i < len(src):
        c = src[i]
        if c == "\\" and src[i + 1:i + 2] in ("_", "*", "`", "["):
            out.add(src[i + 1])
            i += 2
            continue
        if c not in "_*`[":
            out.add(c)
            i += 1
            continue
        begin, end_char, language = i, "]" if c == "[" else c, ""
        is_pre = src.startswith("```", i)
        i += 3 if is_pre else 1
        if is_pre:
            language, i = pre_start(src, i)
        offset, start_index = out.u16, len(out.chars)
        while i < len(src) and (src[i] != end_char or (is_pre and not src.startswith("```", i))):
            out.add(src[i])
            i += 1
        if i >= len(src):
            raise MarkupError(f"Can't find end of the entity starting at byte offset {byte_offset(src, begin)}")
        if out.u16 > offset:
            entity: Entity = {"type": {"_": "italic", "*": "bold", "[": "text_link", "`": "code"}[c],
                              "offset": offset, "length": out.u16 - offset}
            if is_pre:
                entity["type"] = "pre"
                if language:
                    entity["language"] = language
            if c == "[":
                entity["url"] = out.text(start_index)
                if src.startswith("(", i + 1):
                    end = src.find(")", i + 2)
                    end = len(src) if end < 0 else end
                    entity["url"], i = src[i + 2:end], end
            if entity.get("url") != "":
                entities.append(entity)
        i += 3 if is_pre else 1
    return out.text(), sorted_entities(entities)


_PARSERS = {"html": parse_html, "markdownv2": parse_markdown_v2, "markdown": parse_markdown}
