"""Access control in PostgreSQL: who is let in (allowlist, bans), quota counters, pending confirmations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from .db import Db, acquire, query


class Admission(NamedTuple):
    banned: bool
    allowed: bool  # by the allowlist (always, when it is empty)
    language: str | None  # chosen with /lang; None: none chosen


async def admit(db: Db, user_id: int, username: str | None, allowed_ids: list[int],
                allowed_names: list[str]) -> Admission:
    """Whether the user may come in; binds an allowed ``@username`` to the first id that brings it.

    ``username`` and ``allowed_names`` are lower case, without ``@``. Also records the user's
    current username, for ``/ban @username``, and reads the language they chose: everything an
    update needs to know about its sender before the handlers, in one query.
    """
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("admit_user"), user_id, username, allowed_ids, allowed_names)
    return Admission(row["banned"], row["allowed"], row["language"])


async def user_by_username(db: Db, username: str) -> int | None:
    """The id of the user last seen as ``@username`` (lower case, no ``@``); None if nobody was."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("user_by_username"), username)


async def set_banned(db: Db, user_id: int, banned: bool) -> None:
    async with acquire(db) as conn:
        await conn.execute(query("set_banned"), user_id, banned)


async def take_quota(db: Db, user_id: int, per_hour: int, per_day: int) -> str | None:
    """Count one job against the user's quota: None, or ``"hour"``/``"day"``, the quota that is spent.

    Call it in the job insert's transaction, after the user's row exists (``courier_take_quota``).
    """
    async with acquire(db) as conn:
        return await conn.fetchval(query("take_quota"), user_id, per_hour, per_day)


@dataclass(frozen=True)
class QuotaUsage:
    hour: int  # jobs counted in the last hour
    day: int  # ... and in the last 24 hours
    hour_frees_at: datetime | None  # when the oldest of the hour leaves it; None: none counted
    day_frees_at: datetime | None


async def quota_usage(db: Db, user_id: int) -> QuotaUsage:
    async with acquire(db) as conn:
        return QuotaUsage(**await conn.fetchrow(query("quota_usage"), user_id))


@dataclass(frozen=True)
class PendingAction:
    token: str
    user_id: int
    chat_id: int
    action: str
    payload: dict[str, Any]
    created_at: datetime
    expires_at: datetime


async def put_pending_action(db: Db, token: str, *, user_id: int, chat_id: int, action: str,
                             payload: dict[str, Any], valid_s: float) -> None:
    """Remember what a button will do, for whom, for ``valid_s`` seconds (it outlives a restart)."""
    async with acquire(db) as conn:
        await conn.execute(query("put_pending_action"), token, user_id, chat_id, action, payload, float(valid_s))


async def pending_action_user(db: Db, token: str) -> int | None:
    """The user a pending action that is still valid was made for; None if there is none."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("pending_action_user"), token)


async def take_pending_action(db: Db, token: str, *, user_id: int, action: str) -> PendingAction | None:
    """The pending ``action`` behind ``token``, removed; None if it is not ``user_id``'s, used or expired."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("take_pending_action"), token, user_id, action)
    return None if row is None else PendingAction(**row)
