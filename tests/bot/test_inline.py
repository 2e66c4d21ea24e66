"""Inline mode end to end: python-telegram-bot ⇄ Bot API emulator (``inline``), real PostgreSQL.

The results are mostly jobs that succeeded, written as the dispatcher writes them, whose files the
emulator keeps: inline mode only reads them, so no backend need render them; the last test has a
real ComfyUI render one and its delivery record it.
"""

import json
import logging

import pytest

from comfyui_courier.bot import inline as bot_inline
from comfyui_courier.bot.keyboards import result_keyboard
from comfyui_courier.core import i18n
from comfyui_courier.emulator.botapi import inline
from comfyui_courier.tests.emulator.test_botapi import gif, mp4_header
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tests.support.requires import require_comfyui

USER, OTHER, STRANGER, FRIEND = 111, 222, 333, 444


@pytest.fixture
async def fake():
    async with FakeComfyUI(steps=0) as server:
        yield server


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, fake, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER},{OTHER}") as service:
        yield service


async def sql(courier, statement: str, *args):
    async with courier.store.pool.acquire() as conn:
        return await conn.fetch(statement, *args)


async def result(courier, bot, user_id: int, prompt: str, filename: str = "courier_00001_.png",
                 data: bytes | None = None) -> int:
    """A succeeded /img job of ``user_id`` whose one file (a document the emulator keeps) reached the chat,
    recorded as the job's runner records it (``courier_deliveries``)."""
    document = bot.inject_document(user_id, data or f"{user_id} {prompt}".encode(), filename,
                                   mime_type="image/png")["document"]
    record = {"kind": "image", "file_id": document["file_id"], "filename": filename, "message_ids": [1]}
    await sql(courier, "INSERT INTO courier_users (user_id, allowed) VALUES ($1, true) ON CONFLICT DO NOTHING",
              user_id)
    [row] = await sql(courier, "INSERT INTO courier_jobs (user_id, chat_id, command, params, status, result) "
                               "VALUES ($1, $1, 'img', $2, 'succeeded', $3) RETURNING id", user_id,
                      {"prompt": prompt, "options": "--steps 4"}, {"outputs": [record]})
    await sql(courier, "INSERT INTO courier_deliveries (job_id, output, status, record) VALUES ($1, '9:0', 'sent', $2)",
              row["id"], record)
    return row["id"]


async def ask(bot, user_id: int, query: str = "", offset: str = "") -> tuple[dict, dict]:
    """The user types ``@bot query``: (the bot's answer, checked by the emulator, as accepted; the query)."""
    asked = inline.inject_inline_query(bot, user_id, query, offset)
    call = await inline.answer_of(bot, asked["id"])
    assert call.ok, call.failure
    return bot.inline_queries[asked["id"]]["answer"], asked


def jobs_of(answer: dict) -> list[int]:
    return [int(r["id"].partition("-")[0]) for r in answer["results"]]


async def test_a_users_results_are_theirs_only_by_words_newest_first_paged_and_posted_via_the_bot(
        botapi_bot, courier):
    cats = [await result(courier, botapi_bot, USER, f"a red cat {n}") for n in range(bot_inline.PAGE + 1)]
    dog = await result(courier, botapi_bot, USER, "a blue DOG")
    others = await result(courier, botapi_bot, OTHER, "a red cat")

    first, _ = await ask(botapi_bot, USER)
    assert first["is_personal"] and jobs_of(first) == [dog, *reversed(cats)][:bot_inline.PAGE]
    assert first["next_offset"] == str(bot_inline.PAGE)
    rest, _ = await ask(botapi_bot, USER, offset=first["next_offset"])
    assert jobs_of(rest) == [cats[1], cats[0]] and rest["next_offset"] == ""

    found, asked = await ask(botapi_bot, USER, "dog BLUE")
    assert jobs_of(found) == [dog]
    assert found["results"][0]["type"] == "document" and "blue DOG" in found["results"][0]["title"]
    assert jobs_of((await ask(botapi_bot, OTHER, "cat"))[0]) == [others]
    assert jobs_of((await ask(botapi_bot, USER, "cat 20"))[0]) == [cats[20]]

    posted = inline.choose(botapi_bot, USER, asked["id"], found["results"][0]["id"], FRIEND)
    assert posted["via_bot"]["id"] == botapi_bot.id and posted["from"]["id"] == USER
    assert posted["document"]["file_id"] == found["results"][0]["document_file_id"]
    assert botapi_bot.history(FRIEND) == [posted]

    hint = i18n.text("en", "hint_media")
    await botapi_bot.emulator.wait_for(lambda: hints(botapi_bot, hint) == len(cats) + 1, timeout=60)  # one an upload
    inline.choose(botapi_bot, USER, asked["id"], found["results"][0]["id"], USER)  # in the bot's own chat
    botapi_bot.inject_text(USER, "/status")
    await botapi_bot.wait_for_call("sendMessage", where=lambda c: c.params["text"] == i18n.text("en", "status_none"))
    assert hints(botapi_bot, hint) == len(cats) + 1  # the result the user posted there asks for nothing


