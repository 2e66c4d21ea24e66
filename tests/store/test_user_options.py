"""A user's default options in PostgreSQL: kept, replaced, cleared, and gone with /forget."""

from comfyui_courier.store.privacy import forget_user
from comfyui_courier.store.user_options import get_user_options, set_user_options
from comfyui_courier.store.users import get_user

USER, OTHER = 7, 8


async def test_options_are_kept_per_user_replaced_and_cleared(store):
    assert await get_user_options(store.pool, USER) == ""
    await set_user_options(store.pool, USER, "--ar 16:9 --steps 4")  # a user never seen before gets a row
    await set_user_options(store.pool, OTHER, "--n 2")
    assert (await get_user(store.pool, USER)) is not None
    await set_user_options(store.pool, USER, "--steps 5")
    assert await get_user_options(store.pool, USER) == "--steps 5"
    await set_user_options(store.pool, USER, "")
    assert await get_user_options(store.pool, USER) == ""
    assert await get_user_options(store.pool, OTHER) == "--n 2"


async def test_forget_deletes_the_user_s_options_only(store):
    await set_user_options(store.pool, USER, "--ar 2:1")
    await set_user_options(store.pool, OTHER, "--n 2")
    await forget_user(store.pool, USER)
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_user_options WHERE user_id = $1", USER) == 0
    assert await get_user_options(store.pool, OTHER) == "--n 2"
