"""One emulated bot: its account, chats, updates, files and webhook, and the Bot API methods it answers.

Methods are registered by their Bot API name with ``@_method`` and dispatched
case-insensitively, as Telegram does. Each request becomes a ``Call`` in
``EmulatedBot.calls`` before it is answered, so tests see what the bot asked
for even when the answer was an error or never came.

Emulated: private chats with users (a user must have written to the bot
first, or sending fails with "chat not found", as in Telegram), text and
photo/document/video/animation/sticker messages, edits by the user, inline
keyboards, callback queries, inline mode (``inline``), edits (text, caption, media), deletions,
commands, getChat, getUpdates long polling and webhooks. Groups and supergroups: members' text and photos, which
reach the bot as privacy mode lets them (``sees_in_group``), anonymous group admins,
and channel posts. Not emulated: group membership, audio/voice, payments.
Webhook updates are delivered one at a time, in order (Telegram may deliver
up to ``max_connections`` at once).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import hashlib
import itertools
import json
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import aiohttp

from . import keyboards, media
from . import text as formatting
from .limits import FloodLimits
from .wire import ApiError, Upload, bad_request, decode_params, fault_error

if TYPE_CHECKING:
    from .server import BotApiEmulator

NOT_MODIFIED = ("message is not modified: specified new message content and reply markup are exactly the same "
                "as a current content and reply markup of the message")
MAX_DOWNLOAD = 20 * 1024 * 1024
LONG_POLL_MAX = 50
WEBHOOK_FIRST_RETRY = 1.0
WEBHOOK_MAX_RETRY = 60.0

CHAT_ACTIONS = frozenset({
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice", "upload_document",
    "choose_sticker", "find_location", "record_video_note", "upload_video_note",
})
BUTTON_ACTIONS = frozenset({
    "url", "callback_data", "web_app", "login_url", "switch_inline_query", "switch_inline_query_current_chat",
    "switch_inline_query_chosen_chat", "copy_text", "callback_game", "pay",
})
_FILE_ID_PREFIX = {"photo": "AgAC", "document": "BQAC", "video": "BAAC", "animation": "CgAC", "sticker": "CAAC"}
GROUP_COMMAND = re.compile(r"^/[A-Za-z0-9_]{1,32}(?:@([A-Za-z0-9_]{1,64}))?(?![A-Za-z0-9_@])")
"""A command at the start of a group message, and the bot it is addressed to, if any."""
GROUP_ANONYMOUS_BOT = {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"}
"""The sender of every message an anonymous group admin writes (the group itself is its sender_chat)."""


@dataclasses.dataclass
class Call:
    """One Bot API request, as the emulator read and answered it."""

    method: str
    """The method's Bot API spelling (``sendMessage``), whatever case the client used."""
    params: dict[str, Any]
    """Parameters, typed: Integer → int, Boolean → bool, JSON-serialized objects → dict/list."""
    files: dict[str, Upload]
    outbound: bool
    """Whether the method acts in a chat (send, edit, delete, answer, chat action)."""
    status: int | None = None
    """HTTP status answered; None while in flight, and for good when the call was hung."""
    result: Any = None
    failure: ApiError | None = None
    note: str | None = None
    """The ``description`` Telegram adds to some successes ("Webhook was set")."""
    received_at: float = dataclasses.field(default_factory=time.perf_counter)
    """When the request reached the emulator (``time.perf_counter``)."""

    @property
    def ok(self) -> bool:
        return self.status == 200

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params, "status": self.status, "result": self.result,
                "error": self.failure.description if self.failure else None,
                "files": {name: {"filename": f.filename, "content_type": f.content_type, "size": len(f.data)}
                          for name, f in self.files.items()}}


@dataclasses.dataclass(frozen=True)
class StoredFile:
    file_id: str
    file_unique_id: str
    kind: str
    data: bytes
    file_path: str
    content: Any
    """What a Message carries for it: the PhotoSize list, or the Document/Video/Animation object."""


@dataclasses.dataclass
class Webhook:
    url: str
    secret_token: str
    max_connections: int
    last_error_date: int | None = None
    last_error_message: str | None = None


@dataclasses.dataclass
class _Fault:
    method: str
    times: int
    error: ApiError | None
    """None: hang instead of answering."""
    perform: bool = False
    released: asyncio.Event | None = None
    """Set: the call waits for it, then is answered as usual (no error, no hang)."""


@dataclasses.dataclass(frozen=True)
class _Method:
    name: str
    handler: Callable[[EmulatedBot, Call], Awaitable[Any]]
    outbound: bool


METHODS: dict[str, _Method] = {}


def _method(name: str, *, outbound: bool = False) -> Callable:
    def register(handler: Callable) -> Callable:
        METHODS[name.lower()] = _Method(name, handler, outbound)
        return handler
    return register


def _int(params: dict[str, Any], name: str, default: int = 0) -> int:
    value = params.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _local_upload(ref: str) -> Upload:
    """A file the bot names by its path or ``file://`` URI on this machine (local mode only)."""
    path = Path(unquote(urlsplit(ref).path) if ref.startswith("file://") else ref)
    try:
        return Upload(path.name, "", path.read_bytes())
    except OSError:
        raise bad_request("wrong file identifier/HTTP URL specified") from None


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


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
    if formatting.utf16_len(text) > limit:
        raise bad_request(too_long)
    content: dict[str, Any] = {field: text} if text else {}
    if entities:
        content[entities_field] = entities
    return content


def _text(params: dict[str, Any]) -> dict[str, Any]:
    return _formatted(params, "text", "entities", 4096, "message is too long", empty="message text is empty")


