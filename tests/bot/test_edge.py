"""What the bot checks before it queues anything, and how it answers when something fails (issue 9).

End to end: real python-telegram-bot ⇄ Bot API emulator, real PostgreSQL, the dispatcher and the
controllable fake ComfyUI. Updates a polling bot never receives (channel posts, edits) but a
webhook may deliver are handed to the application as the webhook route does.
"""

import contextlib
import io
import logging
import re

import numpy as np
import pytest
from PIL import Image
from telegram import Update

from comfyui_courier.tests.support.courier import running_courier

USER = 111
CHANNEL = -1001111
GROUP = -1002222
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b")


@pytest.fixture
async def start(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    """``await start(**env)``: a running Courier (allowlist: USER, unless env says otherwise)."""
    async with contextlib.AsyncExitStack() as stack:
        async def start(**env):
            env = {"COURIER_ALLOWED_USERS": f"{USER}", **env}
            return await stack.enter_async_context(
                running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path, **env))
        yield start


@pytest.fixture
async def courier(start):
    return await start()


@pytest.fixture
def errors(courier):
    """Every exception a handler let escape (an error handler of the test's own, beside the bot's)."""
    seen = []

    async def record(update, context):
        seen.append(context.error)

    courier.bot.application.add_error_handler(record)
    return seen


def texts(bot, chat_id=USER) -> list[str]:
    return [c.params.get("text") or "" for c in bot.outbox
            if c.method in ("sendMessage", "editMessageText") and c.params.get("chat_id") == chat_id]


async def reply_with(bot, needle: str, chat_id=USER, timeout: float = 10):
    try:
        call = await bot.wait_for_call("sendMessage", where=lambda c: c.params.get("chat_id") == chat_id
                                       and needle in (c.params.get("text") or ""), timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"no reply with {needle!r}; the bot said {texts(bot, chat_id)}") from None
    return call.params["text"]


async def final_status(bot, needle: str, timeout: float = 30) -> str:
    try:
        call = await bot.wait_for_call("editMessageText", where=lambda c: needle in c.params["text"], timeout=timeout)
    except TimeoutError:
        raise AssertionError(f"no status with {needle!r}; the bot said {texts(bot)}") from None
    return call.params["text"]


async def job_rows(courier):
    async with courier.store.pool.acquire() as conn:
        rows = await conn.fetch("SELECT command, status, params, error FROM courier_jobs ORDER BY id")
    return [dict(r) for r in rows]


async def handle(courier, kind: str, message: dict) -> None:
    """The update as a webhook delivers it, processed to the end before this returns."""
    application = courier.bot.application
    await application.process_update(Update.de_json({"update_id": 10**6, kind: message}, application.bot))


