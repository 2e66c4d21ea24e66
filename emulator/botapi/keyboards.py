"""Reply keyboards, as the Bot API docs describe them: ``ReplyKeyboardMarkup`` (rows of
``KeyboardButton``, one of which may open a Mini App: ``web_app``) and ``ReplyKeyboardRemove``.

A private chat shows the last reply keyboard the bot sent until it sends another or removes it
(``chat_keyboards``). Pressing a ``web_app`` button opens the Mini App; what the page sends with
``web_app_data_send`` comes to the bot as a ``web_app_data`` message (``web_app_data``).

Telegram takes only ``https://`` Mini App URLs; the emulator also takes ``http://`` to a loopback
address, so ``try`` can serve the page from ComfyUI without a certificate.
"""

from __future__ import annotations

import itertools
from typing import Any
from urllib.parse import urlsplit

from .wire import bad_request

REQUESTS = ("request_users", "request_chat", "request_contact", "request_location", "request_poll", "web_app")
"""A KeyboardButton's optional fields: at most one of them."""
LOOPBACK = ("127.0.0.1", "localhost", "::1")
MAX_DATA_BYTES = 4096
"""What ``web_app_data_send`` takes (``Telegram.WebApp.sendData``: 4096 bytes)."""


def check(markup: dict[str, Any], chat_type: str) -> dict[str, Any] | None:
    """The keyboard ``markup`` shows from now on (None: ReplyKeyboardRemove); a Bot API error if it is
    not a ReplyKeyboardMarkup or ReplyKeyboardRemove as documented."""
    if "keyboard" not in markup:
        if "remove_keyboard" in markup and markup["remove_keyboard"] is not True:
            raise bad_request("can't parse reply keyboard markup JSON object")
        return None
    rows = markup["keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad_request('field "keyboard" of the ReplyKeyboardMarkup must be an Array of Arrays')
    for button in itertools.chain.from_iterable(rows):
        if isinstance(button, str):
            continue
        if not isinstance(button, dict) or not isinstance(button.get("text"), str) or not button["text"]:
            raise bad_request("can't parse keyboard button: KeyboardButton must be an Object")
        if len([field for field in REQUESTS if field in button]) > 1:
            raise bad_request("can't parse keyboard button: only one of the optional fields may be used")
        if "web_app" in button:
            _check_web_app(button["web_app"], chat_type)
    placeholder = markup.get("input_field_placeholder")
    if placeholder is not None and not (isinstance(placeholder, str) and 1 <= len(placeholder) <= 64):
        raise bad_request("can't parse reply keyboard markup: input_field_placeholder must have 1-64 characters")
    return markup


def _check_web_app(web_app: Any, chat_type: str) -> None:
    url = web_app.get("url") if isinstance(web_app, dict) else None
    if not isinstance(url, str):
        raise bad_request("can't parse keyboard button: WebAppInfo must be an Object with a url")
    if chat_type != "private":
        raise bad_request("BUTTON_TYPE_INVALID")  # Mini App keyboard buttons work in private chats only
    parts = urlsplit(url)
    if not (parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK)) or not parts.hostname:
        raise bad_request(f"keyboard button Web App URL '{url}' is invalid: Only HTTPS links are allowed")


def web_app_data(keyboard: dict[str, Any] | None, data: str, button_text: str) -> dict[str, Any]:
    """The ``web_app_data`` of what the page opened by ``keyboard``'s button ``button_text`` sent;
    LookupError without such a button, ValueError if Telegram would not take ``data``."""
    buttons = itertools.chain.from_iterable((keyboard or {}).get("keyboard", []))
    if not any(isinstance(b, dict) and b.get("text") == button_text and "web_app" in b for b in buttons):
        raise LookupError(f"the chat shows no Mini App button {button_text!r}")
    if not 1 <= len(data.encode()) <= MAX_DATA_BYTES:
        raise ValueError(f"web_app_data_send takes 1-{MAX_DATA_BYTES} bytes")
    return {"data": data, "button_text": button_text}
