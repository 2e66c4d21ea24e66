"""How updates leave the emulator: getUpdates long polls, or POSTs to the bot's webhook.

Webhook updates are delivered one at a time, in order (Telegram may deliver up to
``max_connections`` at once); a failed one is retried with a delay that doubles up to a minute,
or waits the webhook's ``Retry-After``. A getUpdates or setWebhook ends a waiting long poll with
409, as a second bot instance does in Telegram.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING, Any

import aiohttp

from .state import BotState
from .wire import ApiError

if TYPE_CHECKING:
    from .server import BotApiEmulator

WEBHOOK_FIRST_RETRY = 1.0
WEBHOOK_MAX_RETRY = 60.0


@dataclasses.dataclass
class Webhook:
    url: str
    secret_token: str
    max_connections: int
    last_error_date: int | None = None
    last_error_message: str | None = None


class Delivery(BotState):
    """The long poll and the webhook delivery task of a bot."""

    def __init__(self, emulator: BotApiEmulator, token: str, user: dict[str, Any]):
        super().__init__(emulator, token, user)
        self._poll_generation = 0
        self._poll_conflict = ""
        self._delivery: asyncio.Task | None = None

    async def long_poll(self, timeout: float) -> None:
        """Waits up to ``timeout`` s for an update; 409 when another getUpdates or a setWebhook ends the wait."""
        generation = self._poll_generation
        with contextlib.suppress(TimeoutError):
            await self.emulator.wait_for(
                lambda: self.updates or self._poll_generation != generation or self.emulator.closing, timeout)
        if self._poll_generation != generation:
            raise ApiError(409, self._poll_conflict)

    def terminate_poll(self, conflict: str) -> None:
        """Ends a waiting getUpdates with 409 ``conflict``."""
        self._poll_generation += 1
        self._poll_conflict = conflict
        self.emulator.changed()

    def start_delivery(self) -> None:
        if self._delivery is None or self._delivery.done():
            self._delivery = asyncio.create_task(self._deliver(), name=f"botapi-webhook-{self.id}")

    async def stop_delivery(self) -> None:
        if self._delivery is not None:
            self._delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._delivery

    async def _deliver(self) -> None:
        """POSTs pending updates to the webhook in order; a failed one is retried with a growing delay."""
        delay = WEBHOOK_FIRST_RETRY
        async with aiohttp.ClientSession() as session:
            while (hook := self.webhook) is not None:
                await self.emulator.wait_for(lambda hook=hook: self.webhook is not hook or self.updates, timeout=None)
                if self.webhook is not hook:
                    continue
                update = self.updates[0]
                error, retry_after = await self._post_update(session, hook, update)
                if error is None:
                    if self.updates and self.updates[0] is update:
                        self.updates.pop(0)
                    self.emulator.changed()
                    delay = WEBHOOK_FIRST_RETRY
                    continue
                hook.last_error_date, hook.last_error_message = int(time.time()), error
                self.emulator.changed()
                with contextlib.suppress(TimeoutError):
                    await self.emulator.wait_for(lambda hook=hook: self.webhook is not hook, retry_after or delay)
                delay = min(delay * 2, WEBHOOK_MAX_RETRY)

    @staticmethod
    async def _post_update(session: aiohttp.ClientSession, hook: Webhook,
                           update: dict[str, Any]) -> tuple[str | None, float | None]:
        headers = {"X-Telegram-Bot-Api-Secret-Token": hook.secret_token} if hook.secret_token else {}
        try:
            async with session.post(hook.url, json=update, headers=headers,
                                    timeout=aiohttp.ClientTimeout(total=60)) as response:
                if 200 <= response.status <= 299:
                    return None, None
                retry_after = response.headers.get("Retry-After", "")
                return (f"Wrong response from the webhook: {response.status} {response.reason}",
                        float(retry_after) if retry_after.isdigit() else None)
        except (aiohttp.ClientError, asyncio.TimeoutError) as error:
            return f"Connection failed: {error or type(error).__name__}", None
