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


async def test_admitting_a_commands_update_reads_the_command_and_the_users_options_as_the_lookup_does(store):
    from comfyui_courier.store import access, commands

    await commands.put_command(store.pool, "draw", workflow={"1": {"class_type": "X", "inputs": {}}})
    await set_user_options(store.pool, USER, "--steps 5")

    async def admitted(command):
        return (await access.admit(store.pool, USER, "u", [], [], True, command)).command

    assert await admitted("draw") == await commands.get_command_for_user(store.pool, "draw", USER)
    command, options = await admitted("draw")
    assert command.name == "draw" and command.workflow == {"1": {"class_type": "X", "inputs": {}}}
    assert options == "--steps 5"
    assert await admitted("nothing") == (None, "--steps 5")
    assert await admitted(None) is None  # an update that names no command reads none


async def test_senders_admitted_at_once_are_admitted_by_one_statement_each_by_its_rules(store):
    import asyncio

    from comfyui_courier.store import access

    def admit(user_id: int, username: str | None):
        return access.admit(store.pool, user_id, username, [11, 12, 13], ["dora"], False)

    admitted = await asyncio.gather(admit(11, "ann"), admit(12, None), admit(99, "stranger"), admit(14, "dora"),
                                    admit(13, "cyd"))
    assert [a.allowed for a in admitted] == [True, True, False, True, True]
    async with store.pool.acquire() as conn:
        rows = await conn.fetch("SELECT user_id, username, xmin::text AS xmin FROM courier_users ORDER BY user_id")
        bound = await conn.fetchval("SELECT user_id FROM courier_allowed_names WHERE username = 'dora'")
    assert [(row["user_id"], row["username"]) for row in rows] == [(11, "ann"), (12, None), (13, "cyd"), (14, "dora")]
    assert len({row["xmin"] for row in rows}) == 1, "the senders were not admitted by one statement"
    assert bound == 14  # the stranger left no row; the allowed username is bound to the id it came with
    assert not (await admit(15, "dora")).allowed  # and no longer lets in another
