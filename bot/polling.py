"""Long polling that loses no command: our getUpdates loop in place of python-telegram-bot's Updater.

The Updater confirms an update (by the next getUpdates' offset) as soon as it fetched it, so a
bot killed before the update's job was committed lost the command. Here each batch is committed
to the inbox (``store.polled_updates``) before the next getUpdates confirms it, and an update
leaves the inbox only once its handlers ran. What a crash or a database outage left there is
handled from the inbox (the job submission knows an update it queued already, so nothing is
queued twice). While PostgreSQL is down nothing is confirmed: Telegram keeps the updates, and
their senders are told once that their command waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable

from telegram import Update
from telegram.error import TelegramError
from telegram.request import HTTPXRequest

from ..core.logs import get_logger
from ..store import StoreError, polled_updates
from ..store.errors import is_outage
from .outage import tell_waiting

log = get_logger("bot")

POLL_TIMEOUT_S = 10
"""Long-poll wait; an update answers a waiting getUpdates at once."""
REPLAY_POLL_TIMEOUT_S = 1
"""The wait while updates in the inbox are still to be handled again (the database was down)."""
BACKOFF_S = (0.5, 1, 2, 5)
BATCH = 50
"""Updates asked for per getUpdates; the next one is asked for once fewer than this are still being
handled. Under a flood the rest wait at Telegram, not in the bot: the time from the bot receiving
a command to its job being committed stays short, and so does the bot's memory."""


class UpdatesRequest(HTTPXRequest):
    """The connection getUpdates goes over (python-telegram-bot's default for it: one connection),
    keeping each update of the last answer as JSON for the inbox, encoded from the answer as parsed:
    encoding the parsed ``Update`` objects again (``to_dict``) took a tenth of the bot's CPU under a
    flood. PostgreSQL does not split the answer: its JSON functions refuse the ``\\u0000`` and
    unpaired surrogates a hostile message may hold."""

    def __init__(self, proxy: str | None = None):
        super().__init__(connection_pool_size=1, proxy=proxy)
        self.kept: list[tuple[int, str]] = []

    def parse_json_payload(self, payload: bytes) -> dict:
        parsed = super().parse_json_payload(payload)
        result = parsed.get("result") if isinstance(parsed, dict) else None
        if isinstance(result, list):  # before python-telegram-bot reads it into Update objects
            self.kept = [(update["update_id"], json.dumps(update)) for update in result]
        return parsed


class Poller:
    """Fetches updates for ``application`` over ``request`` (the one its bot was built with for
    getUpdates) and hands each to ``process`` (False: handle it again later)."""

    def __init__(self, application, request: UpdatesRequest, pool, allowed_updates: list[str],
                 process: Callable[[Update], Awaitable[bool]]):
        self.application = application
        self.request = request
        self.pool = pool
        self.allowed_updates = allowed_updates
        self.process = process
        self._handling: set[int] = set()
        self._room = asyncio.Event()  # set while fewer than BATCH updates are being handled
        self._room.set()
        self._unmarked: set[int] = set()  # handled, not yet marked so in the inbox
        self._not_marked: set[int] = set()  # went with an UPDATE that failed, their calls not told yet
        self._marking = asyncio.Lock()
        self._replay_due = True  # at start: what the last process left in the inbox
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="courier-polling")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        await self.application.bot.delete_webhook()
        with contextlib.suppress(StoreError):
            await polled_updates.forget_old(self.pool)
        offset, failures = None, 0
        while True:
            try:
                offset = await self._poll(offset)
                failures = 0
            except (TelegramError, StoreError) as exc:
                log.warning("polling: %s: %s", type(exc).__name__, exc)
                await asyncio.sleep(BACKOFF_S[min(failures, len(BACKOFF_S) - 1)])
                failures += 1

    async def _poll(self, offset: int | None) -> int | None:
        """One getUpdates; its updates are committed before the next one confirms them. The next offset."""
        bot = self.application.bot
        if self._replay_due:
            await self._replay()
        if not self._room.is_set():
            log.debug("polling: %d updates in hand, the next getUpdates waits for room", len(self._handling))
            await self._room.wait()
        updates = await bot.get_updates(offset=offset, limit=BATCH, allowed_updates=self.allowed_updates,
                                        timeout=REPLAY_POLL_TIMEOUT_S if self._replay_due else POLL_TIMEOUT_S)
        if not updates:
            return offset
        try:
            fresh = await polled_updates.keep(self.pool, bot.id, self.request.kept)
        except StoreError as exc:
            if is_outage(exc):  # not confirmed: Telegram keeps them until the database is back
                for update in updates:
                    await tell_waiting(bot, self.application.bot_data, update)
            raise
        for update in updates:
            if update.update_id in fresh:
                self._handle(update)
        return updates[-1].update_id + 1

    async def _replay(self) -> None:
        """Handle the kept updates whose handlers did not finish (a crash, a database outage)."""
        bot = self.application.bot
        try:
            kept = await polled_updates.unhandled(self.pool, bot.id)
        except StoreError:
            return  # still down: polling goes on, and tells who writes meanwhile
        self._replay_due = False
        for payload in kept:
            if payload["update_id"] not in self._handling:
                log.info("handling update %s from the inbox", payload["update_id"])
                self._handle(Update.de_json(payload, bot))

    def _handle(self, update: Update) -> None:
        self._handling.add(update.update_id)
        if len(self._handling) >= BATCH:
            self._room.clear()
        self.application.create_task(self._handled(update), name=f"courier-update-{update.update_id}")

    async def _handled(self, update: Update) -> None:
        try:
            if await self.process(update):
                await self._mark_handled(update.update_id)
            else:
                self._replay_due = True
        except StoreError:
            self._replay_due = True
        finally:
            self._handling.discard(update.update_id)
            if len(self._handling) < BATCH:
                self._room.set()

    async def _mark_handled(self, update_id: int) -> None:
        """Mark ``update_id`` handled in the inbox, with all that were handled meanwhile: one UPDATE
        for a burst of them, not one each. Returns once that UPDATE is done (by this call or another).
        If it fails, each of their calls raises StoreError: they stay unhandled in the inbox and are
        handled again (``_replay``), queueing nothing twice."""
        self._unmarked.add(update_id)
        async with self._marking:
            if update_id in self._not_marked:  # went with an earlier one's UPDATE, which failed
                self._not_marked.discard(update_id)
                raise StoreError("marking updates handled failed")
            if update_id not in self._unmarked:  # went with an earlier one's UPDATE
                return
            marking, self._unmarked = self._unmarked, set()
            try:
                await polled_updates.handled(self.pool, self.application.bot.id, sorted(marking))
            except StoreError:
                self._not_marked |= marking - {update_id}
                raise
