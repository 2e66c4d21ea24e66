"""Group chats end to end: python-telegram-bot ⇄ Bot API emulator (a supergroup, privacy mode on), real
PostgreSQL, and a real ComfyUI where the pictures matter (the fake one, held, where jobs must wait).

Two members share a group: each command is answered in the group, threaded to its sender's message;
chaining takes the picture replied to, else the sender's own last result, never another member's;
/cancel, /forget, /settings and /lang act for the sender only, and their buttons answer only them.
"""

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import replies_to, running_courier
from comfyui_courier.tests.support.polling import job_rows, until
from comfyui_courier.tests.support.requires import require_comfyui

GROUP = -1001987654321
ANNA, BORIS, CARL = 111, 222, 333
JOB_TIMEOUT_S = 120


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


def courier_on(botapi, botapi_bot, pg_database, backend_url, data_dir):
    for user_id, name in ((ANNA, "Anna"), (BORIS, "Boris"), (CARL, "Carl")):
        botapi.add_user(user_id, name)
    return running_courier(botapi, botapi_bot, pg_database, backend_url, data_dir,
                           COURIER_ALLOWED_USERS=f"{ANNA},{BORIS},{CARL}")


def in_group(call) -> bool:
    return isinstance(call.result, dict) and call.result.get("chat", {}).get("id") == GROUP


async def reply(bot, request: dict, method: str = "sendMessage", timeout: float = 10):
    """The bot's first ``method`` call in the group that replies to ``request``."""
    try:
        return await bot.wait_for_call(method, where=lambda c: in_group(c) and replies_to(request)(c), timeout=timeout)
    except TimeoutError:
        said = [(c.method, c.params.get("text")) for c in bot.outbox]
        raise AssertionError(f"no {method} in reply to {request.get('text')!r}; the bot did {said}") from None


async def jobs_by_user(courier) -> list[tuple[int, dict]]:
    async with courier.store.pool.acquire() as conn:
        return [(row["user_id"], row["params"])
                for row in await conn.fetch("SELECT user_id, params FROM courier_jobs ORDER BY id")]


async def test_members_get_their_own_results_threaded_and_chain_on_their_own(
        botapi, botapi_bot, pg_database, tmp_path, request):
    require_comfyui()
    comfyui = request.getfixturevalue("comfyui")
    name = botapi_bot.user["username"]
    async with courier_on(botapi, botapi_bot, pg_database, comfyui.url, tmp_path) as courier:
        fox = botapi_bot.inject_group_text(GROUP, ANNA, f"/demo@{name} a fox")
        cat = botapi_bot.inject_group_text(GROUP, BORIS, "/demo a cat")
        fox_file = await reply(botapi_bot, fox, "sendDocument", JOB_TIMEOUT_S)
        cat_file = await reply(botapi_bot, cat, "sendDocument", JOB_TIMEOUT_S)
        assert fox_file.result["document"]["file_id"] != cat_file.result["document"]["file_id"]
        # any statuses (a job done within a moment has none; the group's one queue message may be among
        # them) sit in the group, under a sender's message
        statuses = [c for c in botapi_bot.outbox if in_group(c) and c.method == "sendMessage"]
        assert all(c.params["text"].startswith(("Queued /demo", "Rendering /demo", "Done")) for c in statuses)
        assert all(replies_to(fox)(c) or replies_to(cat)(c) for c in statuses), [c.params for c in statuses]
        fox_photo = await botapi_bot.wait_for_call("sendPhoto", where=lambda c: in_group(c) and (
            c.result["reply_to_message"]["message_id"] == fox_file.result["message_id"]), timeout=JOB_TIMEOUT_S)

        own = botapi_bot.inject_group_text(GROUP, ANNA, "/demoedit")  # no reply: Anna's last result
        borrowed = botapi_bot.inject_group_text(GROUP, BORIS, f"/demoedit@{name}",
                                                reply_to=fox_photo.result["message_id"])  # replied to: that one
        stranger = botapi_bot.inject_group_text(GROUP, CARL, "/demoedit")  # no result of his own
        assert (await reply(botapi_bot, stranger)).params["text"] == en("needs_image", name="demoedit")
        await reply(botapi_bot, own, "sendDocument", JOB_TIMEOUT_S)
        await reply(botapi_bot, borrowed, "sendDocument", JOB_TIMEOUT_S)
        edits = {user_id: params["image_file_id"] for user_id, params in await jobs_by_user(courier)
                 if params["image_file_id"]}
        assert edits == {ANNA: fox_file.result["document"]["file_id"],
                         BORIS: fox_photo.result["photo"][-1]["file_id"]}
        assert len(await job_rows(courier.store.pool)) == 4  # Carl queued nothing