def _caption(params: dict[str, Any]) -> dict[str, Any]:
    return _formatted(params, "caption", "caption_entities", 1024, "message caption is too long")


def _typed_text(text: str) -> dict[str, Any]:
    """A text as a Telegram client sends it: ``/command`` words get bot_command entities."""
    content: dict[str, Any] = {"text": text}
    if entities := formatting.command_entities(text):
        content["entities"] = entities
    return content


def _markup(params: dict[str, Any]) -> dict[str, Any] | None:
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


class EmulatedBot:
    """A bot account on the emulator. Its Bot API is served over HTTP; the rest is the test API."""

    def __init__(self, emulator: BotApiEmulator, token: str, user: dict[str, Any]):
        self.emulator = emulator
        self.token = token
        self.user = user
        """What getMe answers."""
        self.calls: list[Call] = []
        self.updates: list[dict[str, Any]] = []
        """Updates not yet confirmed by getUpdates or delivered to the webhook."""
        self.files: dict[str, StoredFile] = {}
        self.webhook: Webhook | None = None
        self.commands: dict[tuple[str, str], list[dict[str, str]]] = {}
        """setMyCommands lists by (scope as sorted JSON, language_code)."""
        self.allowed_updates: list[str] = []
        self.keyboards: dict[int, dict[str, Any] | None] = {}
        """The reply keyboard each chat shows (``keyboards``)."""
        self._sender = {key: user[key] for key in ("id", "is_bot", "first_name", "username")}
        self._chats: dict[int, dict[str, Any]] = {}
        self._blocked: set[int] = set()
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._last_message_id: dict[int, int] = {}
        self._paths: dict[str, StoredFile] = {}
        self._callback_queries: dict[str, dict[str, Any]] = {}
        self.inline_queries: dict[str, dict[str, Any]] = {}
        """Inline queries by id: ``{"query": InlineQuery, "answer": None until answered}`` (``inline``)."""
        self._faults: list[_Fault] = []
        self._outage: tuple[float, bool] | None = None
        """(until, hang) while every outbound call fails (``outage``); ``time.monotonic`` seconds."""
        self.flood_limits: FloodLimits | None = None
        """Telegram's flood limits, when a test turned them on (``enforce_limits``)."""
        self._update_ids = itertools.count(1)
        self._file_numbers = itertools.count(1)
        self._album_ids = itertools.count(1)
        self._query_ids = itertools.count(1)
        self._poll_generation = 0
        self._poll_conflict = ""
        self._delivery: asyncio.Task | None = None

    @property
    def id(self) -> int:
        return self.user["id"]

    @property
    def outbox(self) -> list[Call]:
        """Successful calls that acted in a chat, oldest first: what users saw the bot do."""
        return [call for call in self.calls if call.outbound and call.ok]

    # --- test API -------------------------------------------------------------

    def inject_text(self, user_id: int, text: str, *, reply_to: int | None = None) -> dict[str, Any]:
        """The user sends ``text``; ``/command`` words get bot_command entities. Returns the Message."""
        return self._from_user(user_id, _typed_text(text), reply_to)

    def inject_photo(self, user_id: int, data: bytes, *, caption: str | None = None,
                     reply_to: int | None = None) -> dict[str, Any]:
        """The user sends an image as a photo (recompressed, as Telegram clients do). Returns the Message."""
        return self._from_user(user_id, {"photo": self._store_photo(data), **_caption({"caption": caption})},
                               reply_to)

    def inject_document(self, user_id: int, data: bytes, file_name: str, *, mime_type: str | None = None,
                        caption: str | None = None, reply_to: int | None = None) -> dict[str, Any]:
        """The user sends a file as a document (bytes kept). Returns the Message."""
        document = self._store_file("document", Upload(file_name, mime_type or "", data), {})
        return self._from_user(user_id, {"document": document, **_caption({"caption": caption})}, reply_to)

    def inject_sticker(self, user_id: int, data: bytes, *, emoji: str = "🙂") -> dict[str, Any]:
        """The user sends a static sticker (WEBP bytes, kept). Returns the Message."""
        width, height = media.image_size(data)
        file_id, unique_id = self._ids("sticker", data)
        sticker = {"file_id": file_id, "file_unique_id": unique_id, "type": "regular", "width": width,
                   "height": height, "is_animated": False, "is_video": False, "emoji": emoji,
                   "file_size": len(data)}
        self._new_file("sticker", data, "webp", sticker, file_id, unique_id)
        return self._from_user(user_id, {"sticker": sticker}, None)

    def inject_edit(self, user_id: int, message_id: int, text: str) -> dict[str, Any]:
        """The user edits their text message ``message_id``: an ``edited_message`` update. Returns the Message."""
        message = self._messages.get((user_id, message_id))
        if message is None or message["from"]["id"] != user_id or "text" not in message:
            raise LookupError(f"no text message {message_id} of user {user_id}")
        edited = {k: v for k, v in message.items() if k != "entities"}
        edited.update(text=text, edit_date=int(time.time()))
        if entities := formatting.command_entities(text):
            edited["entities"] = entities
        self._messages[(user_id, message_id)] = edited
        self._add_update("edited_message", edited)
        return edited

    def inject_channel_post(self, channel_id: int, text: str, *, title: str = "Channel") -> dict[str, Any]:
        """A post in a channel the bot administers: no ``from``, the channel as ``sender_chat``."""
        chat = self._group_chat(channel_id, "channel", title)
        message = self._post(chat, None, {"sender_chat": chat, **_typed_text(text)})
        self._add_update("channel_post", message)
        return message

    def inject_anonymous_admin_text(self, group_id: int, text: str, *, title: str = "Group") -> dict[str, Any]:
        """An admin of a supergroup writes anonymously: from GroupAnonymousBot, the group as ``sender_chat``."""
        chat = self._group_chat(group_id, "supergroup", title)
        message = self._post(chat, dict(GROUP_ANONYMOUS_BOT), {"sender_chat": chat, **_typed_text(text)})
        self._add_update("message", message)
        return message

    def inject_group_text(self, group_id: int, user_id: int, text: str, *, reply_to: int | None = None,
                          kind: str = "supergroup", title: str = "Group") -> dict[str, Any]:
        """``user_id`` writes ``text`` in a group (``kind`` "group" or "supergroup") the bot is in.

        The bot gets the update only as far as Telegram's privacy mode lets it (``sees_in_group``).
        Returns the Message, which the group's history has either way.
        """
        return self._in_group(group_id, user_id, _typed_text(text), reply_to, kind, title)

    def inject_group_photo(self, group_id: int, user_id: int, data: bytes, *, caption: str | None = None,
                           reply_to: int | None = None, kind: str = "supergroup",
                           title: str = "Group") -> dict[str, Any]:
        """``user_id`` posts an image as a photo in a group; like ``inject_group_text``."""
        return self._in_group(group_id, user_id, {"photo": self._store_photo(data), **_caption({"caption": caption})},
                              reply_to, kind, title)

    def sees_in_group(self, message: dict[str, Any]) -> bool:
        """Whether a group message reaches the bot in privacy mode (every bot's default; getMe says
        ``can_read_all_group_messages: false``): a command addressed to no bot or to this one
        (``/demo``, ``/demo@this_bot``; the emulator's groups have no other bot that could have
        spoken last), or a reply to one of the bot's messages. Not other text, nor ``/demo@other_bot``.
        """
        command = GROUP_COMMAND.match(message.get("text") or message.get("caption") or "")
        if command is not None and (command[1] is None or command[1].lower() == self.user["username"].lower()):
            return True
        return message.get("reply_to_message", {}).get("from", {}).get("id") == self.id

    def inject_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Any update, as a test built it (e.g. python-telegram-bot objects' ``to_dict()``), queued as is.

        The chats, messages and callback query in it become known, so the bot can answer
        them, as it can in Telegram. The ``update_id`` is the emulator's. Returns the update.
        """
        update = {**update, "update_id": next(self._update_ids)}
        if isinstance(query := update.get("callback_query"), dict):
            self._callback_queries[str(query.get("id"))] = query
        for payload in update.values():
            if isinstance(payload, dict):
                for message in (payload, payload.get("message")):
                    if isinstance(message, dict) and "message_id" in message and "chat" in message:
                        if isinstance(quoted := message.get("reply_to_message"), dict) and "message_id" in quoted:
                            self._know(quoted, quoted=True)
                        self._know(message)
        self.updates.append(update)
        self.emulator.changed()
        return update

    def _know(self, message: dict[str, Any], *, quoted: bool = False) -> None:
        """Makes a test-built message known. Telegram numbers a chat's messages, so one never takes the
        id of a message the bot sent (a test's ids may be drawn at random): a ``quoted`` one (a reply's
        copy) leaves the bot's in place, any other gets the chat's next id."""
        chat_id = message["chat"]["id"]
        self._chats.setdefault(chat_id, message["chat"])
        held = self._messages.get((chat_id, message["message_id"]))
        if held is not None and held.get("from", {}).get("id") == self.id and held is not message:
            if quoted:
                return
            message["message_id"] = self._last_message_id[chat_id] + 1
        self._messages[(chat_id, message["message_id"])] = message
        self._last_message_id[chat_id] = max(self._last_message_id.get(chat_id, 0), message["message_id"])

    def inject_web_app_data(self, user_id: int, data: str, button_text: str) -> dict[str, Any]:
        """The Mini App opened by the chat's keyboard button ``button_text`` sent ``data``
        (``web_app_data_send``): a ``web_app_data`` message from the user. Returns the Message."""
        return self._from_user(user_id, {"web_app_data": keyboards.web_app_data(
            self.keyboards.get(user_id), data, button_text)}, None)

    def inject_callback_query(self, user_id: int, message_id: int, data: str, *,
                              presser: int | None = None) -> dict[str, Any]:
        """The user presses the inline button with ``callback_data == data``. Returns the CallbackQuery.

        ``presser``: someone else presses the button under a message of ``user_id``'s chat (as in a
        group, where everyone sees every button: pass the group's id as ``user_id``, and the presser).
        """
        message = self._messages.get((user_id, message_id))
        if message is None:
            raise LookupError(f"no message {message_id} in chat {user_id}")
        rows = message.get("reply_markup", {}).get("inline_keyboard", [])
        if data not in (button.get("callback_data") for button in itertools.chain.from_iterable(rows)):
            raise ValueError(f"message {message_id} has no button with callback_data {data!r}")
        query = {"id": str(next(self._query_ids)), "from": self.emulator.user(presser or user_id), "message": message,
                 "chat_instance": str(abs(hash((self.id, user_id)))), "data": data}
        self._callback_queries[query["id"]] = query
        self._add_update("callback_query", query)
        return query

    def block(self, user_id: int, blocked: bool = True) -> None:
        """The user blocks (or unblocks) the bot: sending to them fails with 403."""
        (self._blocked.add if blocked else self._blocked.discard)(user_id)

    def history(self, chat_id: int) -> list[dict[str, Any]]:
        """The chat's messages as the user sees them now: edits applied, deleted ones gone."""
        return [message for (chat, _), message in self._messages.items() if chat == chat_id]

    def command_menu(self, user_id: int, language_code: str = "") -> list[dict[str, str]]:
        """The commands a Telegram client lists for a private chat with ``user_id``.

        The most specific list set wins: this chat, all private chats, default; at each
        scope the user's language before no language.
        """
        scopes = ({"type": "chat", "chat_id": user_id}, {"type": "all_private_chats"}, {"type": "default"})
        for scope in scopes:
            for language in dict.fromkeys((language_code, "")):
                if listed := self.commands.get((json.dumps(scope, sort_keys=True), language)):
                    return listed
        return []

    def file_bytes(self, file_id: str) -> bytes:
        return self.files[file_id].data

    def fail(self, method: str, *, times: int = 1, status: int = 429, retry_after: int | None = None,
             description: str | None = None) -> None:
        """The next ``times`` calls of ``method`` answer ``status`` (429 carries retry_after, 1 s by default)."""
        self._faults.append(_Fault(method.lower(), times, fault_error(status, retry_after, description)))

    def enforce_limits(self, on: bool = True) -> None:
        """From now on (or no longer), a message past Telegram's flood limits is answered 429 with
        ``retry_after``, as Telegram does (``limits``); off by default, and counting starts afresh."""
        self.flood_limits = FloodLimits() if on else None

    def hang(self, method: str, *, times: int = 1, perform: bool = False) -> None:
        """The next ``times`` calls of ``method`` get no answer until the client gives up.

        With ``perform`` the call still takes effect (the message is sent), as when
        Telegram acted on a request whose answer was lost.
        """
        self._faults.append(_Fault(method.lower(), times, None, perform))

    def outage(self, seconds: float, *, hang: bool = False) -> None:
        """For ``seconds`` from now, every call that acts in a chat (send, edit, delete) answers 502
        Bad Gateway, or (``hang``) gets no answer until the client gives up, and does nothing: Telegram
        down for a while. getUpdates and the other reads still answer."""
        self._outage = (time.monotonic() + seconds, hang)

    def hold(self, method: str, *, times: int = 1) -> asyncio.Event:
        """The next ``times`` calls of ``method`` wait until the returned event is set, then are
        answered as usual: a request on its way to a slow Telegram."""
        released = asyncio.Event()
        self._faults.append(_Fault(method.lower(), times, None, released=released))
        return released

    async def wait_for_call(self, method: str, *, where: Callable[[Call], bool] = lambda call: True,
                            timeout: float = 5.0) -> Call:
        """The first successful outbound call of ``method`` that satisfies ``where``, waiting for it."""
        return await self.emulator.wait_for(
            lambda: next((c for c in self.outbox if c.method.lower() == method.lower() and where(c)), None),
            timeout)

    # --- requests ---------------------------------------------------------------

    async def handle(self, method_name: str, args: dict[str, str], files: dict[str, Upload]) -> Call:
        """Runs one request, recording it as a Call; the Call says how to answer."""
        method = METHODS.get(method_name.lower())
        call = Call(method.name if method else method_name, decode_params(args), files,
                    outbound=bool(method and method.outbound))
        self.calls.append(call)
        self.emulator.changed()
        down = bool(method and method.outbound and self._outage and time.monotonic() < self._outage[0])
        fault = None if down else self._take_fault(method_name.lower())  # a fault waits for the outage's end
        try:
            if down:
                if self._outage[1]:
                    await self._hang()
                raise fault_error(502, None, None)
            if fault and fault.released is not None:
                await fault.released.wait()
                fault = None
            if fault and fault.error:
                raise fault.error
            if self.flood_limits and (flooded := self.flood_limits.admit(call.method, call.params, call.received_at)):
                raise flooded
            if method is None:
                raise ApiError(404, "Not Found")
            if fault and not fault.perform:
                await self._hang()
            result = await method.handler(self, call)
            if fault:  # performed, but the answer is lost
                await self._hang()
            call.status, call.result = 200, result
        except ApiError as error:
            call.status, call.failure = error.status, error
        finally:
            self.emulator.changed()
        return call

    def _take_fault(self, method: str) -> _Fault | None:
        for fault in self._faults:
            if fault.method == method and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    async def _hang(self) -> None:
        """Never answers: the client times out and drops the connection, which cancels this wait."""
        await self.emulator.wait_for(lambda: self.emulator.closing, timeout=None)
        raise fault_error(502, None, None)

    def file_at(self, path: str) -> StoredFile | None:
        return self._paths.get(path)

    # --- chats and messages -------------------------------------------------------

    def _from_user(self, user_id: int, content: dict[str, Any], reply_to: int | None) -> dict[str, Any]:
        user = self.emulator.user(user_id)
        self._blocked.discard(user_id)  # writing to the bot again means the user unblocked it
        chat = self._chats.setdefault(user_id, {"id": user_id, "type": "private", **{
            key: user[key] for key in ("first_name", "last_name", "username") if key in user}})
        target = None
        if reply_to is not None:
            target = self._messages.get((user_id, reply_to))
            if target is None:
                raise LookupError(f"no message {reply_to} in chat {user_id}")
        message = self._post(chat, user, content, target)
        self._add_update("message", message)
        return message

    def _in_group(self, group_id: int, user_id: int, content: dict[str, Any], reply_to: int | None, kind: str,
                  title: str) -> dict[str, Any]:
        if kind not in ("group", "supergroup"):
            raise ValueError(f"a group is a group or a supergroup, not {kind!r}")
        chat = self._group_chat(group_id, kind, title)
        target = None
        if reply_to is not None:
            target = self._messages.get((group_id, reply_to))
            if target is None:
                raise LookupError(f"no message {reply_to} in chat {group_id}")
        message = self._post(chat, self.emulator.user(user_id), content, target)
        if self.sees_in_group(message):
            self._add_update("message", message)
        return message

    def _group_chat(self, chat_id: int, kind: str, title: str) -> dict[str, Any]:
        if chat_id >= 0:
            raise ValueError(f"group and channel ids are negative, not {chat_id}")
        return self._chats.setdefault(chat_id, {"id": chat_id, "type": kind, "title": title})

    def _add_update(self, kind: str, payload: dict[str, Any]) -> None:
        if self.allowed_updates and kind not in self.allowed_updates:
            return
        self.updates.append({"update_id": next(self._update_ids), kind: payload})
        self.emulator.changed()

    def _known_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise bad_request("chat_id is empty")
        chat = self._chats.get(chat_id) if isinstance(chat_id, int) else None
        if chat is None:
            raise bad_request("chat not found")
        return chat

    def _chat(self, params: dict[str, Any]) -> dict[str, Any]:
        """The chat to act in: known, and the bot not blocked there."""
        chat = self._known_chat(params)
        if chat["id"] in self._blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        return chat

    def _reply_target(self, chat: dict[str, Any], params: dict[str, Any]) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        if reply is None and "reply_to_message_id" in params:
            reply = {"message_id": params["reply_to_message_id"],
                     "allow_sending_without_reply": params.get("allow_sending_without_reply", False)}
        if reply is None:
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("message_id"), int):
            raise bad_request("can't parse reply parameters JSON object")
        target = self._messages.get((reply.get("chat_id", chat["id"]), reply["message_id"]))
        if target is None and not reply.get("allow_sending_without_reply"):
            raise bad_request("message to be replied not found")
        return target

    def _post(self, chat: dict[str, Any], sender: dict[str, Any] | None, content: dict[str, Any],
              reply_to: dict[str, Any] | None = None, markup: dict[str, Any] | None = None) -> dict[str, Any]:
        """``sender`` None: a channel post, which has no ``from``."""
        message_id = self._last_message_id[chat["id"]] = self._last_message_id.get(chat["id"], 0) + 1
        message = {"message_id": message_id, **({"from": sender} if sender else {}), "chat": chat,
                   "date": int(time.time())}
        if reply_to is not None:
            # Telegram does not nest replies: the replied-to message loses its own reply_to_message.
            message["reply_to_message"] = {k: v for k, v in reply_to.items() if k != "reply_to_message"}
        message.update(content)
        if markup:
            message["reply_markup"] = markup
        self._messages[(chat["id"], message_id)] = message
        return message

    def _editable(self, params: dict[str, Any]) -> dict[str, Any]:
        if "inline_message_id" in params:
            raise bad_request("MESSAGE_ID_INVALID")
        chat = self._chat(params)
        if not isinstance(params.get("message_id"), int):
            raise bad_request("message identifier is not specified")
        message = self._messages.get((chat["id"], params["message_id"]))
        if message is None:
            raise bad_request("message to edit not found")
        if message.get("from", {}).get("id") != self.id:
            raise bad_request("message can't be edited")
        return message

    def _edit(self, message: dict[str, Any], content: dict[str, Any], fields: tuple[str, ...],
              markup: dict[str, Any] | None) -> dict[str, Any]:
        """Replaces ``fields`` and the inline keyboard (dropped when not given, as Telegram does).

        An album's message keeps none: clients cannot show one, so Telegram ignores it (an
        editMessageReplyMarkup of one is "not modified").
        """
        if "media_group_id" in message:
            markup = None
        edited = {k: v for k, v in message.items() if k not in fields and k not in ("reply_markup", "edit_date")}
        edited.update(content)
        if markup:
            edited["reply_markup"] = markup
        if all(edited.get(key) == message.get(key) for key in (*fields, "reply_markup")):
            raise bad_request(NOT_MODIFIED)
        edited["edit_date"] = int(time.time())
        self._messages[(message["chat"]["id"], message["message_id"])] = edited
        return edited

    # --- files ------------------------------------------------------------------

    def _new_file(self, kind: str, data: bytes, extension: str, content: Any, file_id: str, unique_id: str) -> None:
        path = f"{kind}s/file_{next(self._file_numbers)}.{extension}"
        stored = StoredFile(file_id, unique_id, kind, data, path, content)
        self.files[file_id] = self._paths[path] = stored

    def _ids(self, kind: str, data: bytes) -> tuple[str, str]:
        """A file_id (this bot's, unique per upload) and file_unique_id (same bytes, same id)."""
        random_part = base64.urlsafe_b64encode(secrets.token_bytes(24)).decode()
        unique = base64.urlsafe_b64encode(hashlib.sha256(data).digest()[:12]).decode()
        return _FILE_ID_PREFIX[kind] + random_part, "AQAD" + unique

    def _store_photo(self, data: bytes) -> list[dict[str, Any]]:
        sizes, pending = [], []
        for width, height, jpeg in media.photo_sizes(data):
            file_id, unique_id = self._ids("photo", jpeg)
            sizes.append({"file_id": file_id, "file_unique_id": unique_id, "file_size": len(jpeg),
                          "width": width, "height": height})
            pending.append((jpeg, file_id, unique_id))
        for jpeg, file_id, unique_id in pending:
            self._new_file("photo", jpeg, "jpg", sizes, file_id, unique_id)
        return sizes

    def _store_file(self, kind: str, upload: Upload, params: dict[str, Any]) -> dict[str, Any]:
        mime = media.mime_type(upload.filename, upload.content_type)
        file_id, unique_id = self._ids(kind, upload.data)
        content: dict[str, Any] = {"file_id": file_id, "file_unique_id": unique_id}
        if kind in ("video", "animation"):
            width, height, duration = media.video_info(upload.data)
            content.update(width=_int(params, "width") or width, height=_int(params, "height") or height,
                           duration=_int(params, "duration") or duration)
        content.update(file_name=upload.filename, mime_type=mime, file_size=len(upload.data))
        self._new_file(kind, upload.data, media.extension(upload.filename, mime), content, file_id, unique_id)
        return content

    def _source(self, call: Call, kind: str, ref: Any, part: str | None, missing: str) -> Upload | StoredFile:
        """Resolves a file parameter: a file_id of this bot, an ``attach://`` part, or the part named ``part``."""
        if isinstance(ref, str) and ref.startswith("attach://"):
            part = ref[len("attach://"):]
        elif ref:
            if not isinstance(ref, str):
                raise bad_request("wrong file identifier/HTTP URL specified")
            if ref.startswith(("http://", "https://")):
                raise bad_request("failed to get HTTP URL content")
            if self.emulator.local and ref.startswith(("file://", "/")):
                return _local_upload(ref)
            stored = self.files.get(ref)
            if stored is None:
                raise bad_request("wrong file identifier/HTTP URL specified")
            if stored.kind != kind:
                raise bad_request(f"can't use file of type {stored.kind.title()} as {kind.title()}")
            return stored
        upload = call.files.get(part) if part else None
        if upload is None:
            raise bad_request(missing)
        if not upload.data:
            raise bad_request("file must be non-empty")
        if len(upload.data) > self.emulator.max_upload:  # Telegram's front end refuses the whole request
            raise ApiError(413, "Request Entity Too Large")
        return upload

    def _media_content(self, kind: str, source: Upload | StoredFile, params: dict[str, Any]) -> dict[str, Any]:
        if isinstance(source, StoredFile):
            stored = source.content
        elif kind == "photo":
            stored = self._store_photo(source.data)
        else:
            stored = self._store_file(kind, source, params)
        content = {kind: stored}
        if kind == "animation":
            content["document"] = stored  # the Bot API sets both, for backward compatibility
        if kind != "document" and params.get("has_spoiler"):
            content["has_media_spoiler"] = True
        return content

    async def _send_media(self, call: Call, kind: str) -> dict[str, Any]:
        params = call.params
        chat = self._chat(params)
        caption = _caption(params)
        reply_to, markup = self._reply_target(chat, params), _markup(params)
        source = self._source(call, kind, params.get(kind), kind, f"there is no {kind} in the request")
        return self._post(chat, self._sender, {**self._media_content(kind, source, params), **caption},
                          reply_to, markup)

    # --- updates and webhooks ---------------------------------------------------

    def _terminate_poll(self, conflict: str) -> None:
        """Ends a waiting getUpdates with 409 ``conflict``."""
        self._poll_generation += 1
        self._poll_conflict = conflict
        self.emulator.changed()

    def _start_delivery(self) -> None:
        if self._delivery is None or self._delivery.done():
            self._delivery = asyncio.create_task(self._deliver(), name=f"botapi-webhook-{self.id}")

    async def stop_delivery(self) -> None:
        if self._delivery is not None:
            self._delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivery

    async def _deliver(self) -> None:
        """POSTs pending updates to the webhook in order; a failed one is retried with a growing delay."""
        delay = WEBHOOK_FIRST_RETRY
        async with aiohttp.ClientSession() as session:
            while (hook := self.webhook) is not None:
                await self.emulator.wait_for(lambda hook=hook: self.webhook is not hook or self.updates, timeout=None)
                if self.webhook is not hook:
                    continue
                update = self.updates[0]
                error, retry_after = await self._post_update(session, hook, update)
                if error is None:
                    if self.updates and self.updates[0] is update:
                        self.updates.pop(0)
                    self.emulator.changed()
                    delay = WEBHOOK_FIRST_RETRY
                    continue
                hook.last_error_date, hook.last_error_message = int(time.time()), error
                self.emulator.changed()
                with contextlib.suppress(TimeoutError):
                    await self.emulator.wait_for(lambda hook=hook: self.webhook is not hook, retry_after or delay)
                delay = min(delay * 2, WEBHOOK_MAX_RETRY)

    @staticmethod
    async def _post_update(session: aiohttp.ClientSession, hook: Webhook,
                           update: dict[str, Any]) -> tuple[str | None, float | None]:
        headers = {"X-Telegram-Bot-Api-Secret-Token": hook.secret_token} if hook.secret_token else {}
        try:
            async with session.post(hook.url, json=update, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=60)) as response:
                if 200 <= response.status <= 299:
                    return None, None
                retry_after = response.headers.get("Retry-After", "")
                return (f"Wrong response from the webhook: {response.status} {response.reason}",
                        float(retry_after) if retry_after.isdigit() else None)
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            return f"Connection failed: {error or type(error).__name__}", None


