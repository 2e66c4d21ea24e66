"""Telegram's flood limits, enforced when a test turns them on (``EmulatedBot.enforce_limits``).

Telegram publishes no exact figures; these are the ones its Bots FAQ and python-telegram-bot's
``telegram.constants.FloodLimit`` give, as sliding windows over the moments requests reach the
emulator (``Call.received_at``):

- 30 messages in any second, all chats together;
- 13 in any 10 seconds and 3 in any second in one private chat (about one a second, a short
  burst allowed);
- 20 in any minute in one group, supergroup or channel.

A message is a request that sends, edits, deletes, copies or forwards one in a chat, and each item
of an album (``sendMediaGroup``: each goes as a message of its own); chat actions and callback
answers are not. One past a limit is answered 429 with ``retry_after``, the whole
seconds until the window has room, and is not counted.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from .wire import ApiError, fault_error

OVERALL = (30, 1.0)
PRIVATE_CHAT = ((13, 10.0), (3, 1.0))
GROUP = ((20, 60.0),)
COUNTED_PREFIXES = ("send", "edit", "delete", "copy", "forward")
NOT_COUNTED = frozenset({"sendChatAction"})


def is_message(method: str, params: dict[str, Any]) -> bool:
    """Whether Telegram counts the request (its Bot API spelling) against the flood limits."""
    return (method.startswith(COUNTED_PREFIXES) and method not in NOT_COUNTED
            and ("chat_id" in params or "inline_message_id" in params))


def message_count(method: str, params: dict[str, Any]) -> int:
    """How many messages a request Telegram counts (``is_message``) counts as: an album one per item."""
    media = params.get("media") if method == "sendMediaGroup" else None
    return len(media) if isinstance(media, list) and media else 1


def busiest(times: list[float], period: float) -> int:
    """The most of ``times`` in any ``period`` seconds: what a sliding window would have counted."""
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while times[start] <= at - period:
            start += 1
        most = max(most, end - start + 1)
    return most


class FloodLimits:
    """Messages counted per window: the bot's, and each chat's."""

    def __init__(self) -> None:
        self._windows: dict[object, deque[float]] = {}

    def admit(self, method: str, params: dict[str, Any], now: float) -> ApiError | None:
        """Counts the request if every window it falls in has room; else the 429 to answer."""
        if not is_message(method, params):
            return None
        count = message_count(method, params)
        chat = params.get("chat_id", params.get("inline_message_id"))
        group = chat.startswith("@") if isinstance(chat, str) else isinstance(chat, int) and chat < 0
        windows = [(("bot",), OVERALL)] + [(("chat", chat, period), (limit, period))
                                           for limit, period in (GROUP if group else PRIVATE_CHAT)]
        waits = [self._wait(key, limit, period, now, count) for key, (limit, period) in windows]
        if max(waits) > 0:
            return fault_error(429, max(1, math.ceil(max(waits))), None)
        for key, _ in windows:
            self._windows.setdefault(key, deque()).extend([now] * count)
        return None

    def _wait(self, key: object, limit: int, period: float, now: float, count: int) -> float:
        """Seconds until the window has room for ``count`` more (0: it has now)."""
        window = self._windows.setdefault(key, deque())
        while window and window[0] <= now - period:
            window.popleft()
        over = len(window) + min(count, limit) - limit
        return window[over - 1] + period - now if over > 0 else 0.0