@pytest.fixture
async def held(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    fake_comfy.pause()  # jobs wait in the queue until the test lets them run
    async with courier_on(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path) as courier:
        yield courier
        fake_comfy.resume()


async def test_cancel_forget_settings_and_lang_act_for_the_sender_only(held, botapi_bot, fake_comfy):
    name = botapi_bot.user["username"]
    say = botapi_bot.inject_group_text
    say(GROUP, ANNA, "/demo mine")
    say(GROUP, BORIS, "/demo his")

    async def both_queued() -> bool:  # the group's one queue message answers them both
        return len(await job_rows(held.store.pool)) == 2

    await until(both_queued, 30, "both jobs queued")
    cancel = say(GROUP, BORIS, f"/cancel@{name}")
    assert (await reply(botapi_bot, cancel)).params["text"] == i18n.ntext("en", "cancelled", 1)
    by_user = {row["user_id"]: row["status"] for row in await job_rows(held.store.pool)}
    assert by_user == {ANNA: by_user[ANNA], BORIS: "cancelled"} and by_user[ANNA] in ("queued", "running")

    forget = say(GROUP, BORIS, "/forget")
    confirmation = await reply(botapi_bot, forget)
    [[button]] = confirmation.params["reply_markup"]["inline_keyboard"]
    press = botapi_bot.inject_callback_query(GROUP, confirmation.result["message_id"], button["callback_data"],
                                             presser=ANNA)  # everyone in the group sees the button
    answer = await botapi_bot.wait_for_call("answerCallbackQuery",
                                            where=lambda c: c.params["callback_query_id"] == press["id"])
    assert answer.params["text"] == en("forget_stale")
    assert {row["user_id"] for row in await job_rows(held.store.pool)} == {ANNA, BORIS}  # nobody forgotten

    settings = say(GROUP, ANNA, "/settings --ar 2:1")
    assert (await reply(botapi_bot, settings)).params["text"] == "Saved. Your default options: --ar 2:1"
    assert (await reply(botapi_bot, say(GROUP, BORIS, "/settings"))).params["text"] == en("settings_none")
    assert (await reply(botapi_bot, say(GROUP, ANNA, f"/lang@{name} de"))).params["text"] == \
        i18n.text("de", "lang_set")
    assert (await reply(botapi_bot, say(GROUP, BORIS, "/status"))).params["text"] == en("status_none")
    assert (await reply(botapi_bot, say(GROUP, ANNA, "/cancel"))).params["text"] == \
        i18n.ntext("de", "cancelled", 1)

    chatter = say(GROUP, ANNA, "thanks!", reply_to=confirmation.result["message_id"])  # reaches the bot, no command
    other_bot = say(GROUP, BORIS, "/status@another_bot")  # never reaches it
    last = say(GROUP, BORIS, "/quota")
    await reply(botapi_bot, last)
    await until(lambda: _no_job_left(held), 10, "no job left")
    assert not [c for c in botapi_bot.outbox if in_group(c) and (replies_to(chatter)(c) or replies_to(other_bot)(c))]


async def _no_job_left(courier):
    return all(row["status"] == "cancelled" for row in await job_rows(courier.store.pool))