def picture(size=(64, 48), color=(200, 40, 40)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def noise(side: int) -> bytes:
    """A PNG that does not compress: about 3 bytes a pixel, and as much again once a photo."""
    pixels = np.random.default_rng(side).integers(0, 256, (side, side, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, format="PNG")
    return out.getvalue()


async def test_nul_and_unpaired_surrogates_are_dropped_from_prompts_and_names(courier, botapi_bot, errors):
    botapi_bot.emulator.add_user(USER, "An\x00na\ud800", username="an\x00na")
    botapi_bot.inject_text(USER, "/demo hel\x00lo\ud83d wor\x07ld")
    await final_status(botapi_bot, "Done")
    botapi_bot.inject_text(USER, "/start")
    assert (await reply_with(botapi_bot, "Hi ")).startswith("Hi Anna!")
    (job,) = await job_rows(courier)
    assert job["params"]["prompt"] == "hello world"
    async with courier.store.pool.acquire() as conn:
        assert tuple(await conn.fetchrow("SELECT first_name, username FROM courier_users")) == ("Anna", "anna")
    assert errors == []


async def test_prompt_of_only_invisible_characters_is_missing(courier, botapi_bot, errors):
    botapi_bot.inject_text(USER, "/demo \u200b\u200c\u200d\u2060\ufeff\u3164")
    await reply_with(botapi_bot, "Please add a description: /demo")
    assert await job_rows(courier) == [] and errors == []


async def test_channel_post_is_ignored(courier, botapi_bot, errors):
    post = botapi_bot.inject_channel_post(CHANNEL, "/demo for everyone")
    await handle(courier, "channel_post", post)
    assert errors == []
    assert [c for c in botapi_bot.outbox if c.params.get("chat_id") == CHANNEL] == []
    assert await job_rows(courier) == []


async def test_anonymous_group_admin_is_asked_to_post_as_themselves(start, botapi_bot):
    courier = await start(COURIER_ALLOWED_USERS="*")  # everyone may use the bot: one shared sender must not
    chatter = botapi_bot.inject_anonymous_admin_text(GROUP, "just chatting")
    await handle(courier, "message", chatter)
    assert texts(botapi_bot, GROUP) == []  # only commands get the refusal
    botapi_bot.inject_anonymous_admin_text(GROUP, "/demo hi")
    assert "post as yourself" in await reply_with(botapi_bot, "anonymously", chat_id=GROUP)
    assert await job_rows(courier) == []


async def test_oversized_picture_is_refused_before_queueing_and_the_limit_named(start, botapi_bot):
    courier = await start(COURIER_MAX_IMAGE_MB="0.5")
    botapi_bot.inject_document(USER, noise(600), "big.png", mime_type="image/png", caption="/demoedit")
    assert "the file is 1.1 MB, the limit is 0.5 MB" in await reply_with(botapi_bot, "couldn't use that picture")
    photo = botapi_bot.inject_photo(USER, noise(1280), caption="/demoedit")
    assert photo["photo"][-1]["file_size"] > 2**19
    await botapi_bot.emulator.wait_for(lambda: sum("the limit is 0.5 MB" in t for t in texts(botapi_bot)) == 2)
    assert await job_rows(courier) == []


async def test_photo_over_the_pixel_limit_is_refused_before_queueing(courier, botapi_bot):
    # Telegram's own photos stop at 2560 pixels a side, so this update is built, as the Bot API would word it
    chat = {"id": USER, "type": "private", "first_name": "Ann"}
    botapi_bot.inject_update({"message": {
        "message_id": 900, "from": botapi_bot.emulator.user(USER), "chat": chat, "date": 1767225600,
        "photo": [{"file_id": "AgACbig", "file_unique_id": "AQADbig", "width": 20000, "height": 20000,
                   "file_size": 900_000}],
        "caption": "/demoedit", "caption_entities": [{"type": "bot_command", "offset": 0, "length": 9}]}})
    text = await reply_with(botapi_bot, "couldn't use that picture")
    assert "too large (20000×20000 pixels, the limit is 64 megapixels)" in text
    assert await job_rows(courier) == []


async def test_file_over_telegrams_download_limit_is_refused_before_queueing(start, botapi_bot):
    courier = await start(COURIER_MAX_IMAGE_MB="50")
    huge = picture() + bytes(21_000_000 - len(picture()))
    botapi_bot.inject_document(USER, huge, "huge.png", mime_type="image/png", caption="/demoedit")
    assert "larger than the 20 MB Telegram lets bots download" in await reply_with(botapi_bot, "couldn't use")
    assert await job_rows(courier) == []


async def test_file_telegram_will_not_hand_out_fails_the_job_once_and_clearly(courier, botapi_bot):
    botapi_bot.fail("getFile", status=400, description="Bad Request: file is too big")
    botapi_bot.inject_photo(USER, picture(), caption="/demoedit")
    text = await final_status(botapi_bot, "/demoedit failed")
    assert "larger than the 20 MB Telegram lets bots download" in text and "try again" not in text
    assert [(j["status"], "20 MB" in j["error"]) for j in await job_rows(courier)] == [("failed", True)]


async def test_file_telegram_no_longer_has_fails_the_job_with_a_plea_to_resend(courier, botapi_bot):
    botapi_bot.fail("getFile", status=400,
                    description="Bad Request: wrong file_id or the file is temporarily unavailable")
    botapi_bot.inject_photo(USER, picture(), caption="/demoedit")
    text = await final_status(botapi_bot, "/demoedit failed")
    assert "Telegram no longer has it; please send it again" in text
    assert [j["status"] for j in await job_rows(courier)] == ["failed"]


async def test_text_document_with_an_edit_command_is_refused_not_the_last_result_edited(courier, botapi_bot):
    botapi_bot.inject_text(USER, "/demo first")
    await final_status(botapi_bot, "Done")
    notes = botapi_bot.inject_document(USER, b"just some text\n", "notes.txt", mime_type="text/plain",
                                       caption="/demoedit")
    assert "works on a picture" in await reply_with(botapi_bot, "/demoedit works on a picture")
    assert notes["document"]["mime_type"] == "text/plain"
    botapi_bot.inject_text(USER, "/demoedit", reply_to=notes["message_id"])  # replying to it: the same
    await botapi_bot.emulator.wait_for(lambda: sum("works on a picture" in t for t in texts(botapi_bot)) == 2)
    assert [j["command"] for j in await job_rows(courier)] == ["demo"]


async def test_unusable_pictures_are_explained_in_words_not_exception_names(courier, botapi_bot):
    botapi_bot.inject_document(USER, b"\x89PNG\r\n\x1a\n not really", "broken.png", mime_type="image/png",
                               caption="/demoedit")
    broken = await final_status(botapi_bot, "failed")
    assert "it is not a picture I can read" in broken and not CLASS_NAME.search(broken)

    bomb = io.BytesIO()
    Image.new("1", (20000, 20000)).save(bomb, format="PNG")  # small file, 400 megapixels
    botapi_bot.inject_document(USER, bomb.getvalue(), "bomb.png", mime_type="image/png", caption="/demoedit")
    await botapi_bot.emulator.wait_for(lambda: sum("failed" in t for t in texts(botapi_bot)) == 2, timeout=30)
    huge = [t for t in texts(botapi_bot) if "failed" in t][-1]
    assert "too large (20000×20000 pixels, the limit is 64 megapixels)" in huge, huge
    assert not CLASS_NAME.search(huge)


async def test_webhook_and_polling_subscribe_to_the_same_updates_and_edits_queue_nothing(
        botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER}") as courier:
        polled = next(c for c in botapi_bot.calls if c.method == "getUpdates").params["allowed_updates"]
        sent = botapi_bot.inject_text(USER, "/demo cat")
        await final_status(botapi_bot, "Done")
        edited = botapi_bot.inject_edit(USER, sent["message_id"], "/demo dog")
        errors = []

        async def record(update, context):
            errors.append(context.error)

        courier.bot.application.add_error_handler(record)
        await handle(courier, "edited_message", edited)  # a webhook that subscribed to edits delivers it
        assert errors == [] and [j["params"]["prompt"] for j in await job_rows(courier)] == ["cat"]
        assert sum(t.startswith("Done") for t in texts(botapi_bot)) == 1  # one job, whoever posted its status
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER}", COURIER_WEBHOOK_URL="http://127.0.0.1:9/hook"):
        hooked = next(c for c in botapi_bot.calls if c.method == "setWebhook").params.get("allowed_updates")
    assert hooked == polled and "edited_message" not in polled and "channel_post" not in polled


async def test_media_and_text_without_a_command_get_a_one_line_hint(courier, botapi_bot, errors):
    botapi_bot.inject_photo(USER, picture())
    await reply_with(botapi_bot, "send a picture with a command as its caption")
    sticker = io.BytesIO()
    Image.new("RGBA", (512, 512), (0, 0, 0, 0)).save(sticker, format="WEBP")
    botapi_bot.inject_sticker(USER, sticker.getvalue())
    await botapi_bot.emulator.wait_for(lambda: sum("/help lists the commands" in t for t in texts(botapi_bot)) == 2)
    botapi_bot.inject_text(USER, "hello?")
    await reply_with(botapi_bot, "I work with commands")
    assert all("\n" not in t for t in texts(botapi_bot))
    assert await job_rows(courier) == [] and errors == []


async def test_a_failing_handler_answers_with_an_incident_id_logged_once(courier, botapi_bot, caplog):
    async with courier.store.pool.acquire() as conn:  # the database refuses new jobs, naming a path and the token
        await conn.execute(f"""
            CREATE FUNCTION refuse_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'disk full at /srv/secret/pgdata (bot {botapi_bot.token})'; END $$;
            CREATE TRIGGER refuse_jobs BEFORE INSERT ON courier_jobs FOR EACH ROW EXECUTE FUNCTION refuse_jobs();
        """)
    caplog.set_level(logging.INFO)
    botapi_bot.inject_text(USER, "/demo anything")
    reply = await reply_with(botapi_bot, "went wrong on our side")
    incident = re.search(r"incident ([0-9a-f]{8})\b", reply).group(1)
    assert "/srv" not in reply and not CLASS_NAME.search(reply) and botapi_bot.token not in reply
    logged = [r.getMessage() for r in caplog.records if incident in r.getMessage()]
    assert len(logged) == 1 and "disk full at /srv/secret/pgdata" in logged[0]
    assert all(botapi_bot.token not in r.getMessage() for r in caplog.records)

    async with courier.store.pool.acquire() as conn:
        await conn.execute("DROP TRIGGER refuse_jobs ON courier_jobs")
    botapi_bot.inject_text(USER, "/demo again")
    await reply_with(botapi_bot, "/demo")  # "Queued /demo", or "Rendering /demo" if the dispatcher came first


async def test_a_job_failing_unexpectedly_names_an_incident_logged_once(courier, botapi_bot, caplog):
    caplog.set_level(logging.INFO)
    async with courier.store.pool.acquire() as conn:  # recording a delivery fails: no case the dispatcher knows
        await conn.execute("""
            CREATE FUNCTION refuse_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'no deliveries today'; END $$;
            CREATE TRIGGER refuse_deliveries BEFORE INSERT ON courier_deliveries
                FOR EACH ROW EXECUTE FUNCTION refuse_deliveries();
        """)
    botapi_bot.inject_text(USER, "/demo anything")
    text = await final_status(botapi_bot, "/demo failed")
    incident = re.search(r"incident ([0-9a-f]{8})\b", text).group(1)
    assert not CLASS_NAME.search(text)
    assert len([r for r in caplog.records if incident in r.getMessage()]) == 1