# --- Bot API methods ----------------------------------------------------------------

@_method("getMe")
async def _get_me(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return bot.user


@_method("getUpdates")
async def _get_updates(bot: EmulatedBot, call: Call) -> list[dict[str, Any]]:
    if bot.webhook is not None:
        raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active; "
                            "use deleteWebhook to delete the webhook first")
    params = call.params
    offset = _int(params, "offset")
    limit = _clamp(_int(params, "limit", 100), 1, 100)
    timeout = _clamp(_int(params, "timeout"), 0, LONG_POLL_MAX)
    if isinstance(params.get("allowed_updates"), list):
        bot.allowed_updates = params["allowed_updates"]
    bot._terminate_poll("Conflict: terminated by other getUpdates request; "
                        "make sure that only one bot instance is running")
    if offset < 0:
        del bot.updates[:max(0, len(bot.updates) + offset)]
    elif offset > 0:
        bot.updates[:] = [update for update in bot.updates if update["update_id"] >= offset]
    if not bot.updates and timeout:
        generation = bot._poll_generation
        with contextlib.suppress(TimeoutError):
            await bot.emulator.wait_for(
                lambda: bot.updates or bot._poll_generation != generation or bot.emulator.closing, timeout)
        if bot._poll_generation != generation:
            raise ApiError(409, bot._poll_conflict)
    return bot.updates[:limit]


