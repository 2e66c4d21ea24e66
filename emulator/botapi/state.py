"""What one emulated bot holds, and the operations on it that the Bot API methods and the test
harness share: chats and their messages (``post``, ``edit``), updates not yet fetched, stored
files (``source``, ``media_content``), and every call the bot made.

A user must have written to the bot before it can send them anything ("chat not found"), as in
Telegram. In a group the bot sees only what privacy mode lets it see (``sees_in_group``).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import itertools
import json
import re
import secrets
import time
from typing import TYPE_CHECKING, Any

from . import media
from .params import integer, local_upload
from .wire import ApiError, Upload, bad_request

if TYPE_CHECKING:
    from .calls import Call
    from .delivery import Webhook
    from .server import BotApiEmulator

NOT_MODIFIED = ("message is not modified: specified new message content and reply markup are exactly the same "
                "as a current content and reply markup of the message")


_FILE_ID_PREFIX = {"photo": "AgAC", "document": "BQAC", "video": "BAAC", "animation": "CgAC", "sticker": "CAAC"}


GROUP_COMMAND = re.compile(r"^/[A-Za-z0-9_]{1,32}(?:@([A-Za-z0-9_]{1,64}))?(?![A-Za-z0-9_@])")
"""A command at the start of a group message, and the bot it is addressed to, if any."""


@dataclasses.dataclass(frozen=True)
class StoredFile:
    """A file the bot or a user sent, as getFile and downloads give it back."""

    file_id: str
    file_unique_id: str
    kind: str
    data: bytes
    file_path: str
    content: Any
    """What a Message carries for it: the PhotoSize list, or the Document/Video/Animation object."""


class BotState:
    """A bot account's chats, messages, updates, files and calls (``EmulatedBot`` adds the rest)."""

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
        self.sender = {key: user[key] for key in ("id", "is_bot", "first_name", "username")}
        """The bot as the ``from`` of its messages."""
        self.chats: dict[int, dict[str, Any]] = {}
        self._blocked: set[int] = set()
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._last_message_id: dict[int, int] = {}
        self._paths: dict[str, StoredFile] = {}
        self.callback_queries: dict[str, dict[str, Any]] = {}
        self.inline_queries: dict[str, dict[str, Any]] = {}
        """Inline queries by id: ``{"query": InlineQuery, "answer": None until answered}`` (``inline``)."""
        self._update_ids = itertools.count(1)
        self._file_numbers = itertools.count(1)
        self.album_ids = itertools.count(1)

    @property
    def id(self) -> int:
        return self.user["id"]

    @property
    def outbox(self) -> list[Call]:
        """Successful calls that acted in a chat, oldest first: what users saw the bot do."""
        return [call for call in self.calls if call.outbound and call.ok]

    def history(self, chat_id: int) -> list[dict[str, Any]]:
        """The chat's messages as the user sees them now: edits applied, deleted ones gone."""
        return [message for (chat, _), message in self.messages.items() if chat == chat_id]

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

    def file_at(self, path: str) -> StoredFile | None:
        return self._paths.get(path)

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

    def _know(self, message: dict[str, Any], *, quoted: bool = False) -> None:
        """Makes a test-built message known. Telegram numbers a chat's messages, so one never takes the
        id of a message the bot sent (a test's ids may be drawn at random): a ``quoted`` one (a reply's
        copy) leaves the bot's in place, any other gets the chat's next id."""
        chat_id = message["chat"]["id"]
        self.chats.setdefault(chat_id, message["chat"])
        held = self.messages.get((chat_id, message["message_id"]))
        if held is not None and held.get("from", {}).get("id") == self.id and held is not message:
            if quoted:
                return
            message["message_id"] = self._last_message_id[chat_id] + 1
        self.messages[(chat_id, message["message_id"])] = message
        self._last_message_id[chat_id] = max(self._last_message_id.get(chat_id, 0), message["message_id"])

    def _from_user(self, user_id: int, content: dict[str, Any], reply_to: int | None) -> dict[str, Any]:
        user = self.emulator.user(user_id)
        self._blocked.discard(user_id)  # writing to the bot again means the user unblocked it
        chat = self.private_chat(user)
        target = None
        if reply_to is not None:
            target = self.messages.get((user_id, reply_to))
            if target is None:
                raise LookupError(f"no message {reply_to} in chat {user_id}")
        message = self.post(chat, user, content, target)
        self.add_update("message", message)
        return message

    def _in_group(self, group_id: int, user_id: int, content: dict[str, Any], reply_to: int | None, kind: str,
                  title: str) -> dict[str, Any]:
        if kind not in ("group", "supergroup"):
            raise ValueError(f"a group is a group or a supergroup, not {kind!r}")
        chat = self.group_chat(group_id, kind, title)
        target = None
        if reply_to is not None:
            target = self.messages.get((group_id, reply_to))
            if target is None:
                raise LookupError(f"no message {reply_to} in chat {group_id}")
        message = self.post(chat, self.emulator.user(user_id), content, target)
        if self.sees_in_group(message):
            self.add_update("message", message)
        return message

    def private_chat(self, user: dict[str, Any]) -> dict[str, Any]:
        """The private chat with ``user``, known from now on."""
        return self.chats.setdefault(user["id"], {"id": user["id"], "type": "private", **{
            key: user[key] for key in ("first_name", "last_name", "username") if key in user}})

    def group_chat(self, chat_id: int, kind: str, title: str) -> dict[str, Any]:
        if chat_id >= 0:
            raise ValueError(f"group and channel ids are negative, not {chat_id}")
        return self.chats.setdefault(chat_id, {"id": chat_id, "type": kind, "title": title})

    def add_update(self, kind: str, payload: dict[str, Any]) -> None:
        if self.allowed_updates and kind not in self.allowed_updates:
            return
        self.updates.append({"update_id": next(self._update_ids), kind: payload})
        self.emulator.changed()

    def known_chat(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = params.get("chat_id")
        if chat_id is None or chat_id == "":
            raise bad_request("chat_id is empty")
        chat = self.chats.get(chat_id) if isinstance(chat_id, int) else None
        if chat is None:
            raise bad_request("chat not found")
        return chat

    def chat(self, params: dict[str, Any]) -> dict[str, Any]:
        """The chat to act in: known, and the bot not blocked there."""
        chat = self.known_chat(params)
        if chat["id"] in self._blocked:
            raise ApiError(403, "Forbidden: bot was blocked by the user")
        return chat

    def reply_target(self, chat: dict[str, Any], params: dict[str, Any]) -> dict[str, Any] | None:
        reply = params.get("reply_parameters")
        if reply is None and "reply_to_message_id" in params:
            reply = {"message_id": params["reply_to_message_id"],
                     "allow_sending_without_reply": params.get("allow_sending_without_reply", False)}
        if reply is None:
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("message_id"), int):
            raise bad_request("can't parse reply parameters JSON object")
        target = self.messages.get((reply.get("chat_id", chat["id"]), reply["message_id"]))
        if target is None and not reply.get("allow_sending_without_reply"):
            raise bad_request("message to be replied not found")
        return target

    def post(self, chat: dict[str, Any], sender: dict[str, Any] | None, content: dict[str, Any],
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
        self.messages[(chat["id"], message_id)] = message
        return message

    def editable(self, params: dict[str, Any]) -> dict[str, Any]:
        if "inline_message_id" in params:
            raise bad_request("MESSAGE_ID_INVALID")
        chat = self.chat(params)
        if not isinstance(params.get("message_id"), int):
            raise bad_request("message identifier is not specified")
        message = self.messages.get((chat["id"], params["message_id"]))
        if message is None:
            raise bad_request("message to edit not found")
        if message.get("from", {}).get("id") != self.id:
            raise bad_request("message can't be edited")
        return message

    def edit(self, message: dict[str, Any], content: dict[str, Any], fields: tuple[str, ...],
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
        self.messages[(message["chat"]["id"], message["message_id"])] = edited
        return edited

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
            content.update(width=integer(params, "width") or width, height=integer(params, "height") or height,
                           duration=integer(params, "duration") or duration)
        content.update(file_name=upload.filename, mime_type=mime, file_size=len(upload.data))
        self._new_file(kind, upload.data, media.extension(upload.filename, mime), content, file_id, unique_id)
        return content

    def source(self, call: Call, kind: str, ref: Any, part: str | None, missing: str) -> Upload | StoredFile:
        """Resolves a file parameter: a file_id of this bot, an ``attach://`` part, or the part named ``part``."""
        if isinstance(ref, str) and ref.startswith("attach://"):
            part = ref[len("attach://"):]
        elif ref:
            if not isinstance(ref, str):
                raise bad_request("wrong file identifier/HTTP URL specified")
            if ref.startswith(("http://", "https://")):
                raise bad_request("failed to get HTTP URL content")
            if self.emulator.local and ref.startswith(("file://", "/")):
                return local_upload(ref)
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

    def media_content(self, kind: str, source: Upload | StoredFile, params: dict[str, Any]) -> dict[str, Any]:
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