def hints(bot, hint: str) -> int:
    return sum(c.method == "sendMessage" and c.params["text"] == hint and c.params["chat_id"] == USER
               for c in bot.outbox)


async def test_a_video_and_a_gif_are_listed_as_what_they_were_sent_as(botapi_bot, courier):
    """The delivery sent a video with sendVideo and a GIF with sendAnimation: their file ids are of those kinds."""
    bot = courier.bot.application.bot
    botapi_bot.inject_text(USER, "hello")  # Telegram: the bot may write to a user once they wrote to it
    video = (await bot.send_video(USER, mp4_header(64, 48, 2), filename="courier_00001_.mp4")).video.file_id
    animation = (await bot.send_animation(USER, gif(3, 100), filename="courier_00002_.gif")).animation.file_id
    [job] = await sql(courier, "INSERT INTO courier_jobs (user_id, chat_id, command, params, status) "
                               "VALUES ($1, $1, 'wan', '{\"prompt\": \"a fox runs\"}', 'succeeded') RETURNING id", USER)
    for output, (file_id, filename) in enumerate(((video, "courier_00001_.mp4"), (animation, "courier_00002_.gif"))):
        await sql(courier, "INSERT INTO courier_deliveries (job_id, output, status, record) "
                           "VALUES ($1, $2, 'sent', $3)",
                  job["id"], f"9:{output}", {"kind": "video", "file_id": file_id, "filename": filename})
    found = (await ask(botapi_bot, USER, "fox"))[0]["results"]
    assert [(r["type"], r.get("video_file_id") or r.get("gif_file_id")) for r in found] == [
        ("video", video), ("gif", animation)]


async def test_the_share_buttons_query_lists_that_result_only(botapi_bot, courier):
    mine = await result(courier, botapi_bot, USER, "a red cat")
    await result(courier, botapi_bot, USER, "another red cat")
    [row] = await sql(courier, "INSERT INTO courier_result_buttons (token, job_id) VALUES ('tok-EN_1', $1) "
                               "RETURNING token", mine)
    keyboard = result_keyboard(row["token"], lambda key: i18n.text("en", key)).to_dict()
    [button] = [b for line in keyboard["inline_keyboard"] for b in line if "switch_inline_query_chosen_chat" in b]
    assert button["text"] == i18n.text("en", "button_share")
    assert button["switch_inline_query_chosen_chat"]["query"] == row["token"]
    assert jobs_of((await ask(botapi_bot, USER, row["token"]))[0]) == [mine]
    assert jobs_of((await ask(botapi_bot, OTHER, row["token"]))[0]) == []


async def test_strangers_and_banned_users_get_no_results_and_leave_no_row(botapi_bot, courier):
    await result(courier, botapi_bot, USER, "a red cat")
    for user_id in (STRANGER, USER):
        if user_id == USER:
            await sql(courier, "UPDATE courier_users SET banned = true WHERE user_id = $1", USER)
        answer, _ = await ask(botapi_bot, user_id, "cat")
        assert answer["results"] == [] and answer["cache_time"] == 0
        assert answer["button"] == {"text": i18n.text("en", "inline_start"),
                                    "start_parameter": bot_inline.START_PARAMETER}
    assert await sql(courier, "SELECT 1 FROM courier_users WHERE user_id = $1", STRANGER) == []
    assert not [c for c in botapi_bot.outbox if c.method == "sendMessage" and c.params["chat_id"] == STRANGER]


