"""The bot's rate limiter: Telegram's limits kept, results before status messages."""

from __future__ import annotations

import asyncio

from telegram.ext import AIORateLimiter

STATUS = "status"
"""``rate_limit_args`` of a status message (a "Queued" reply, a progress edit): results go first."""
STATUS_SLOTS = 3
"""Status messages inside the rate limiter at once: all a result may find ahead of it."""


class ResultsFirstLimiter(AIORateLimiter):
    """PTB's AIORateLimiter, except that status messages give way to every other request.

    A status message enters the limiter only while no other request waits there, and no more
    than ``STATUS_SLOTS`` at once, so a result never queues behind a backlog of "Queued"
    replies and progress edits (which the throttle coalesces meanwhile).
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._others = 0
        self._no_others = asyncio.Event()
        self._no_others.set()
        self._status_slots = asyncio.Semaphore(STATUS_SLOTS)

    async def process_request(self, callback, args, kwargs, endpoint, data, rate_limit_args):
        if rate_limit_args != STATUS:
            self._others += 1
            self._no_others.clear()
            try:
                return await super().process_request(callback, args, kwargs, endpoint, data, rate_limit_args)
            finally:
                self._others -= 1
                if not self._others:
                    self._no_others.set()
        async with self._status_slots:
            while self._others:
                await self._no_others.wait()
            return await super().process_request(callback, args, kwargs, endpoint, data, None)
