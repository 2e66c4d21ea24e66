"""Editor-proof nonces spent, on every host of the database (see 0018_editor_nonces.sql)."""

from __future__ import annotations

from .db import Db, Queries, acquire

query = Queries(__name__)


async def spend(db: Db, nonce: str, node_id: str, until: float) -> bool:
    """Whether ``nonce`` is spent now for Telegram Output node ``node_id``: False if it was before, on
    any host, before any restart. It stays spent until ``until`` (epoch seconds)."""
    async with acquire(db) as conn:
        return bool(await conn.fetchval(query("spend_editor_nonce"), nonce, node_id, until))
