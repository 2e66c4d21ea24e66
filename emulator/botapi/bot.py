"""One emulated bot: the account, what it holds, its test API, and the Bot API methods it answers.

``EmulatedBot`` is built in layers, one module per job, each class extending the one before:
``state.BotState`` (chats, messages, updates, files, calls), ``delivery.Delivery`` (long poll and
webhook), ``harness.Harness`` (what tests do: play users, inject faults, wait for calls); this
module adds ``handle``, which answers a request from ``methods``' tables, matching the name
case-insensitively as Telegram does. Each request becomes a ``Call`` in ``EmulatedBot.calls``
before it is answered, so tests see what the bot asked for even when the answer was an error or
never came, and a fault or an outage the harness set acts here, before the method runs.

Emulated: private chats with users (a user must have written to the bot
first, or sending fails with "chat not found", as in Telegram), text and
photo/document/video/animation/sticker messages, edits by the user, inline
keyboards, callback queries, inline mode (``inline``), edits (text, caption, media), deletions,
commands, getChat, getUpdates long polling and webhooks. Groups and supergroups: members' text and photos, which
reach the bot as privacy mode lets them (``sees_in_group``), anonymous group admins,
and channel posts. Not emulated: group membership, audio/voice, payments.
"""

from __future__ import annotations

import time

from .calls import Call
from .harness import Harness
from .methods import METHODS
from .wire import ApiError, Upload, decode_params, fault_error


class EmulatedBot(Harness):
    """A bot account on the emulator. Its Bot API is served over HTTP; the rest is the test API."""

    async def handle(self, method_name: str, args: dict[str, str], files: dict[str, Upload]) -> Call:
        """Runs one request, recording it as a Call; the Call says how to answer."""
        method = METHODS.get(method_name.lower())
        call = Call(method.name if method else method_name, decode_params(args), files,
                    outbound=bool(method and method.outbound))
        self.calls.append(call)
        self.emulator.changed()
        down = bool(method and method.outbound and self._outage and time.monotonic() < self._outage[0])
        fault = None if down else self._take_fault(method_name.lower())  # a fault waits for the outage's end
        try:
            if down:
                if self._outage[1]:
                    await self._hang()
                raise fault_error(502, None, None)
            if fault and fault.released is not None:
                await fault.released.wait()
                fault = None
            if fault and fault.error:
                raise fault.error
            if self.flood_limits and (flooded := self.flood_limits.admit(call.method, call.params, call.received_at)):
                raise flooded
            if method is None:
                raise ApiError(404, "Not Found")
            if fault and not fault.perform:
                await self._hang()
            result = await method.handler(self, call)
            if fault:  # performed, but the answer is lost
                await self._hang()
            call.status, call.result = 200, result
        except ApiError as error:
            call.status, call.failure = error.status, error
        finally:
            self.emulator.changed()
        return call
