"""The webhook secret a bot registers with Telegram when the operator set none (see
0010_webhook_secret.sql)."""

from __future__ import annotations

import secrets

from .db import Db, Queries, acquire

query = Queries(__name__)


async def webhook_secret(db: Db, bot_id: int) -> str:
    """Bot ``bot_id``'s secret: made (``secrets.token_urlsafe(32)``) by the first caller, the same for every later
    one, on any host of the database."""
    async with acquire(db) as conn:
        return await conn.fetchval(query("webhook_secret"), bot_id, secrets.token_urlsafe(32))
