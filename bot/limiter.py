"""The bot's rate limiter: Telegram's limits kept exactly, results before status messages.

Only messages count (``windows.messages_in``: send, edit, delete, copy, forward, an album's each
item; not chat actions, getFile, callback answers): each goes through its chat's windows (13 in any
10 s and 3 in any 1 s in a private chat, 20 a minute in a group), then the bot's (30 in any second),
then a slot of the fleet's (``fleet.FleetSlots``, in PostgreSQL), which every host of the bot takes
together: a single host too, since nothing tells a host that no other sends with its token (one
round trip for up to ``fleet.BATCH`` messages). Everything else goes straight through. An album of
more items than a window's limit goes alone in that window (as Telegram takes it: one request).

A 429 replaces python-telegram-bot's ``AIORateLimiter``'s pause of every request: its
``retry_after`` pauses the chat it came from, and every chat only when 429s came from several
chats at once (``windows.FloodHits``: the bot's overall limit, then); the request is tried again,
at most ``max_retries`` times.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from telegram.error import RetryAfter
from telegram.ext import BaseRateLimiter

from ..core.logs import get_logger
from .windows import TELEGRAM, FloodHits, Gate, Limits, messages_in

log = get_logger("bot.limiter")

STATUS = "status"
"""``rate_limit_args`` of a status message (a "Queued" reply, a progress edit): results go first."""
STATUS_SLOTS = 3
"""Status messages past their chat's window at once: all a result may find ahead of it."""
RESULTS_PER_STATUS = 5
"""At the bot's window, a waiting status message goes after at most this many results: while a
backlog's results take every slot, the queue messages still get a sixth (5 a second)."""
MAX_CHAT_GATES = 1024
"""Chat windows kept before the idle ones are forgotten."""


class ResultsFirstLimiter(BaseRateLimiter[str]):
    """Telegram's limits as sliding windows (``windows``); status messages give way to every other
    request at each window (at the bot's, to ``RESULTS_PER_STATUS`` in a row at most), and no more
    than ``STATUS_SLOTS`` wait at the bot's at once, so a result never queues behind a backlog of
    queue messages and progress edits (which the callers coalesce meanwhile), nor do they wait for
    a backlog's results to end.

    ``fleet``: the slots shared by every host of the bot (``fleet.FleetSlots``); None: this host's
    windows only (tests without a database; ``service.build_application`` always gives one).
    """

    def __init__(self, *, max_retries: int = 3, limits: Limits = TELEGRAM, fleet=None,
                 clock: Callable[[], float] = time.monotonic):
        self.max_retries = max_retries
        self.limits = limits
        self.fleet = fleet
        self._clock = clock
        self._overall = Gate(limits.overall, clock, status_every=RESULTS_PER_STATUS)
        self._chats: dict[int | str, Gate] = {}
        self._hits = FloodHits()
        self._status_slots = asyncio.Semaphore(STATUS_SLOTS)

    async def initialize(self) -> None:
        """Nothing to set up: the windows fill as requests come."""

    async def shutdown(self) -> None:
        for gate in (self._overall, *self._chats.values()):
            gate.close()
        if self.fleet is not None:
            await self.fleet.close()

    async def process_request(self, callback, args, kwargs, endpoint, data, rate_limit_args):
        messages = messages_in(endpoint, data)
        if not messages:
            return await callback(*args, **kwargs)
        chat = _chat_of(data)
        status = rate_limit_args == STATUS
        for attempt in range(self.max_retries + 1):
            try:
                return await self._send(chat, status, messages, callback, args, kwargs)
            except RetryAfter as exc:
                if attempt == self.max_retries:
                    raise
                # as AIORateLimiter reads it: the public property warns in PTB 22 (an int or a timedelta)
                self._flooded(chat, exc._retry_after.total_seconds())
        raise AssertionError("unreachable")

    async def _send(self, chat, status: bool, messages: int, callback, args, kwargs):
        """Sends once ``messages`` slots are free in each window (an album's all at once)."""
        gate = self._chat_gate(chat)
        await gate.enter(status, messages)
        try:
            async with self._status_slots if status else contextlib.nullcontext():
                await self._overall.enter(status, messages)
            try:
                slots = await self.fleet.take(messages) if self.fleet is not None else []
                try:
                    return await callback(*args, **kwargs)
                finally:
                    if self.fleet is not None:
                        self.fleet.answered(*slots)
            finally:
                self._overall.done(messages)
        finally:
            gate.done(messages)

    def _flooded(self, chat, retry_after: float) -> None:
        now = self._clock()
        until = now + retry_after
        gate = self._chat_gate(chat)
        gate.paused_until = max(gate.paused_until, until)
        if self._hits.hit(chat, now):
            self._overall.paused_until = max(self._overall.paused_until, until)
            log.warning("429s from several chats: every chat waits %.1f s", retry_after)
        else:
            log.info("429 in one chat: it waits %.1f s", retry_after)

    def _chat_gate(self, chat) -> Gate:
        gate = self._chats.get(chat)
        if gate is None:
            if len(self._chats) >= MAX_CHAT_GATES:
                for key in [key for key, idle in self._chats.items() if idle.idle()]:
                    del self._chats[key]
            gate = self._chats[chat] = Gate(self.limits.of_chat(chat), self._clock)
        return gate


def _chat_of(data: dict) -> int | str:
    """The chat a request acts in: its id, or an @name (a channel); an inline message's id stands for
    its chat, which the request does not name."""
    chat = data.get("chat_id", data.get("inline_message_id"))
    with contextlib.suppress(ValueError, TypeError):
        return int(chat)
    return str(chat)
