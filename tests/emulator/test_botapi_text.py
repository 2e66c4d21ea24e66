"""parse_mode parsing as TDLib does it: entities in UTF-16 offsets, Telegram's error wording."""

import pytest

from comfyui_courier.emulator.botapi import ApiError
from comfyui_courier.emulator.botapi.markdown_v2 import parse_markdown_v2
from comfyui_courier.emulator.botapi.text import (
    command_entities,
    normalize,
    parse,
    parse_html,
    parse_markdown,
)


def spans(entities):
    return [(e["type"], e["offset"], e["length"]) for e in entities]


def test_html_nesting_references_and_utf16_offsets():
    text, entities = parse_html("😀 <b>bold <i>both</i></b> &lt;tag&gt; &#x1F600; a&amp;b &nbsp;")
    assert text == "😀 bold both <tag> 😀 a&b &nbsp;"
    assert spans(entities) == [("bold", 3, 9), ("italic", 8, 4)]


def test_html_links_pre_code_spoilers_and_quotes():
    text, entities = parse_html('<a href="https://x.org/?a=1&amp;b=2">link</a> <pre><code class="language-python">'
                                'print(1)</code></pre> <code class="language-x">c</code> '
                                '<span class="tg-spoiler">s</span> <blockquote expandable>q</blockquote>')
    assert text == "link print(1) c s q"
    assert entities == [
        {"type": "text_link", "offset": 0, "length": 4, "url": "https://x.org/?a=1&b=2"},
        {"type": "pre", "offset": 5, "length": 8, "language": "python"},
        {"type": "code", "offset": 14, "length": 1},
        {"type": "spoiler", "offset": 16, "length": 1},
        {"type": "expandable_blockquote", "offset": 18, "length": 1},
    ]


@pytest.mark.parametrize(("markup", "error"), [
    ("a <b>x", 'Can\'t find end tag corresponding to start tag "b"'),
    ("<b>x</i>", 'Unmatched end tag at byte offset 4, expected "</b>", found "</i>"'),
    ("x </b>", "Unexpected end tag at byte offset 2"),
    ("é<foo>", 'Unsupported start tag "foo" at byte offset 2'),
    ("<span>s</span>", 'Tag "span" must have class "tg-spoiler" at byte offset 0'),
    ("1 < 2", 'Unsupported start tag "" at byte offset 2'),
    ("<b", "Unclosed start tag at byte offset 0"),
])
def test_html_errors(markup, error):
    with pytest.raises(ApiError) as caught:
        parse(markup, "HTML", None)
    assert caught.value.description == f"Bad Request: can't parse entities: {error}"


def test_markdown_v2_entities_and_escapes():
    text, entities = parse_markdown_v2(
        r"*bold _italic_* __under__ ~strike~ ||spoiler|| `co\`de` [link](https://x.org/a\)b) 1\.5\!")
    assert text == "bold italic under strike spoiler co`de link 1.5!"
    assert entities == [
        {"type": "bold", "offset": 0, "length": 11}, {"type": "italic", "offset": 5, "length": 6},
        {"type": "underline", "offset": 12, "length": 5}, {"type": "strikethrough", "offset": 18, "length": 6},
        {"type": "spoiler", "offset": 25, "length": 7}, {"type": "code", "offset": 33, "length": 5},
        {"type": "text_link", "offset": 39, "length": 4, "url": "https://x.org/a)b"},
    ]


def test_markdown_v2_pre_and_blockquotes():
    assert parse_markdown_v2("```python\nprint(1)\n```") == (
        "print(1)\n", [{"type": "pre", "offset": 0, "length": 9, "language": "python"}])
    assert parse_markdown_v2(">quote\nplain") == ("quote\nplain", [{"type": "blockquote", "offset": 0, "length": 6}])
    assert parse_markdown_v2("**>a\n>b||") == ("a\nb", [{"type": "expandable_blockquote", "offset": 0, "length": 3}])


