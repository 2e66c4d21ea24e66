"""One Bot API send, retried while it failed for sure, its errors told apart for ``jobs/``.

A send failed for sure when Telegram answered an error (a 5xx, a 429) or the request never
left (connection refused, no connection from the pool): it is retried with backoff, as the
caller's ``Patience`` says (``jobs.ports``, the one retry policy of chat requests: ``QUICK`` by
default), and is ``ChatUnavailable`` once that is spent. A timeout after the request went out is an
unknown outcome (Telegram may have acted on it): sending again could duplicate the message, so it
is ``DeliveryUnconfirmed``, never retried, unless the call is ``idempotent`` (an edit: doing it
twice shows the same). A refusal (400, a blocked bot's 403, a 413) is final at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx
from telegram.error import (
    BadRequest,
    Forbidden,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from ..core.logs import get_logger
from ..jobs.ports import (
    QUICK,
    ChatBlocked,
    ChatUnavailable,
    DeliveryFailed,
    DeliveryUnconfirmed,
    Patience,
    UploadTooLarge,
)

log = get_logger("sending")

T = TypeVar("T")

TOO_LARGE = "Request Entity Too Large"
"""How a 413 reads in PTB's NetworkError: the Bot API's front end refused the upload's size."""
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Causes of a NetworkError or TimedOut that prove the request never reached Telegram."""


async def send(call: Callable[[], Awaitable[T]], what: str, patience: Patience = QUICK, *,
               idempotent: bool = False) -> T:
    """``await call()`` until Telegram takes it; ``what`` names it in the log.

    The waits between tries (a 429's ``retry_after`` where longer) add up to ``patience.total_s``
    at most, counted by the policy's backoff, so ``QUICK`` always makes 4 tries.

    :raises ChatBlocked: 403, the user blocked the bot.
    :raises UploadTooLarge: refused for its size (413).
    :raises DeliveryFailed: refused (400).
    :raises ChatUnavailable: still failing once ``patience`` is spent.
    :raises DeliveryUnconfirmed: the answer was lost.
    """
    tries, waited_s = 1, 0.0
    while True:
        retry_after_s = None
        try:
            return await call()
        except Forbidden as exc:
            raise ChatBlocked(str(exc)) from exc
        except BadRequest as exc:  # a retry cannot help
            raise DeliveryFailed(str(exc)) from exc
        except TimedOut as exc:
            if not idempotent and not isinstance(exc.__cause__, NOT_SENT):
                raise DeliveryUnconfirmed(str(exc)) from exc
            error = exc
        except RetryAfter as exc:
            error, retry_after_s = exc, float(exc.retry_after if isinstance(exc.retry_after, int | float)
                                              else exc.retry_after.total_seconds())
        except NetworkError as exc:  # Telegram answered an error (5xx, 413), or the connection failed
            if TOO_LARGE in str(exc):  # a retry cannot help
                raise UploadTooLarge(str(exc)) from exc
            error = exc
        except TelegramError as exc:
            raise DeliveryFailed(str(exc)) from exc
        backoff_s = patience.wait_s(tries)
        if waited_s + backoff_s > patience.total_s:
            raise ChatUnavailable(str(error), retry_after_s) from error
        wait_s = patience.wait_s(tries, retry_after_s)
        log.info("%s failed (%s), try %d in %.1f s", what, error, tries + 1, wait_s)
        await asyncio.sleep(wait_s)
        tries, waited_s = tries + 1, waited_s + backoff_s
