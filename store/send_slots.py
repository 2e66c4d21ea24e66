"""The slots of Telegram's overall limit that the hosts of one bot share (see 0013_send_slots.sql)."""

from __future__ import annotations

from .db import Db, Queries, acquire

query = Queries(__name__)


async def take(db: Db, bot_key: bytes, wanted: int, limit: int, period_s: float, *, open_s: float, poll_s: float,
               answered: list[tuple[int, float]]) -> tuple[list[int], float]:
    """Reports ``answered`` (slot id, seconds since its answer), then takes up to ``wanted`` of ``limit`` slots
    in any ``period_s`` seconds for bot ``bot_key`` (a hash of its token): the new slots' ids, and when
    fewer than ``wanted``, the seconds until asking again is worth it.

    :raises StoreError: the database did not answer
    """
    async with acquire(db) as conn:
        row = await conn.fetchrow(*query.bind(
            "take_send_slots", bot_key=bot_key, wanted=wanted, limit=limit, period_ms=_ms(period_s),
            open_ms=_ms(open_s), poll_ms=_ms(poll_s), answered=[slot for slot, _ in answered],
            answered_ago_ms=[_ms(ago) for _, ago in answered]))
    return list(row["slots"]), row["wait_ms"] / 1000


def _ms(seconds: float) -> int:
    return round(seconds * 1000)