@_method("setWebhook")
async def _set_webhook(bot: EmulatedBot, call: Call) -> bool:
    """Like Telegram's, but any http(s) URL on any port is accepted, since tests listen on 127.0.0.1."""
    params = call.params
    url = params.get("url") or ""
    if not url:
        return await _delete_webhook(bot, call)
    parts = urlsplit(str(url))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad_request("invalid webhook URL specified")
    secret = str(params.get("secret_token", ""))
    if len(secret) > 256:
        raise bad_request("secret token is too long")
    if not re.fullmatch(r"[A-Za-z0-9_-]*", secret):
        raise bad_request("secret token contains unallowed characters")
    hook = Webhook(str(url), secret, _clamp(_int(params, "max_connections", 40), 1, 100))
    if isinstance(params.get("allowed_updates"), list):
        bot.allowed_updates = params["allowed_updates"]
    current = bot.webhook
    if (current and (current.url, current.secret_token, current.max_connections) == (hook.url, secret,
                                                                                     hook.max_connections)
            and not params.get("drop_pending_updates")):
        call.note = "Webhook is already set"
        return True
    if params.get("drop_pending_updates"):
        bot.updates.clear()
    bot._terminate_poll("Conflict: terminated by setWebhook request")
    bot.webhook = hook
    bot._start_delivery()
    call.note = "Webhook was set"
    return True


