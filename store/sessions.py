"""Chat sessions: the last outputs a user got in a chat, so the next command can use them.

An output is a dict ``{kind: "image"|"video", file_id, filename, subfolder, type, job_id}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .db import Db, Queries, acquire

query = Queries(__name__)


@dataclass(frozen=True)
class ChatSession:
    chat_id: int
    user_id: int
    last_outputs: list[dict[str, Any]]
    updated_at: datetime


async def get_session(db: Db, chat_id: int, user_id: int) -> ChatSession | None:
    """The user's session in this chat; None before their first result there."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("get_session"), chat_id, user_id)
    return None if row is None else ChatSession(**row)


async def set_last_outputs(db: Db, chat_id: int, user_id: int, outputs: list[dict[str, Any]]) -> None:
    """Replace the user's last outputs in this chat (the user row must exist)."""
    async with acquire(db) as conn:
        await conn.execute(query("set_last_outputs"), chat_id, user_id, outputs)


@dataclass(frozen=True)
class SessionSummary:
    """One user's activity: chats with a session, jobs by status, when they last did anything."""

    user_id: int
    username: str | None
    first_name: str | None
    is_admin: bool
    chats: int
    queued: int
    running: int
    succeeded: int
    failed: int
    cancelled: int
    last_active_at: datetime | None


async def session_summaries(db: Db, *, limit: int = 100) -> list[SessionSummary]:
    """Users, most recently active first."""
    async with acquire(db) as conn:
        return [SessionSummary(**row) for row in await conn.fetch(query("session_summaries"), limit)]
