"""Waiting on a condition that nothing signals (a database row, another process), with a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until(check: Callable[[], Awaitable[T]], timeout: float, what: str, every: float = 0.2) -> T:
    """``await check()`` every ``every`` seconds until it is truthy; its value. AssertionError at ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := await check()):
        if loop.time() > deadline:
            raise AssertionError(f"no {what} after {timeout:.0f} s")
        await asyncio.sleep(every)
    return value


async def job_rows(pool) -> list:
    """Every job row, oldest first: id, user_id, status, attempts, worker, backend, error."""
    async with pool.acquire() as conn:
        return await conn.fetch("SELECT id, user_id, status, attempts, worker, backend, error, status_message_id "
                                "FROM courier_jobs ORDER BY id")