@_method("deleteWebhook")
async def _delete_webhook(bot: EmulatedBot, call: Call) -> bool:
    if call.params.get("drop_pending_updates"):
        bot.updates.clear()
    call.note = "Webhook was deleted" if bot.webhook else "Webhook is already deleted"
    bot.webhook = None
    bot.emulator.changed()
    return True


@_method("getWebhookInfo")
async def _get_webhook_info(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    hook = bot.webhook
    info: dict[str, Any] = {"url": hook.url if hook else "", "has_custom_certificate": False,
                            "pending_update_count": len(bot.updates)}
    if hook:
        if hook.last_error_date:
            info.update(last_error_date=hook.last_error_date, last_error_message=hook.last_error_message)
        info.update(max_connections=hook.max_connections, ip_address="127.0.0.1")
    if bot.allowed_updates:
        info["allowed_updates"] = bot.allowed_updates
    return info


@_method("getChat")
async def _get_chat(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    """A ChatFullInfo of a chat the bot knows (it sends nothing, so a blocked bot may still ask)."""
    chat = bot._known_chat(call.params)
    gifts = chat["type"] == "private"
    return {**chat, "accent_color_id": abs(chat["id"]) % 7, "max_reaction_count": 11,
            "accepted_gift_types": {"unlimited_gifts": gifts, "limited_gifts": gifts, "unique_gifts": gifts,
                                    "premium_subscription": gifts, "gifts_from_channels": gifts}}


@_method("sendMessage", outbound=True)
async def _send_message(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    params = call.params
    chat = bot._chat(params)
    content = _text(params)
    markup = params.get("reply_markup")
    shown = isinstance(markup, dict) and ("keyboard" in markup or "remove_keyboard" in markup)
    keyboard = keyboards.check(markup, chat["type"]) if shown else None
    message = bot._post(chat, bot._sender, content, bot._reply_target(chat, params), _markup(params))
    if shown:
        bot.keyboards[chat["id"]] = keyboard
    return message


@_method("sendPhoto", outbound=True)
async def _send_photo(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await bot._send_media(call, "photo")


@_method("sendDocument", outbound=True)
async def _send_document(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await bot._send_media(call, "document")


@_method("sendVideo", outbound=True)
async def _send_video(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await bot._send_media(call, "video")


@_method("sendAnimation", outbound=True)
async def _send_animation(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return await bot._send_media(call, "animation")


@_method("sendMediaGroup", outbound=True)
async def _send_media_group(bot: EmulatedBot, call: Call) -> list[dict[str, Any]]:
    """An album: each item a message sharing one media_group_id (a single item is a plain message)."""
    params = call.params
    chat = bot._chat(params)
    items = params.get("media")
    if items is None:
        raise bad_request('parameter "media" is required')
    if isinstance(items, str):
        raise bad_request("can't parse media JSON object")
    if not isinstance(items, list):
        raise bad_request("expected an Array of InputMedia")
    if not items:
        raise bad_request("there are no messages to send")
    if len(items) > 10:
        raise bad_request("too many messages to send as an album")
    reply_to = bot._reply_target(chat, params)
    album = []
    for item in items:
        if not isinstance(item, dict):
            raise bad_request("can't parse InputMedia: expected an Object")
        kind = item.get("type")
        if kind == "animation":
            raise bad_request('can\'t parse InputMedia: type "animation" can\'t be used in sendMediaGroup')
        if kind not in ("photo", "video", "document"):
            raise bad_request(f'can\'t parse InputMedia: type "{kind}" is unsupported')
        source = bot._source(call, kind, item.get("media"), None, "can't parse InputMedia: media not found")
        album.append((kind, source, item, _caption(item)))
    kinds = {kind for kind, *_ in album}
    if "document" in kinds and len(kinds) > 1:
        raise bad_request("document can't be mixed with other media types")
    group = {"media_group_id": str(next(bot._album_ids))} if len(album) > 1 else {}
    return [bot._post(chat, bot._sender, {**group, **bot._media_content(kind, source, item), **caption}, reply_to)
            for kind, source, item, caption in album]


@_method("editMessageText", outbound=True)
async def _edit_message_text(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    message = bot._editable(call.params)
    if "text" not in message:
        raise bad_request("there is no text in the message to edit")
    return bot._edit(message, _text(call.params), ("text", "entities"), _markup(call.params))


@_method("editMessageCaption", outbound=True)
async def _edit_message_caption(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    message = bot._editable(call.params)
    if "text" in message:
        raise bad_request("there is no caption in the message to edit")
    return bot._edit(message, _caption(call.params), ("caption", "caption_entities"), _markup(call.params))


MEDIA_KINDS = ("photo", "video", "animation", "document")


@_method("editMessageMedia", outbound=True)
async def _edit_message_media(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    """Replaces the photo/video/animation/document of a media message, and its caption with the new media's."""
    message = bot._editable(call.params)
    if not any(kind in message for kind in MEDIA_KINDS):
        raise bad_request("there is no media in the message to edit")
    item = call.params.get("media")
    if not isinstance(item, dict):
        raise bad_request("can't parse InputMedia JSON object")
    kind = item.get("type")
    if kind not in MEDIA_KINDS:
        raise bad_request(f'can\'t parse InputMedia: type "{kind}" is unsupported')
    if "media_group_id" in message and ("document" in message) != (kind == "document"):
        raise bad_request("document can't be mixed with other media types")
    source = bot._source(call, kind, item.get("media"), None, "can't parse InputMedia: media not found")
    content = {**bot._media_content(kind, source, item), **_caption(item)}
    return bot._edit(message, content, (*MEDIA_KINDS, "caption", "caption_entities", "has_media_spoiler"),
                     _markup(call.params))


@_method("editMessageReplyMarkup", outbound=True)
async def _edit_message_reply_markup(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    return bot._edit(bot._editable(call.params), {}, (), _markup(call.params))


@_method("deleteMessage", outbound=True)
async def _delete_message(bot: EmulatedBot, call: Call) -> bool:
    chat = bot._chat(call.params)
    message_id = call.params.get("message_id")
    if not isinstance(message_id, int):
        raise bad_request("message identifier is not specified")
    if bot._messages.pop((chat["id"], message_id), None) is None:
        raise bad_request("message to delete not found")
    return True


@_method("answerCallbackQuery", outbound=True)
async def _answer_callback_query(bot: EmulatedBot, call: Call) -> bool:
    if bot._callback_queries.pop(str(call.params.get("callback_query_id", "")), None) is None:
        raise bad_request("query is too old and response timeout expired or query ID is invalid")
    return True


@_method("sendChatAction", outbound=True)
async def _send_chat_action(bot: EmulatedBot, call: Call) -> bool:
    bot._chat(call.params)
    if call.params.get("action") not in CHAT_ACTIONS:
        raise bad_request("wrong parameter action in request")
    return True


def _commands_key(params: dict[str, Any]) -> tuple[str, str]:
    scope = params.get("scope") or {"type": "default"}
    if not isinstance(scope, dict) or not isinstance(scope.get("type"), str):
        raise bad_request("can't parse BotCommandScope JSON object")
    return json.dumps(scope, sort_keys=True), str(params.get("language_code", ""))


@_method("setMyCommands")
async def _set_my_commands(bot: EmulatedBot, call: Call) -> bool:
    commands = call.params.get("commands")
    if commands is None:
        raise bad_request('parameter "commands" is required')
    if not isinstance(commands, list):
        raise bad_request("can't parse commands JSON object")
    for command in commands:
        if not isinstance(command, dict):
            raise bad_request("can't parse BotCommand: expected an Object")
        if not re.fullmatch(r"[a-z0-9_]{1,32}", str(command.get("command", ""))):
            raise bad_request("BOT_COMMAND_INVALID")
        if not 1 <= len(str(command.get("description", "")).strip()) <= 256:
            raise bad_request("BOT_COMMAND_DESCRIPTION_INVALID")
    key = _commands_key(call.params)
    if commands:
        bot.commands[key] = [{"command": c["command"], "description": c["description"]} for c in commands]
    else:
        bot.commands.pop(key, None)
    return True


@_method("getMyCommands")
async def _get_my_commands(bot: EmulatedBot, call: Call) -> list[dict[str, str]]:
    return bot.commands.get(_commands_key(call.params), [])


@_method("deleteMyCommands")
async def _delete_my_commands(bot: EmulatedBot, call: Call) -> bool:
    bot.commands.pop(_commands_key(call.params), None)
    return True


@_method("getFile")
async def _get_file(bot: EmulatedBot, call: Call) -> dict[str, Any]:
    file_id = call.params.get("file_id")
    if not file_id:
        raise bad_request("file_id not specified")
    stored = bot.files.get(str(file_id))
    if stored is None:
        raise bad_request("invalid file_id")
    if len(stored.data) > MAX_DOWNLOAD and not bot.emulator.local:
        raise bad_request("file is too big")
    return {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "file_size": len(stored.data),
            "file_path": bot.emulator.local_path(bot, stored) if bot.emulator.local else stored.file_path}
