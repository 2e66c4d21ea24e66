"""Users made the short way for tests: a row with a profile, an admin flag. In production a user row
comes from the statement that admits or queues (``courier_admit_v1``, ``courier_submit_v1``) and an
admin from ``COURIER_ADMIN_USERS`` or an owner code (``store/access.py``)."""

from __future__ import annotations

from comfyui_courier.store.users import User

UPSERT = """
INSERT INTO courier_users (user_id, username, first_name, language_code)
VALUES ($1, $2, $3, $4)
ON CONFLICT (user_id) DO UPDATE
SET username = EXCLUDED.username,
    first_name = EXCLUDED.first_name,
    language_code = EXCLUDED.language_code
RETURNING *"""


async def upsert_user(pool, user_id: int, username: str | None = None, first_name: str | None = None,
                      language_code: str | None = None) -> User:
    """Create the user or refresh their Telegram profile fields."""
    return User(**await pool.fetchrow(UPSERT, user_id, username, first_name, language_code))


async def set_admin(pool, user_id: int, is_admin: bool) -> User | None:
    """Grant or revoke admin; None if the user is unknown."""
    row = await pool.fetchrow("UPDATE courier_users SET is_admin = $2 WHERE user_id = $1 RETURNING *",
                              user_id, is_admin)
    return None if row is None else User(**row)
