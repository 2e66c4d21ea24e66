"""Refusals told once per burst, and never waited for by the update that asked for one.

A stranger's flood used to get one "this bot is private" reply per message, each paced by the
stranger's chat limit (13 in any 10 s), and each update stayed in hand until its reply went: the
poller asks for no more updates while a batch of them is in hand (``polling.BATCH``; a webhook's
connections are held the same way), so everyone's commands waited behind the stranger's replies
(an allowed user's ``/help``: 40 s after 60 stranger messages, 85 s after 200). Now:

- ``Refusals.due``: a refusal of a kind is told to a user (or chat) once per ``REPEAT_S[kind]``;
  later ones are dropped without a reply. Kept in memory, bounded (``MAX_REMEMBERED``): a stranger
  leaves no row, and a host that restarts at worst tells someone once more.
- ``Refusals.tell``: the reply to someone the bot does not serve (a stranger, a banned user, an
  anonymous sender) goes to a sender task of this module and the update is done at once, whatever
  Telegram's limits make the reply wait. That task sends at most ``PER_SECOND`` such replies a
  second (a tenth of the bot's 30), one at a time, so a crowd of strangers never takes the bot's
  slots from the replies of the people it serves; past ``MAX_WAITING`` a reply is dropped, and not
  counted as told.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from telegram import Message
from telegram.error import TelegramError

from ..core.i18n import message_id
from ..core.logs import get_logger
from .windows import Gate, Limit

log = get_logger("bot")

# The kinds of refusal; the first three are their catalog keys.
STRANGER, BANNED, ANONYMOUS = message_id("not_allowed"), message_id("banned"), message_id("anonymous_sender")
BUSY, QUOTA = "too_many_jobs", "quota"
REPEAT_S = {STRANGER: 300.0, BANNED: 300.0, ANONYMOUS: 300.0, BUSY: 15.0, QUOTA: 15.0}
"""How long after telling a refusal the same one is not told again. A stranger or a banned user
learns nothing new from a second reply; a user at the cap or the quota may be under it again soon,
so a burst of their commands gets one reply, and a command some seconds later another."""
MAX_REMEMBERED = 10_000
"""(kind, user) pairs remembered, the least recently told forgotten first: about a megabyte."""
PER_SECOND = 3
"""Replies to people the bot does not serve, at most, in any second."""
MAX_WAITING = 100
"""Such replies waiting to go (half a minute's worth) before more are dropped."""


class Refusals:
    """When each refusal was last told, and the sender of the replies to people the bot does not serve."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._told: OrderedDict[tuple[str, int], float] = OrderedDict()
        self._waiting: deque[tuple[Message, str]] = deque()
        self._gate = Gate(Limit(PER_SECOND, 1.0), clock)
        self._sender: asyncio.Task | None = None

    def due(self, kind: str, who: int) -> bool:
        """Whether refusal ``kind`` is to be told to ``who`` (a user id; a chat id for an anonymous
        sender) now; if so, it counts as told from now on."""
        now, key = self._clock(), (kind, who)
        told = self._told.get(key)
        if told is not None and now - told < REPEAT_S[kind]:
            return False
        self._told[key] = now
        self._told.move_to_end(key)
        while len(self._told) > MAX_REMEMBERED:
            self._told.popitem(last=False)
        return True

    def let_in(self, who: int) -> None:
        """``who`` was let in: should they be turned away again (``/disallow``, ``/ban``), they are told at once."""
        self._told.pop((STRANGER, who), None)
        self._told.pop((BANNED, who), None)

    def tell(self, kind: str, who: int, message: Message, text: str) -> None:
        """Answer ``message`` with ``text`` in the background if refusal ``kind`` is ``due`` to ``who``."""
        if len(self._waiting) >= MAX_WAITING or not self.due(kind, who):
            return
        self._waiting.append((message, text))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send(), name="courier-refusals")

    async def _send(self) -> None:
        while self._waiting:
            message, text = self._waiting.popleft()
            await self._gate.enter()
            try:
                await message.reply_text(text)
            except TelegramError as exc:  # blocked, gone: nothing more to tell them
                log.info("a refusal to chat %s was not sent: %s", message.chat_id, exc)
            finally:
                self._gate.done()

    async def close(self) -> None:
        """Drop the replies still waiting (the bot stops)."""
        self._waiting.clear()
        self._gate.close()
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
