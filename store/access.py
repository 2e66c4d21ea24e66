"""Access control in PostgreSQL: who is let in (allowlist, ``/allow``, bans, the first admin's owner code),
quota counters, pending confirmations."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from .commands import Command, command_for_user
from .db import Db, Grouped, Queries, acquire

query = Queries(__name__)


class Admission(NamedTuple):
    banned: bool
    allowed: bool  # by the settings (ids, usernames, everyone) or by /allow
    language: str | None  # chosen with /lang; None: none chosen
    admin: bool  # made an admin in PostgreSQL (an owner code), beside COURIER_ADMIN_USERS
    owner_wanted: bool  # owner codes are pending: the bot has no admin in PostgreSQL yet
    command: tuple[Command | None, str] | None = None
    """The command ``admit`` was asked about (None if there is none) and the user's default options."""


async def admit(db: Db, user_id: int, username: str | None, allowed_ids: list[int],
                allowed_names: list[str], everyone: bool, command: str | None = None) -> Admission:
    """Whether the user may come in; binds an allowed ``@username`` to the first id that brings it.

    ``username`` and ``allowed_names`` are lower case, without ``@``. Also records the current
    username of a user let in, for ``/ban @username`` (a refused one leaves no row), and reads the
    language they chose and whether they are a stored admin: everything an update needs to know
    about its sender before the handlers, in one query; with ``command``, that command as well, as
    ``commands.get_command_for_user`` reads it. The senders of updates handled at once are admitted
    together (``db.Grouped``: a batch of updates, one statement).
    """
    return await _admissions.call(db, (user_id, username, command, tuple(allowed_ids), tuple(allowed_names),
                                       everyone))


async def _admit_all(db: Db, asked: list[tuple]) -> list[Admission]:
    """One statement for each settings (allowed ids, names, everyone: one, but for several bots on
    one pool) among ``asked`` (each the user, username and command first), in their order."""
    admissions: list[Admission | None] = [None] * len(asked)
    async with acquire(db) as conn:
        for settings in dict.fromkeys(entry[3:] for entry in asked):
            indices = [index for index, entry in enumerate(asked) if entry[3:] == settings]
            users, usernames, commands = zip(*(asked[index][:3] for index in indices), strict=True)
            rows = await conn.fetch(*query.bind(
                "admit_users", users=list(users), usernames=list(usernames), commands=list(commands),
                allowed_ids=list(settings[0]), allowed_names=list(settings[1]), everyone=settings[2]))
            for index, row in zip(indices, rows, strict=True):
                admissions[index] = Admission(row["banned"], row["allowed"], row["language"], row["admin"],
                                              row["owner_wanted"],
                                              command_for_user(row) if asked[index][2] is not None else None)
    return admissions


_admissions = Grouped(_admit_all, user=lambda asked: asked[0])


async def may_receive(db: Db, user_id: int, allowed_ids: list[int], allowed_names: list[str],
                      everyone: bool) -> bool:
    """Whether ``admit`` would let the user in, not banned (a stored admin always), asked without
    writing anything: for a chat id typed into the graph editor, which brings no username."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("may_receive"), user_id, allowed_ids, allowed_names, everyone)


async def set_allowed(db: Db, user_id: int, allowed: bool) -> bool:
    """``/allow`` or ``/disallow``; False when a disallowed user had not been let in by ``/allow``."""
    async with acquire(db) as conn:
        if allowed:
            await conn.execute(query("allow_user"), user_id)
            return True
        return await conn.fetchval(query("disallow_user"), user_id) is not None


async def stored_admins(db: Db) -> list[int]:
    async with acquire(db) as conn:
        return [row["user_id"] for row in await conn.fetch(query("stored_admins"))]


def owner_code_hash(code: str) -> bytes:
    return hashlib.sha256(code.encode()).digest()


async def add_owner_code(db: Db, code: str) -> bool:
    """Keep ``code`` (its hash) as a way to the first admin; False (not kept) if the bot has one."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("add_owner_code"), owner_code_hash(code)) is not None


async def claim_owner(db: Db, user_id: int, code: str) -> bool:
    """Make ``user_id`` the first admin if ``code`` is a pending owner code, spending them all.

    Each pending hash is compared in constant time, every one of them, so that the time taken
    tells nothing of how close a guess came. Claims are serialized by the codes' row locks: one
    code makes one admin, across hosts.
    """
    wanted = owner_code_hash(code)
    async with acquire(db) as conn, conn.transaction():
        pending = await conn.fetch(query("lock_owner_codes"))
        matched = False
        for row in pending:
            matched |= hmac.compare_digest(row["code_hash"], wanted)
        return matched and await conn.fetchval(query("make_owner"), user_id) is not None


async def user_by_username(db: Db, username: str) -> int | None:
    """The id of the user last seen as ``@username`` (lower case, no ``@``); None if nobody was."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("user_by_username"), username)


async def set_banned(db: Db, user_id: int, banned: bool) -> None:
    async with acquire(db) as conn:
        await conn.execute(query("set_banned"), user_id, banned)


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
        await conn.execute(*query.bind("put_pending_action", token=token, user_id=user_id, chat_id=chat_id,
                                       action=action, payload=payload, valid_s=float(valid_s)))


async def pending_action_user(db: Db, token: str) -> int | None:
    """The user a pending action that is still valid was made for; None if there is none."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("pending_action_user"), token)


async def take_pending_action(db: Db, token: str, *, user_id: int, action: str) -> PendingAction | None:
    """The pending ``action`` behind ``token``, removed; None if it is not ``user_id``'s, used or expired."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("take_pending_action"), token, user_id, action)
    return None if row is None else PendingAction(**row)
