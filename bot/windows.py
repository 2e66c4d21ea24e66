"""Telegram's flood limits as sliding windows: the arithmetic of the rate limiter (``limiter.py``).

A request holds its slot in a window from the moment it is let go until ``period`` after its
answer came back. Telegram counts it at some moment in between, so however long each request
takes on its way, no ``period`` seconds at Telegram's end ever see more than ``limit`` of them (a
request counted at ``s`` finds every other one counted after ``s - period`` still holding its
slot). That is a true sliding window, not a bucket's burst plus its rate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import time
from collections import deque
from collections.abc import Callable

COUNTED_PREFIXES = ("send", "edit", "delete", "copy", "forward")
NOT_COUNTED = frozenset({"sendChatAction"})


def messages_in(endpoint: str, data: dict) -> int:
    """How many messages Telegram counts for the request: one that sends, edits, deletes, copies or
    forwards a message in a chat is one, an album (``sendMediaGroup``) one per item, as each goes
    as a message of its own; anything else (a chat action, deleteWebhook, deleteMyCommands) none."""
    if not (endpoint.startswith(COUNTED_PREFIXES) and endpoint not in NOT_COUNTED
            and ("chat_id" in data or "inline_message_id" in data)):
        return 0
    media = data.get("media") if endpoint == "sendMediaGroup" else None
    return max(1, len(media)) if isinstance(media, list | tuple) else 1


@dataclasses.dataclass(frozen=True)
class Limit:
    limit: int
    period: float
    """Seconds."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """Telegram's limits per bot token (``../shared/reference/TELEGRAM_LIMITS.md``)."""

    overall: Limit = Limit(30, 1.0)
    """All chats together."""
    private_chat: tuple[Limit, ...] = (Limit(13, 10.0), Limit(3, 1.0))
    """About one a second sustained (Telegram's FAQ), a short burst allowed: a result's document and
    photo back to back plus one status message, never more in any second."""
    group: tuple[Limit, ...] = (Limit(20, 60.0),)
    """A group, supergroup or channel (a negative or @name chat id)."""

    def of_chat(self, chat: int | str) -> tuple[Limit, ...]:
        """A private chat's limits, or a group's (an inline message's id stands for a private chat)."""
        group = chat.startswith("@") if isinstance(chat, str) else chat < 0
        return self.group if group else self.private_chat


TELEGRAM = Limits()


class SlidingWindow:
    """At most ``limit`` requests in any ``period`` seconds (see the module docstring). Times are
    the caller's clock, so the arithmetic is tested with a fake one."""

    def __init__(self, limit: Limit):
        self.limit = limit.limit
        self.period = limit.period
        self._in_flight = 0
        self._frees: list[float] = []
        """A heap: when each answered request gives its slot back."""

    def wait(self, now: float, slots: int = 1) -> float | None:
        """Seconds until ``slots`` are free (at most ``limit``): 0 when they are now, None when too
        many are held by requests still on its way (they free ``period`` after their answers)."""
        while self._frees and self._frees[0] <= now:
            heapq.heappop(self._frees)
        short = self._in_flight + len(self._frees) + min(slots, self.limit) - self.limit
        if short <= 0:
            return 0.0
        return heapq.nsmallest(short, self._frees)[-1] - now if short <= len(self._frees) else None

    def take(self, slots: int = 1) -> None:
        """A request of ``slots`` messages is let go (call ``wait`` first)."""
        self._in_flight += min(slots, self.limit)

    def done(self, now: float, slots: int = 1) -> None:
        """A request of ``slots`` messages let go by ``take`` was answered (or failed) at ``now``."""
        for _ in range(min(slots, self.limit)):
            self._in_flight -= 1
            heapq.heappush(self._frees, now + self.period)

    def idle(self, now: float) -> bool:
        """Holds no slot: forgetting it loses nothing."""
        return not self._in_flight and (not self._frees or max(self._frees) <= now)


