"""Live previews in a job's status message (bot/progress.py), on real python-telegram-bot and the emulator.

Telegram cannot turn a text message into a photo, so the first preview sends the status as a
photo and deletes the text; later ones replace its photo; the final text takes the photo's place.
Sampler previews cannot happen on this machine's real ComfyUI (no weights): the fake ComfyUI
sends them as ComfyUI does (JPEG ``PREVIEW_IMAGE`` frames while the sampler runs).
"""

import io

import asyncpg
import pytest
from PIL import Image
from telegram.ext import ExtBot

from comfyui_courier.bot.limiter import ResultsFirstLimiter
from comfyui_courier.bot.progress import ChatThrottle, ProgressMessage
from comfyui_courier.core import i18n
from comfyui_courier.tests.support.courier import running_courier

pytestmark = pytest.mark.timeout(120)

USER = 515
JOB_S = 60


def jpeg(red: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 64), (red, 0, 0)).save(buffer, "JPEG")
    return buffer.getvalue()


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def tg(botapi, botapi_bot):
    botapi_bot.inject_text(USER, "/f a fox")
    async with ExtBot(botapi_bot.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url,
                      rate_limiter=ResultsFirstLimiter(max_retries=0)) as bot:  # the bot's, as bot/service.py
        yield bot


async def shown(botapi, status: ProgressMessage):
    """The status message as the chat shows it, once no edit is in flight."""
    if status._pending is not None:
        await status._pending
    return next(m for m in botapi.bots[0].history(USER) if m["message_id"] == status.message_id)


def red_of(bot, photo: list[dict]) -> int:
    return Image.open(io.BytesIO(bot.file_bytes(photo[-1]["file_id"]))).convert("RGB").getpixel((32, 32))[0]


async def test_the_status_becomes_a_photo_then_gives_way_to_the_final_text(botapi, botapi_bot, tg):
    queued = await tg.send_message(USER, "Queued", reply_to_message_id=1)
    moves = []

    async def moved(message_id):
        moves.append(message_id)

    clock = Clock()
    status = ProgressMessage(tg, USER, queued.message_id, ChatThrottle(3.0, clock), reply_to=1, moved=moved)
    await status.update("Rendering 1/3")
    assert (await shown(botapi, status))["text"] == "Rendering 1/3"
    clock.now += 3
    await status.preview(jpeg(250))
    photo = await shown(botapi, status)
    assert photo["caption"] == "Rendering 1/3" and red_of(botapi_bot, photo["photo"]) > 200
    assert photo["reply_to_message"]["message_id"] == 1 and moves == [photo["message_id"]]
    assert queued.message_id not in [m["message_id"] for m in botapi_bot.history(USER)]  # the text is gone

    await status.update("Rendering 2/3")
    await status.preview(jpeg(10))  # within the interval: held back, the newest one wins
    assert [c.method for c in botapi_bot.outbox].count("editMessageMedia") == 0
    clock.now += 3
    await status.update("Rendering 3/3")
    edited = await shown(botapi, status)
    assert (edited["message_id"], edited["caption"]) == (photo["message_id"], "Rendering 3/3")
    assert red_of(botapi_bot, edited["photo"]) < 50  # the held-back preview went with the newest text

    await status.finish("Done in 1.0 s.")
    final = await shown(botapi, status)
    assert final["text"] == "Done in 1.0 s." and moves == [photo["message_id"], final["message_id"]]
    assert [m.get("text") or m.get("caption") for m in botapi_bot.history(USER)] == ["/f a fox", "Done in 1.0 s."]


async def test_a_text_edit_of_a_status_another_run_made_a_photo_edits_its_caption(botapi, botapi_bot, tg):
    photo = await tg.send_photo(USER, jpeg(100), caption="Rendering 1/3")  # what an earlier run left
    status = ProgressMessage(tg, USER, photo.message_id, ChatThrottle(0))
    await status.update("Rendering")
    assert (await shown(botapi, status))["caption"] == "Rendering"
    await status.finish("Done in 2.0 s.")
    assert [m.get("text") for m in botapi_bot.history(USER)] == ["/f a fox", "Done in 2.0 s."]


async def test_a_run_s_first_text_is_shown_within_the_chat_s_interval_later_ones_are_not(botapi, botapi_bot, tg):
    """Two jobs in one chat: the second starts right after the first's edit took the chat's
    interval. Its first text is shown all the same, as a post of its own (it had no "Queued"
    reply) or an edit of its "Queued" one; its next text within the interval is dropped."""
    throttle = ChatThrottle(3.0, Clock())
    first = ProgressMessage(tg, USER, None, throttle, reply_to=1)
    await first.update("Rendering /a")
    assert (await shown(botapi, first))["text"] == "Rendering /a"
    second = ProgressMessage(tg, USER, None, throttle, reply_to=1)
    await second.update("Rendering /b")
    assert (await shown(botapi, second))["text"] == "Rendering /b"
    await second.update("Rendering /b 1/3")
    assert (await shown(botapi, second))["text"] == "Rendering /b"
    queued = await tg.send_message(USER, "Queued /c", reply_to_message_id=1)
    third = ProgressMessage(tg, USER, queued.message_id, throttle, reply_to=1)
    await third.update("Rendering /c")
    assert (await shown(botapi, third))["text"] == "Rendering /c"


@pytest.mark.parametrize("enabled", [True, False])
async def test_a_job_shows_its_sampler_previews_until_its_result_comes(botapi, botapi_bot, pg_database, fake_comfy,
                                                                      tmp_path, enabled):
    fake_comfy.previews, fake_comfy.steps, fake_comfy.step_delay = True, 4, 0.5  # steps apart, as a sampler's
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER), COURIER_LIVE_PREVIEWS=str(enabled).lower()):
        request = botapi_bot.inject_text(USER, "/demo a fox")
        done = i18n.text("en", "done", seconds=0).split()[0]
        final = await botapi_bot.wait_for_call(
            "sendMessage" if enabled else "editMessageText", timeout=JOB_S,
            where=lambda c: c.params.get("text", "").startswith(done))
        if enabled:  # the preview's deletion waits until the chat has room again (13 messages in any 10 s)
            preview = next(c.result["message_id"] for c in botapi_bot.outbox
                           if c.method == "sendPhoto" and not c.params.get("reply_markup"))
            await botapi_bot.wait_for_call("deleteMessage", timeout=JOB_S,
                                           where=lambda c: c.params["message_id"] == preview)
        conn = await asyncpg.connect(pg_database)
        try:
            status_id = await conn.fetchval("SELECT status_message_id FROM courier_jobs")
        finally:
            await conn.close()
    methods = [c.method for c in botapi_bot.outbox]
    document = methods.index("sendDocument")
    status_photos = [c for c in botapi_bot.outbox  # the result's photo carries the buttons
                     if c.method == "sendPhoto" and c.params.get("caption") and not c.params.get("reply_markup")]
    if not enabled:
        assert not status_photos and "editMessageMedia" not in methods
        return
    assert len(status_photos) == 1 and methods.index("sendPhoto") < document  # before the result
    (photo,) = status_photos
    assert photo.result["reply_to_message"]["message_id"] == request["message_id"]
    assert all(c.method != "editMessageText" for c in botapi_bot.outbox[methods.index("sendPhoto"):])
    deleted = [c.params["message_id"] for c in botapi_bot.outbox if c.method == "deleteMessage"]
    assert photo.result["message_id"] in deleted  # replaced by the result, then the final text
    assert status_id == final.result["message_id"]  # what /forget deletes
    assert final.result["reply_to_message"]["message_id"] == request["message_id"]
