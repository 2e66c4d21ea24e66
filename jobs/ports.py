"""What jobs need from the chat a job came from: the port ``bot/`` implements over Telegram.

Nothing here knows Telegram. A sink's errors reach jobs as the exceptions below, so the
dispatcher's outcomes (a clear "bad picture", an incident, a 502 from a route) stay the same
whatever carries the messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol


class ChatError(Exception):
    """Base of the errors a ``ChatSink`` raises; the original error is the ``__cause__``."""


class InputUnavailable(ChatError):
    """An input file cannot be fetched (too big to download, gone); a retry cannot help.

    ``key`` and ``params`` name the reason for the message catalog.
    """

    def __init__(self, key: str, **params):
        super().__init__(key)
        self.key = key
        self.params: Mapping[str, Any] = params


class DeliveryFailed(ChatError):
    """The chat refused or did not take a message or file, for sure (retries are behind it)."""


class ChatBlocked(DeliveryFailed):
    """The user blocked the bot: nothing more can reach them."""


class UploadTooLarge(DeliveryFailed):
    """The chat refused a file for its size (beyond what its server takes from bots)."""


class DeliveryUnconfirmed(ChatError):
    """The request went out but its answer did not come: the chat may have taken it or not."""


class StatusMessage(Protocol):
    """A job's status message: edits are best effort and throttled, the final text always shows."""

    async def update(self, text: str) -> None: ...

    async def preview(self, image: bytes) -> None:
        """Show ``image`` (a live preview of the running job) with the latest text; best effort."""

    async def finish(self, text: str) -> None: ...


class ChatSink(Protocol):
    async def check_chat(self, chat_id: int) -> None:
        """Whether the chat exists for the bot (the user wrote to it), asked without sending
        anything. :raises DeliveryFailed:"""

    async def send_text(self, chat_id: int, text: str, reply_to: int | None = None) -> int:
        """Send a message; returns its message id. :raises DeliveryFailed, DeliveryUnconfirmed:"""

    def status(self, chat_id: int, message_id: int | None, *, job_id: int | None = None,
               reply_to: int | None = None, adopt: Callable[[int], Awaitable[int | None]] | None = None,
               moved: Callable[[int], Awaitable[None]] | None = None) -> StatusMessage:
        """The status message ``message_id`` of job ``job_id`` in ``chat_id``, to edit as the job goes on.

        With ``message_id`` None the first text posts the message (replying to ``reply_to``),
        or edits the job's "Queued" reply if that is on its way, and ``adopt(new_id)`` records
        it unless the job has one; it returns the job's.
        ``moved(new_id)`` records a message that took the status message's place (a preview's).
        """

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        """Delete a message the bot sent. :raises DeliveryFailed:"""

    async def send_result(self, chat_id: int, reply_to: int | None, filename: str, data: bytes) -> dict:
        """Send one result file; returns what the session records for chaining
        (``{"kind", "file_id", "filename", "message_ids"}``); a preview that does not go is no failure.
        :raises UploadTooLarge: the file is beyond what the chat's server takes.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def send_album(self, chat_id: int, reply_to: int | None, files: list[tuple[str, bytes]]) -> list[dict]:
        """Send 2-10 still images as one album (and their lossless files); a record per file, as
        ``send_result`` returns. :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def offer_buttons(self, chat_id: int, message_id: int, token: str, say: Callable[..., str]) -> None:
        """Put the result buttons (new seed, upscale, edit, parameters, delete) under the result
        message ``message_id``; ``token`` names the job's buttons, ``say`` gives their labels.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def send_file(self, chat_id: int, reply_to: int | None, filename: str, data: bytes) -> dict:
        """Send a file as it is (a document, no preview); returns ``{"message_id"}``.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def fetch_file(self, file_id: str) -> bytes:
        """The bytes of a file the user sent. :raises InputUnavailable:"""
