"""The polling inbox: updates kept from before their offset is confirmed until they are handled
(see 0009_polled_updates.sql)."""

from __future__ import annotations

import json
from typing import Any

from .db import Db, Queries, acquire

query = Queries(__name__)


async def keep(db: Db, bot_id: int, updates: list[tuple[int, str]]) -> set[int]:
    """Commit ``updates`` (each one's id and JSON), in one statement; the ids of those not kept before."""
    ids, payloads = [update_id for update_id, _ in updates], [payload for _, payload in updates]
    async with acquire(db) as conn:
        return {row["update_id"] for row in await conn.fetch(query("keep_polled_updates"), bot_id, ids, payloads)}


async def unhandled(db: Db, bot_id: int) -> list[dict[str, Any]]:
    """The kept updates whose handlers have not finished, oldest first."""
    async with acquire(db) as conn:
        return [json.loads(row["payload"]) for row in await conn.fetch(query("unhandled_polled_updates"), bot_id)]


async def handled(db: Db, bot_id: int, update_ids: list[int]) -> None:
    async with acquire(db) as conn:
        await conn.execute(query("polled_updates_handled"), bot_id, update_ids)


async def forget_old(db: Db) -> None:
    """Drop handled updates Telegram no longer keeps either."""
    async with acquire(db) as conn:
        await conn.execute(query("forget_old_polled_updates"))
