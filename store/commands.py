"""Bot commands: a name bound to an API-format ComfyUI workflow, shipped (seed) or published."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .db import Db, Queries, acquire

query = Queries(__name__)

NAME = re.compile(r"[a-z0-9_]{1,32}")  # what Telegram accepts as a bot command


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    workflow: dict[str, Any]
    owner: str | None
    enabled: bool
    source: str  # 'seed' | 'published'
    created_at: datetime
    updated_at: datetime
    defaults: str = ""  # options an admin set for everyone ("--model sdxl"), under each user's own


_FIELDS = tuple(field.name for field in dataclasses.fields(Command))


def check_name(name: str) -> str:
    """``name`` if it is a valid command name, else ValueError."""
    if not NAME.fullmatch(name):
        raise ValueError(f"bad command name {name!r}: use 1 to 32 of a-z, 0-9 and _")
    return name


async def put_command(db: Db, name: str, *, workflow: dict[str, Any], description: str = "",
                      owner: str | None = None) -> Command:
    """Publish a command, replacing any of that name (its enabled flag is kept)."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("put_command"), check_name(name), description, workflow,
                                  owner, "published")
    return Command(**row)


async def seed_command(db: Db, name: str, *, workflow: dict[str, Any], description: str = "",
                       owner: str | None = None) -> Command | None:
    """Add or refresh a shipped command; None when it is unchanged or a published one holds the name."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("seed_command"), check_name(name), description, workflow, owner)
    return None if row is None else Command(**row)


async def get_command(db: Db, name: str) -> Command | None:
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("get_command"), name)
    return None if row is None else Command(**row)


async def get_command_for_user(db: Db, name: str, user_id: int) -> tuple[Command | None, str]:
    """Command ``name`` (None if there is none) and ``user_id``'s default options ("" if none): what
    a typed command needs, in one round trip."""
    async with acquire(db) as conn:
        return command_for_user(await conn.fetchrow(query("get_command_for_user"), name, user_id))


def command_for_user(row) -> tuple[Command | None, str]:
    """(the command, the user's default options) of a row with the command's columns (all NULL: no
    such command) and ``user_options``."""
    command = None if row["name"] is None else Command(**{name: row[name] for name in _FIELDS})
    return command, row["user_options"] or ""


async def set_command_defaults(db: Db, name: str, options: str) -> bool:
    """Keep ``options`` as command ``name``'s defaults for everyone ("" clears them); False if there is
    no such command."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("set_command_defaults"), name, options) is not None


async def list_commands(db: Db, *, enabled_only: bool = False) -> list[Command]:
    async with acquire(db) as conn:
        return [Command(**row) for row in await conn.fetch(query("list_commands"), enabled_only)]


async def node_types(db: Db) -> set[str]:
    """The ``class_type`` of every node of every stored command."""
    async with acquire(db) as conn:
        return {row["class_type"] for row in await conn.fetch(query("command_node_types"))}


async def set_command_enabled(db: Db, name: str, enabled: bool) -> Command | None:
    """None if there is no such command."""
    async with acquire(db) as conn:
        row = await conn.fetchrow(query("set_command_enabled"), name, enabled)
    return None if row is None else Command(**row)


async def delete_command(db: Db, name: str) -> bool:
    async with acquire(db) as conn:
        return await conn.fetchval(query("delete_command"), name) is not None
