"""What jobs need from the chat a job came from: the port ``bot/`` implements over Telegram.

Nothing here knows Telegram. A sink's errors reach jobs as the exceptions below, so the
dispatcher's outcomes (a clear "bad picture", an incident, a 502 from a route) stay the same
whatever carries the messages.
"""

from __future__ import annotations

import dataclasses
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


class ChatUnavailable(DeliveryFailed):
    """The chat's server failed the request for sure (a 5xx, a 429, no connection) and went on failing
    it through a short backoff (``QUICK``): an outage, after which the same request may go.
    ``retry_after_s``: how long the server asked to wait, if it did."""

    def __init__(self, message: str, retry_after_s: float | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ChatBlocked(DeliveryFailed):
    """The user blocked the bot: nothing more can reach them."""


class UploadTooLarge(DeliveryFailed):
    """The chat refused a file for its size (beyond what its server takes from bots)."""


class DeliveryUnconfirmed(ChatError):
    """The request went out but its answer did not come: the chat may have taken it or not."""


@dataclasses.dataclass(frozen=True)
class Patience:
    """How a request that the chat's server failed for sure is tried again: waits that double from
    ``first_s`` up to ``ceiling_s`` (longer where the server asks: ``retry_after``), and no new try
    later than ``total_s`` after the first. The one retry policy of chat requests (STYLE rule 16):
    ``QUICK`` inside one send, a delivery's from the settings across an outage."""

    first_s: float
    ceiling_s: float
    total_s: float

    def wait_s(self, tries: int, retry_after_s: float | None = None) -> float:
        """The wait before try ``tries + 1``."""
        backoff = min(self.ceiling_s, self.first_s * 2 ** (tries - 1))
        return max(backoff, retry_after_s or 0.0)

    @classmethod
    def of_delivery(cls, settings) -> Patience:
        """A delivery's (a job's results and its last status): minutes, from the settings."""
        return cls(QUICK.first_s, settings.delivery_backoff_max_s, settings.delivery_patience_s)


QUICK = Patience(first_s=0.5, ceiling_s=2.0, total_s=3.5)
"""A blip: 4 tries within 3.5 s (0.5, 1, 2 s apart); then the request is ``ChatUnavailable``."""


@dataclasses.dataclass(frozen=True)
class ResultExtras:
    """What rides on a job's last result message: ``caption`` (e.g. "Done in 2.1 s.") and the result
    buttons of ``token`` (labels from ``say``), so that neither costs a request of its own."""

    caption: str | None
    token: str
    say: Callable[..., str]


SentFn = Callable[[list[dict]], Awaitable[None]]
"""Keeps what the chat answered for a job's files (``store.deliveries.complete``) as soon as it took
them, before their best-effort extras (previews) go: a host that dies in between leaves them known."""


class StatusMessage(Protocol):
    """A job's status message: posted once, and only if the job runs longer than a moment (a job
    done sooner says so in its result's caption); edits are best effort and throttled."""

    async def update(self, text: str) -> None: ...

    async def preview(self, image: bytes) -> None:
        """Show ``image`` (a live preview of the running job) with the latest text; best effort."""

    def results_follow(self) -> None:
        """The job's results go to the chat next: a status not shown yet is not posted any more
        (it would land under them); one shown already is still edited."""

    async def finish(self, text: str, *, optional: bool = False, patience: Patience = QUICK) -> None:
        """The final text, always shown; ``optional``: the chat has it already (the result's caption),
        so it only goes into a status message the job has (or takes over), never a new post.
        ``patience``: how long it is tried again while the chat's server fails it (an outage)."""


class ChatSink(Protocol):
    async def check_chat(self, chat_id: int) -> None:
        """Whether the chat exists for the bot (the user wrote to it), asked without sending
        anything. :raises DeliveryFailed:"""

    async def send_text(self, chat_id: int, text: str, reply_to: int | None = None,
                        extras: ResultExtras | None = None) -> int:
        """Send a message (with the result buttons of ``extras``); returns its message id.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    def status(self, job_id: int, chat_id: int, message_id: int | None, *, reply_to: int | None,
               worker: str) -> StatusMessage:
        """The status message of job ``job_id``, which ``worker`` runs now in ``chat_id`` (``message_id``:
        the one it has from an earlier run, else None), to edit as the job goes on; the reply to
        ``reply_to`` if one is posted. Making it sends nothing; its first text tells the chat's queue
        message that the job left the queue. Where it shows, and its hand-over from the queue
        message, is the chat's business (``bot/job_messages.py``)."""

    async def delete_message(self, chat_id: int, message_id: int) -> None:
        """Delete a message the bot sent. :raises DeliveryFailed:"""

    async def send_result(self, chat_id: int, reply_to: int | None, filename: str, data: bytes,
                          extras: ResultExtras | None = None, sent: SentFn | None = None) -> dict:
        """Send one result file; returns what the session records for chaining
        (``{"kind", "file_id", "filename", "message_ids"}``, and ``"buttons"``: the message that took
        ``extras``, absent if none did); a preview that does not go is no failure. ``sent([record])``
        is awaited once the file itself went, before its preview.
        :raises UploadTooLarge: the file is beyond what the chat's server takes.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def send_album(self, chat_id: int, reply_to: int | None, files: list[tuple[str, bytes]],
                         sent: SentFn | None = None) -> list[dict]:
        """Send 2-10 still images as one album (and their lossless files); a record per file, as
        ``send_result`` returns; ``sent(records)`` once the files went, before their previews.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def offer_buttons(self, chat_id: int, message_id: int, token: str, say: Callable[..., str]) -> None:
        """Put the result buttons (new seed, upscale, edit, parameters, delete) under the result
        message ``message_id``; ``token`` names the job's buttons, ``say`` gives their labels.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def send_file(self, chat_id: int, reply_to: int | None, filename: str, data: bytes) -> dict:
        """Send a file as it is (a document, no preview); returns ``{"message_id"}``.
        :raises DeliveryFailed, DeliveryUnconfirmed:"""

    async def fetch_file(self, file_id: str) -> bytes:
        """The bytes of a file the user sent. :raises InputUnavailable:"""
