"""Chat sessions: the last outputs a user got in a chat, so the next command can use them.

An output is a dict ``{kind: "image"|"video", file_id, filename, subfolder, type, job_id}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .db import Db, acquire, query


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