@pytest.mark.parametrize(("markup", "parsed"), [
    ("![👍](tg://emoji?id=5368324170671202286)",
     ("👍", [{"type": "custom_emoji", "offset": 0, "length": 2, "custom_emoji_id": "5368324170671202286"}])),
    ("[x]", ("x", [{"type": "text_link", "offset": 0, "length": 1, "url": "x"}])),  # the text is the URL
    ("[x]()", ("x", [])),  # an empty URL: no entity
    ("**", ("", [])),  # an empty entity is dropped
    ("a\\\n>q", ("a\nq", [{"type": "blockquote", "offset": 2, "length": 1}])),  # an escaped newline starts a line
    ("x\r\n>y", ("x\r\ny", [{"type": "blockquote", "offset": 3, "length": 1}])),
    (">a\n>b\nc", ("a\nb\nc", [{"type": "blockquote", "offset": 0, "length": 4}])),
    ("**>a||\nb", ("a\nb", [{"type": "expandable_blockquote", "offset": 0, "length": 2}])),
    (">a||", ("a", [{"type": "expandable_blockquote", "offset": 0, "length": 1}])),
    ("```\n*a\n```", ("*a\n", [{"type": "pre", "offset": 0, "length": 3}])),  # nothing is markup in pre
    ("`a*b`", ("a*b", [{"type": "code", "offset": 0, "length": 3}])),
    ("_a__b___", ("ab", [{"type": "italic", "offset": 0, "length": 2},
                         {"type": "underline", "offset": 1, "length": 1}])),
    ("*a\nb*", ("a\nb", [{"type": "bold", "offset": 0, "length": 3}])),
])
def test_markdown_v2_table(markup, parsed):
    assert parse_markdown_v2(markup) == parsed


@pytest.mark.parametrize(("markup", "error"), [
    ("Done.", "Character '.' is reserved and must be escaped with the preceding '\\'"),
    ("*bold", "Can't find end of Bold entity at byte offset 0"),
    ("ok ```py\nx", "Can't find end of PreCode entity at byte offset 3"),
    ("[a](http://x", "Can't find end of a URL at byte offset 4"),
    ("a > b", "Character '>' is reserved and must be escaped with the preceding '\\'"),
    ("![x](tg://emoji?id=0)", "Invalid tg://emoji or tg://time URL specified"),
    ("![x]", "The entity must contain a tg://emoji or tg://time URL"),
    (">a\n||b\n", "Can't find end of Spoiler entity at byte offset 3"),
    ("||a\n>b||", "Can't find end of Spoiler entity at byte offset 0"),
    ("__a_b_\\__", "Can't find end of Italic entity at byte offset 8"),
])
def test_markdown_v2_errors(markup, error):
    with pytest.raises(ApiError) as caught:
        parse(markup, "MarkdownV2", None)
    assert caught.value.description == f"Bad Request: can't parse entities: {error}"


def test_legacy_markdown():
    assert parse_markdown(r"*bold* _it_ `code` [x](http://a.b) a\_b 2.5.") == ("bold it code x a_b 2.5.", [
        {"type": "bold", "offset": 0, "length": 4}, {"type": "italic", "offset": 5, "length": 2},
        {"type": "code", "offset": 8, "length": 4}, {"type": "text_link", "offset": 13, "length": 1,
                                                     "url": "http://a.b"}])
    assert parse_markdown("```py\nx=1```") == ("x=1", [{"type": "pre", "offset": 0, "length": 3, "language": "py"}])
    with pytest.raises(ApiError, match="Can't find end of the entity starting at byte offset 0"):
        parse("*open", "Markdown", None)


def test_normalize_trims_like_telegram():
    assert normalize("  \n hi  \n", []) == ("hi", [])
    assert parse("\n<b>x</b> ", "html", None) == ("x", [{"type": "bold", "offset": 0, "length": 1}])
    assert parse("x <b> </b>", "HTML", None) == ("x", [])
    assert parse("```\ncode\n```", "MarkdownV2", None) == ("code", [{"type": "pre", "offset": 0, "length": 4}])
    explicit = [{"type": "bold", "offset": 0, "length": 2}]
    assert parse("hi", None, explicit) == ("hi", explicit)
    with pytest.raises(ApiError, match="unsupported parse_mode"):
        parse("x", "HTMLX", None)
    with pytest.raises(ApiError, match="can't parse entities JSON object"):
        parse("x", None, "[")


def test_command_entities_mark_commands_like_a_client():
    assert spans(command_entities("/start")) == [("bot_command", 0, 6)]
    assert spans(command_entities("/demo@courier_bot hi /x")) == [("bot_command", 0, 17), ("bot_command", 21, 2)]
    assert command_entities("a/b and 1/2") == []
    assert spans(command_entities("😀 /go")) == [("bot_command", 3, 3)]
