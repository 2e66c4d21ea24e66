"""What tests (and the web chat, through ``control``) do to a bot: play its users, break Telegram
for it, and wait for what it did.

Users write text, photos, documents and stickers, edit their messages, press inline buttons, send
Mini App data, write in groups and channels, and block the bot (``inject_*``, ``block``). Faults:
the next calls of a method fail (``fail``), get no answer (``hang``), or wait for the test
(``hold``); every outbound call fails for a while (``outage``); Telegram's flood limits answer 429
(``enforce_limits``). ``wait_for_call`` waits, event driven, for a call the bot made.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import keyboards, media
from . import text as formatting
from .delivery import Delivery
from .limits import FloodLimits
from .params import read_caption, typed_text
from .wire import ApiError, Upload, fault_error

if TYPE_CHECKING:
    from .calls import Call
    from .server import BotApiEmulator

GROUP_ANONYMOUS_BOT = {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"}
"""The sender of every message an anonymous group admin writes (the group itself is its sender_chat)."""


@dataclasses.dataclass
class _Fault:
    """What the next ``times`` calls of ``method`` get instead of a plain answer."""

    method: str
    times: int
    error: ApiError | None
    """None: hang instead of answering."""
    perform: bool = False
    released: asyncio.Event | None = None
    """Set: the call waits for it, then is answered as usual (no error, no hang)."""


class Harness(Delivery):
    """The test API of a bot (``EmulatedBot`` answers its Bot API)."""

    def __init__(self, emulator: BotApiEmulator, token: str, user: dict[str, Any]):
        super().__init__(emulator, token, user)
        self._faults: list[_Fault] = []
        self._outage: tuple[float, bool] | None = None
        """(until, hang) while every outbound call fails (``outage``); ``time.monotonic`` seconds."""
        self.flood_limits: FloodLimits | None = None
        """Telegram's flood limits, when a test turned them on (``enforce_limits``)."""
        self._query_ids = itertools.count(1)

    def inject_text(self, user_id: int, text: str, *, reply_to: int | None = None) -> dict[str, Any]:
        """The user sends ``text``; ``/command`` words get bot_command entities. Returns the Message."""
        return self._from_user(user_id, typed_text(text), reply_to)

    def inject_photo(self, user_id: int, data: bytes, *, caption: str | None = None,
                     reply_to: int | None = None) -> dict[str, Any]:
        """The user sends an image as a photo (recompressed, as Telegram clients do). Returns the Message."""
        return self._from_user(user_id, {"photo": self._store_photo(data), **read_caption({"caption": caption})},
                               reply_to)

    def inject_document(self, user_id: int, data: bytes, file_name: str, *, mime_type: str | None = None,
                        caption: str | None = None, reply_to: int | None = None) -> dict[str, Any]:
        """The user sends a file as a document (bytes kept). Returns the Message."""
        document = self._store_file("document", Upload(file_name, mime_type or "", data), {})
        return self._from_user(user_id, {"document": document, **read_caption({"caption": caption})}, reply_to)

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
        message = self.messages.get((user_id, message_id))
        if message is None or message["from"]["id"] != user_id or "text" not in message:
            raise LookupError(f"no text message {message_id} of user {user_id}")
        edited = {k: v for k, v in message.items() if k != "entities"}
        edited.update(text=text, edit_date=int(time.time()))
        if entities := formatting.command_entities(text):
            edited["entities"] = entities
        self.messages[(user_id, message_id)] = edited
        self.add_update("edited_message", edited)
        return edited

    def inject_channel_post(self, channel_id: int, text: str, *, title: str = "Channel") -> dict[str, Any]:
        """A post in a channel the bot administers: no ``from``, the channel as ``sender_chat``."""
        chat = self.group_chat(channel_id, "channel", title)
        message = self.post(chat, None, {"sender_chat": chat, **typed_text(text)})
        self.add_update("channel_post", message)
        return message

    def inject_anonymous_admin_text(self, group_id: int, text: str, *, title: str = "Group") -> dict[str, Any]:
        """An admin of a supergroup writes anonymously: from GroupAnonymousBot, the group as ``sender_chat``."""
        chat = self.group_chat(group_id, "supergroup", title)
        message = self.post(chat, dict(GROUP_ANONYMOUS_BOT), {"sender_chat": chat, **typed_text(text)})
        self.add_update("message", message)
        return message

    def inject_group_text(self, group_id: int, user_id: int, text: str, *, reply_to: int | None = None,
                          kind: str = "supergroup", title: str = "Group") -> dict[str, Any]:
        """``user_id`` writes ``text`` in a group (``kind`` "group" or "supergroup") the bot is in.

        The bot gets the update only as far as Telegram's privacy mode lets it (``sees_in_group``).
        Returns the Message, which the group's history has either way.
        """
        return self._in_group(group_id, user_id, typed_text(text), reply_to, kind, title)

    def inject_group_photo(self, group_id: int, user_id: int, data: bytes, *, caption: str | None = None,
                           reply_to: int | None = None, kind: str = "supergroup",
                           title: str = "Group") -> dict[str, Any]:
        """``user_id`` posts an image as a photo in a group; like ``inject_group_text``."""
        photo = {"photo": self._store_photo(data), **read_caption({"caption": caption})}
        return self._in_group(group_id, user_id, photo, reply_to, kind, title)

    def inject_update(self, update: dict[str, Any]) -> dict[str, Any]:
        """Any update, as a test built it (e.g. python-telegram-bot objects' ``to_dict()``), queued as is.

        The chats, messages and callback query in it become known, so the bot can answer
        them, as it can in Telegram. The ``update_id`` is the emulator's. Returns the update.
        """
        update = {**update, "update_id": next(self._update_ids)}
        if isinstance(query := update.get("callback_query"), dict):
            self.callback_queries[str(query.get("id"))] = query
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
        message = self.messages.get((user_id, message_id))
        if message is None:
            raise LookupError(f"no message {message_id} in chat {user_id}")
        rows = message.get("reply_markup", {}).get("inline_keyboard", [])
        if data not in (button.get("callback_data") for button in itertools.chain.from_iterable(rows)):
            raise ValueError(f"message {message_id} has no button with callback_data {data!r}")
        query = {"id": str(next(self._query_ids)), "from": self.emulator.user(presser or user_id), "message": message,
                 "chat_instance": str(abs(hash((self.id, user_id)))), "data": data}
        self.callback_queries[query["id"]] = query
        self.add_update("callback_query", query)
        return query

    def block(self, user_id: int, blocked: bool = True) -> None:
        """The user blocks (or unblocks) the bot: sending to them fails with 403."""
        (self._blocked.add if blocked else self._blocked.discard)(user_id)

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
