"""Reading a Bot API request's parameters as Telegram does: numbers, formatted text and captions,
inline keyboards, and (local mode) files named by their path."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from . import text as formatting
from .markup import utf16_len
from .wire import Upload, bad_request


def integer(params: dict[str, Any], name: str, default: int = 0) -> int:
    value = params.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def local_upload(ref: str) -> Upload:
    """A file the bot names by its path or ``file://`` URI on this machine (local mode only)."""
    path = Path(unquote(urlsplit(ref).path) if ref.startswith("file://") else ref)
    try:
        return Upload(path.name, "", path.read_bytes())
    except OSError:
        raise bad_request("wrong file identifier/HTTP URL specified") from None


def _formatted(params: dict[str, Any], field: str, entities_field: str, limit: int, too_long: str,
               empty: str | None = None) -> dict[str, Any]:
    """The message content for a text or caption field: {field: text, entities_field: [...]}, or {}."""
    raw = params.get(field)
    if raw is None or raw == "":
        if empty:
            raise bad_request(empty)
        return {}
    text, entities = formatting.parse(str(raw), params.get("parse_mode"), params.get(entities_field))
    if not text and empty:
        raise bad_request(empty)
    if utf16_len(text) > limit:
        raise bad_request(too_long)
    content: dict[str, Any] = {field: text} if text else {}
    if entities:
        content[entities_field] = entities
    return content


def read_text(params: dict[str, Any]) -> dict[str, Any]:
    return _formatted(params, "text", "entities", 4096, "message is too long", empty="message text is empty")


def read_caption(params: dict[str, Any]) -> dict[str, Any]:
    return _formatted(params, "caption", "caption_entities", 1024, "message caption is too long")


def typed_text(text: str) -> dict[str, Any]:
    """A text as a Telegram client sends it: ``/command`` words get bot_command entities."""
    content: dict[str, Any] = {"text": text}
    if entities := formatting.command_entities(text):
        content["entities"] = entities
    return content


BUTTON_ACTIONS = frozenset({
    "url", "callback_data", "web_app", "login_url", "switch_inline_query", "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay",
})


def read_markup(params: dict[str, Any]) -> dict[str, Any] | None:
    """The inline keyboard a message will carry; reply keyboards are accepted but not part of a Message."""
    markup = params.get("reply_markup")
    if markup is None:
        return None
    if not isinstance(markup, dict):
        raise bad_request("can't parse reply keyboard markup JSON object")
    if "inline_keyboard" not in markup:
        return None  # a reply keyboard: the chat's, not the message's (``keyboards``)
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request('field "inline_keyboard" of the InlineKeyboardMarkup must be an Array of Arrays')
    for button in itertools.chain.from_iterable(rows):
        if not isinstance(button, dict) or not isinstance(button.get("text"), str):
            raise bad_request("can't parse inline keyboard button: InlineKeyboardButton must be an Object")
        if len(BUTTON_ACTIONS.intersection(button)) != 1:
            raise bad_request("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
        data = button.get("callback_data")
        if data is not None and (not isinstance(data, str) or len(data.encode()) > 64):
            raise bad_request("BUTTON_DATA_INVALID")
        _check_switch(button)
    return {"inline_keyboard": rows} if rows else None


SWITCH_CHATS = ("allow_user_chats", "allow_bot_chats", "allow_group_chats", "allow_channel_chats")


def _check_switch(button: dict[str, Any]) -> None:
    """A ``switch_inline_query*`` button: a query String, or a SwitchInlineQueryChosenChat Object
    (an optional ``query`` String and the chat types the picker may offer, Booleans)."""
    for key in ("switch_inline_query", "switch_inline_query_current_chat"):
        if key in button and not isinstance(button[key], str):
            raise bad_request(f'can\'t parse inline keyboard button: field "{key}" must be of type String')
    chosen = button.get("switch_inline_query_chosen_chat")
    if chosen is not None and not (isinstance(chosen, dict) and isinstance(chosen.get("query", ""), str)
                                   and all(isinstance(chosen.get(key, False), bool) for key in SWITCH_CHATS)):
        raise bad_request("can't parse inline keyboard button: SwitchInlineQueryChosenChat must be an Object "
                          "with a String query and Boolean allow_* fields")