class Windows:
    """Several sliding windows a request must find room in at once (a private chat's 13 in any 10 s
    and 3 in any 1 s): the same calls as ``SlidingWindow``, each applied to all of them."""

    def __init__(self, limits: tuple[Limit, ...]):
        self._windows = [SlidingWindow(limit) for limit in limits]

    def wait(self, now: float, slots: int = 1) -> float | None:
        waits = [window.wait(now, slots) for window in self._windows]
        return None if None in waits else max(waits)

    def take(self, slots: int = 1) -> None:
        for window in self._windows:
            window.take(slots)

    def done(self, now: float, slots: int = 1) -> None:
        for window in self._windows:
            window.done(now, slots)

    def idle(self, now: float) -> bool:
        return all(window.idle(now) for window in self._windows)


class FloodHits:
    """The 429s of the last ``within`` seconds: whether they came from ``several`` chats at once
    (Telegram's limit for all chats together, then), or from one chat over its own limit."""

    def __init__(self, several: int = 3, within: float = 5.0):
        self.several = several
        self.within = within
        self._hits: deque[tuple[float, int | str | None]] = deque()

    def hit(self, chat: int | str | None, now: float) -> bool:
        """Records a 429 in ``chat``; True when ``several`` distinct chats had one within ``within`` s."""
        self._hits.append((now, chat))
        while self._hits[0][0] <= now - self.within:
            self._hits.popleft()
        return len({chat for _, chat in self._hits}) >= self.several


class Gate:
    """Requests through a window (or several at once: ``Windows``) in the order they came, results
    before status messages, and none while ``paused_until`` (a 429's ``retry_after``) is ahead.

    ``status_every``: a status message that waits goes after at most this many results (None:
    results always first), so a steady stream of results never starves the acknowledgements."""

    def __init__(self, limits: Limit | tuple[Limit, ...], clock: Callable[[], float] = time.monotonic, *,
                 status_every: int | None = None):
        self.window = Windows(limits if isinstance(limits, tuple) else (limits,))
        self.paused_until = 0.0
        self.status_every = status_every
        self._results_in_a_row = 0
        self._clock = clock
        self._queues: tuple[deque[tuple[asyncio.Future, int]], ...] = (deque(), deque())
        """Results, then status messages: each a turn and the messages it sends."""
        self._freed = asyncio.Event()
        self._pump: asyncio.Task | None = None

    def _wait(self, now: float, slots: int) -> float | None:
        wait = self.window.wait(now, slots)
        return wait if wait is None else max(wait, self.paused_until - now)

    async def enter(self, status: bool = False, slots: int = 1) -> None:
        """Waits for ``slots`` (a request of that many messages) and takes them together; call
        ``done`` with as many once the request was answered."""
        if not any(self._queues) and self._wait(self._clock(), slots) == 0:
            self.window.take(slots)
            return
        turn = asyncio.get_running_loop().create_future()
        self._queues[status].append((turn, slots))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._let_through(), name="courier-limiter-gate")
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # given the slots as it was cancelled
                self.done(slots)
            raise

    def done(self, slots: int = 1) -> None:
        self.window.done(self._clock(), slots)
        self._freed.set()

    def idle(self) -> bool:
        return not any(self._queues) and self.window.idle(self._clock()) and self.paused_until <= self._clock()

    def close(self) -> None:
        if self._pump is not None:
            self._pump.cancel()

    async def _let_through(self) -> None:
        """Lets the first turn go once its slots are free (one that asks for several waits for all of
        them, and the turns behind it wait for it: no album's slots are taken piecemeal)."""
        while any(self._queues):
            results, statuses = self._queues
            status_due = self.status_every is not None and self._results_in_a_row >= self.status_every
            queue = statuses if statuses and (status_due or not results) else results
            turn, slots = queue[0]
            if turn.done():  # cancelled meanwhile
                queue.popleft()
                continue
            wait = self._wait(self._clock(), slots)
            if wait is None:
                self._freed.clear()
                await self._freed.wait()
            elif wait > 0:
                await asyncio.sleep(wait)
            else:
                queue.popleft()
                self._results_in_a_row = 0 if queue is statuses else self._results_in_a_row + 1
                self.window.take(slots)
                turn.set_result(None)
