"""Telegram users: who they are, whether they are admins, when they were last served, their language."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .db import Db, Queries, acquire

query = Queries(__name__)


@dataclass(frozen=True)
class User:
    user_id: int
    username: str | None
    first_name: str | None
    language_code: str | None
    is_admin: bool
    created_at: datetime
    last_served_at: datetime | None
    language: str | None  # chosen with /lang; None: language_code decides
    banned: bool  # /ban (store/access.py)
    allowed: bool  # /allow (store/access.py)


async def get_user(db: Db, user_id: int) -> User | None:
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("get_user"), user_id)
    return None if row is None else User(**row)


async def set_language(db: Db, user_id: int, language: str | None) -> None:
    """Store the user's chosen language (None: follow their Telegram language again)."""
    async with acquire(db) as conn:
        await conn.execute(query("set_language"), user_id, language)
