"""A user's default options (/settings): kept as the text they would type, "--ar 16:9 --steps 4"."""

from __future__ import annotations

from .db import Db, Queries, acquire

query = Queries(__name__)


async def get_user_options(db: Db, user_id: int) -> str:
    """The user's default options; "" when they have none."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("get_user_options"), user_id) or ""


async def set_user_options(db: Db, user_id: int, options: str) -> None:
    """Keep ``options`` as the user's defaults ("" clears them); the user row is made if missing."""
    async with acquire(db) as conn, conn.transaction():
        if not options:
            await conn.execute(query("clear_user_options"), user_id)
            return
        await conn.execute(query("ensure_user"), user_id)
        await conn.execute(query("set_user_options"), user_id, options)
