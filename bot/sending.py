"""One Bot API send, retried while it failed for sure, its errors told apart for ``jobs/``.

A send failed for sure when Telegram answered an error (a 5xx, a 429) or the request never
left (connection refused, no connection from the pool): it is retried with backoff. A timeout
after the request went out is an unknown outcome (Telegram may have acted on it): sending
again could duplicate the message, so it is ``DeliveryUnconfirmed``, never retried.
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

from ..jobs.ports import (
    ChatBlocked,
    DeliveryFailed,
    DeliveryUnconfirmed,
    UploadTooLarge,
)
from ..logs import get_logger

log = get_logger("sending")

T = TypeVar("T")

ATTEMPTS = 4
BACKOFF_S = (0.5, 1.0, 2.0)  # before the 2nd, 3rd and 4th attempt (a 429 waits its retry_after)
TOO_LARGE = "Request Entity Too Large"
"""How a 413 reads in PTB's NetworkError: the Bot API's front end refused the upload's size."""
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Causes of a NetworkError or TimedOut that prove the request never reached Telegram."""


async def send(call: Callable[[], Awaitable[T]], what: str) -> T:
    """``await call()`` until Telegram takes it; ``what`` names it in the log.

    :raises ChatBlocked: 403, the user blocked the bot.
    :raises UploadTooLarge: refused for its size (413).
    :raises DeliveryFailed: refused (400), or still failing after ``ATTEMPTS``.
    :raises DeliveryUnconfirmed: the answer was lost.
    """
    attempt = 1
    while True:
        try:
            return await call()
        except Forbidden as exc:
            raise ChatBlocked(str(exc)) from exc
        except BadRequest as exc:  # a retry cannot help
            raise DeliveryFailed(str(exc)) from exc
        except TimedOut as exc:
            if not isinstance(exc.__cause__, NOT_SENT):
                raise DeliveryUnconfirmed(str(exc)) from exc
            error, wait_s = exc, _backoff(attempt)
        except RetryAfter as exc:
            error, wait_s = exc, float(exc.retry_after if isinstance(exc.retry_after, int | float)
                                       else exc.retry_after.total_seconds())
        except NetworkError as exc:  # Telegram answered an error (5xx, 413), or the connection failed
            if TOO_LARGE in str(exc):  # a retry cannot help
                raise UploadTooLarge(str(exc)) from exc
            error, wait_s = exc, _backoff(attempt)
        except TelegramError as exc:
            raise DeliveryFailed(str(exc)) from exc
        if attempt == ATTEMPTS:
            raise DeliveryFailed(str(error)) from error
        log.info("%s failed (%s), try %d of %d in %.1f s", what, error, attempt + 1, ATTEMPTS, wait_s)
        await asyncio.sleep(wait_s)
        attempt += 1


def _backoff(attempt: int) -> float:
    return BACKOFF_S[min(attempt, len(BACKOFF_S)) - 1]
