"""Telegram's overall limit (30 messages in any second) kept for every host of one bot together:
each message takes a slot from one ledger in PostgreSQL (``store/send_slots.py``), a few per round
trip when several wait.

A slot is held as in the host's own window (``windows``): from its grant until a period after its
message was answered, which the host reports in its next round trip (soon after the answer:
``REPORT_S``; late only holds the slot longer). So no second at Telegram's end sees more than the
limit from all hosts, however long each message is on its way. A slot whose answer is never
reported (its host died) is let go ``OPEN_S`` after its grant, longer than any request may take.
While the database does not answer, each host keeps its own window only: a round trip without an
answer after ``ANSWER_S`` (a hung server answers nothing, not even an error) lets the messages go,
and no other is made until it has answered (its slots, granted late, are given back at once), so a
hung database holds up no message, not even the status that tells the user about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import deque
from collections.abc import Callable

from ..core.logs import get_logger
from ..store import send_slots
from .windows import TELEGRAM, Limit

log = get_logger("bot.fleet")

BATCH = 5
"""The most slots one round trip takes (as many as messages wait, up to this)."""
REPORT_S = 0.05
"""How long answers are gathered before a round trip that only reports them."""
POLL_S = 0.05
"""How soon to ask again when every slot is on its way (other hosts report their answers meanwhile)."""
OPEN_S = 35.0
"""Longer than any request may take (python-telegram-bot's connect, 20 s media write and read timeouts)."""
FLUSH_S = 2.0
"""How long closing waits to report the last answers (unreported, their slots stay held until OPEN_S)."""
OUTAGE_LOG_S = 60.0
ANSWER_S = 2.0
"""How long messages wait for the ledger's answer (it takes milliseconds) before they go without it."""


class FleetSlots:
    """The slots of ``limit`` shared by every host that sends as the bot with ``token`` (only its
    sha256 is kept, and stored). One round trip at a time reports the answers since the last one and
    asks for as many slots as messages wait (up to ``BATCH``), handed to them in the order they came."""

    def __init__(self, pool, token: str, limit: Limit = TELEGRAM.overall, *,
                 clock: Callable[[], float] = time.monotonic):
        self.key = hashlib.sha256(token.encode()).digest()
        self.limit = limit
        self._pool = pool
        self._clock = clock
        self._waiting: deque[asyncio.Future] = deque()
        self._answered: list[tuple[int, float]] = []
        """Slots whose message was answered, not reported yet: (id, when)."""
        self._asker: asyncio.Task | None = None
        self._late: asyncio.Task | None = None  # a round trip still without an answer after ANSWER_S
        self._outage_logged = -OUTAGE_LOG_S

    async def take(self, count: int = 1) -> list[int | None]:
        """Waits for ``count`` slots of the fleet's, asked for one behind the other (their ids; None
        while the database is out of reach): send the message right after, and call ``answered``
        with the ids once it was answered or failed."""
        loop = asyncio.get_running_loop()
        turns = [loop.create_future() for _ in range(count)]
        self._waiting.extend(turns)
        self._ask_soon()
        try:
            return list(await asyncio.gather(*turns))
        except asyncio.CancelledError:
            for turn in turns:
                if turn.done() and not turn.cancelled():
                    self.answered(turn.result())  # given as the message was cancelled: not sent
            raise

    def answered(self, *slots: int | None) -> None:
        taken = [slot for slot in slots if slot is not None]
        if taken:
            now = self._clock()
            self._answered.extend((slot, now) for slot in taken)
            self._ask_soon()

    async def close(self) -> None:
        """Stops asking, and reports the answers not reported yet, so the other hosts need not wait for
        these slots' ``OPEN_S``."""
        if self._asker is not None:
            self._asker.cancel()
        answered, self._answered = self._answered, []
        if answered:
            now = self._clock()
            with contextlib.suppress(Exception):  # best effort: the database may be gone already
                await asyncio.wait_for(send_slots.take(
                    self._pool, self.key, 0, self.limit.limit, self.limit.period, open_s=OPEN_S, poll_s=POLL_S,
                    answered=[(slot, now - at) for slot, at in answered]), FLUSH_S)

    def _ask_soon(self) -> None:
        if self._asker is None or self._asker.done():
            self._asker = asyncio.create_task(self._ask(), name="courier-fleet-slots")

    async def _ask(self) -> None:
        while self._still_waiting() or self._answered:
            if not self._waiting:
                await asyncio.sleep(REPORT_S)  # gather answers: one round trip for several
            wanted = min(BATCH, len(self._waiting))
            now = self._clock()
            answered, self._answered = self._answered, []
            try:
                slots, wait_s = await self._round_trip(wanted, [(slot, now - at) for slot, at in answered])
            except Exception as exc:  # whatever fails here, messages must not wait for ever
                self._outage(exc)
                slots, wait_s = [None] * len(self._waiting), 0.0
            for slot in slots:
                if self._still_waiting():
                    self._waiting.popleft().set_result(slot)
                else:
                    self.answered(slot)  # its message was cancelled meanwhile
            if len(slots) < wanted:
                await asyncio.sleep(wait_s)

    async def _round_trip(self, wanted: int, answered: list[tuple[int, float]]) -> tuple[list[int], float]:
        """``send_slots.take``, waited for at most ``ANSWER_S``; past it TimeoutError, the call left to
        answer on its own (``_answered_late``). While one is late, every call fails at once."""
        if self._late is not None:
            raise TimeoutError(f"the database has not answered for more than {ANSWER_S:.0f} s")
        trip = asyncio.ensure_future(send_slots.take(
            self._pool, self.key, wanted, self.limit.limit, self.limit.period, open_s=OPEN_S, poll_s=POLL_S,
            answered=answered))
        try:
            await asyncio.wait([trip], timeout=ANSWER_S)
        except asyncio.CancelledError:
            trip.cancel()
            raise
        if not trip.done():
            self._late = trip
            trip.add_done_callback(self._answered_late)
            raise TimeoutError(f"the database did not answer in {ANSWER_S:.0f} s")
        return trip.result()

    def _answered_late(self, trip: asyncio.Task) -> None:
        """The late round trip answered: the slots it took were not used (their messages went without)."""
        self._late = None
        if not trip.cancelled() and trip.exception() is None:
            self.answered(*trip.result()[0])

    def _still_waiting(self) -> bool:
        """Whether a message waits (the first in ``_waiting`` is one)."""
        while self._waiting and self._waiting[0].done():
            self._waiting.popleft()
        return bool(self._waiting)

    def _outage(self, exc: Exception) -> None:
        if self._clock() - self._outage_logged >= OUTAGE_LOG_S:
            self._outage_logged = self._clock()
            log.warning("the fleet's message slots are out of reach (%s): this host keeps its own limit only", exc)