async def test_forget_takes_the_results_out_of_inline_mode_at_once(botapi_bot, courier):
    await result(courier, botapi_bot, USER, "a red cat")
    assert len((await ask(botapi_bot, USER))[0]["results"]) == 1
    botapi_bot.inject_text(USER, "/forget")
    confirmation = await botapi_bot.wait_for_call(
        "sendMessage", where=lambda c: (c.params.get("reply_markup") or {}).get("inline_keyboard"))
    [[button]] = confirmation.params["reply_markup"]["inline_keyboard"]
    press = botapi_bot.inject_callback_query(USER, confirmation.result["message_id"], button["callback_data"])
    await botapi_bot.wait_for_call("answerCallbackQuery", where=lambda c: c.params["callback_query_id"] == press["id"])
    await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["message_id"] == press["message"][
        "message_id"], timeout=30)  # the report, once the rows are gone
    assert await sql(courier, "SELECT 1 FROM courier_jobs WHERE user_id = $1", USER) == []
    assert (await ask(botapi_bot, USER))[0]["results"] == []


@pytest.mark.parametrize(("query", "offset", "listed"), [
    ("x" * inline.MAX_QUERY_CHARS, "", False), ("\x00cat\x00 \ud800", "", True),
    ("%_", "", False),  # no LIKE wildcards: the words are looked for as they are
    ("cat", "junk", True), ("cat", "-5", True), ("cat", "99999999999", True), ("cat", "1e3", True),
    ("' OR 1=1 --", "0", False), (json.dumps({"a": 1}), "20", False)])
async def test_hostile_queries_get_a_sane_answer(botapi_bot, courier, query, offset, listed):
    job = await result(courier, botapi_bot, USER, "a red cat")
    answer, _ = await ask(botapi_bot, USER, query, offset)
    assert jobs_of(answer) == ([job] if listed else []) and answer["next_offset"] == ""  # junk offsets: the top


async def test_a_query_that_expired_before_its_answer_is_no_incident(botapi_bot, courier, caplog):
    """Telegram takes an answer for a few seconds only: a query that waited longer (the bot was down, or
    busy) is refused "query is too old" — the user has moved on, and nothing failed on our side."""
    caplog.set_level(logging.INFO, logger="courier")
    for number, user_id in enumerate((USER, STRANGER)):
        stale = {"id": f"expired-{number}", "from": botapi_bot.emulator.user(user_id), "query": "cat", "offset": ""}
        botapi_bot.inject_update({"inline_query": stale})  # an id Telegram no longer knows
        refused = await inline.answer_of(botapi_bot, stale["id"])
        assert "query is too old" in refused.failure.description

    async def both_noted():
        return sum("expired before its answer" in r.getMessage() for r in caplog.records) == 2

    await until(both_noted, 10, "note of the expired queries")
    assert not [r for r in caplog.records if "incident" in r.getMessage()]


async def test_a_rendered_result_is_listed_by_the_file_id_its_delivery_recorded(
        botapi, botapi_bot, pg_database, tmp_path, request):
    """The whole chain: a real ComfyUI renders /demo, the delivery records the file, inline mode lists it."""
    require_comfyui()
    comfyui = request.getfixturevalue("comfyui")
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER},{OTHER}") as courier:
        botapi_bot.inject_text(USER, "/demo a green fox")
        sent = await botapi_bot.wait_for_call("sendDocument", timeout=120)

        async def kept():  # listed from when the runner recorded that Telegram took it
            return await sql(courier, "SELECT 1 FROM courier_deliveries WHERE status = 'sent'")

        await until(kept, 30, "the delivery's record")
        found = (await ask(botapi_bot, USER, "fox"))[0]["results"]
        assert [(r["type"], r["document_file_id"]) for r in found] == [("document", sent.result["document"]["file_id"])]
        assert (await ask(botapi_bot, OTHER, "fox"))[0]["results"] == []
