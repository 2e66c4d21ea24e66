"""Inline mode's search: a user's own results, by the words of their command lines (``inline_results``).

Only reads: an inline query writes nothing, so a stranger's leaves no row (the gatekeeper turns them
away before this is asked anyway).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .db import Db, Queries, acquire

query = Queries(__name__)


class Result(NamedTuple):
    """One file a job sent: its delivery's record (``kind``, ``file_id``, ``filename``...) and what made it."""

    job_id: int
    position: int
    command: str
    prompt: str
    output: dict[str, Any]


async def search(db: Db, user_id: int, words: list[str], limit: int, offset: int) -> list[Result]:
    """``user_id``'s results whose command line has all of ``words``, newest first: ``limit`` from ``offset``."""
    async with acquire(db) as conn:
        rows = await conn.fetch(query("inline_results"), user_id, words, limit, offset)
    return [Result(row["job_id"], row["position"], row["command"], row["prompt"], row["output"]) for row in rows]
