"""Updates reach the bot by getUpdates long polling or by webhook, as with api.telegram.org."""

import asyncio
import contextlib
import io

import pytest
import telegram
from aiohttp import web
from PIL import Image
from telegram.error import Conflict
from telegram.ext import (
    ApplicationBuilder,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)
from telegram.request import HTTPXRequest

from comfyui_courier.tests.support.http import serve_app

pytestmark = pytest.mark.timeout(30)

USER = 42


@pytest.fixture
async def tg(botapi, botapi_bot):
    request = HTTPXRequest(read_timeout=60)  # long polls below outlast PTB's default 5 s read timeout
    async with telegram.Bot(botapi_bot.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url,
                            request=request) as bot:
        yield bot


@contextlib.asynccontextmanager
async def webhook_receiver(handler):
    """A tiny aiohttp server on 127.0.0.1 that hands each POST to ``handler``; yields its URL."""
    app = web.Application()
    app.router.add_post("/hook", handler)
    async with serve_app(app) as url:
        yield f"{url}/hook"


async def test_offset_confirms_and_limit_caps(botapi_bot, tg):
    for text in ("one", "two", "three"):
        botapi_bot.inject_text(USER, text)
    first = await tg.get_updates(limit=2)
    assert [u.message.text for u in first] == ["one", "two"]
    assert [u.message.text for u in await tg.get_updates()] == ["one", "two", "three"]  # nothing confirmed yet
    rest = await tg.get_updates(offset=first[-1].update_id + 1)
    assert [u.message.text for u in rest] == ["three"]
    assert [u["update_id"] for u in botapi_bot.updates] == [rest[0].update_id]
    assert await tg.get_updates(offset=rest[0].update_id + 1) == ()
    for text in ("a", "b", "c"):
        botapi_bot.inject_text(USER, text)
    assert [u.message.text for u in await tg.get_updates(offset=-1)] == ["c"]  # keeps only the last one


async def test_long_poll_wakes_when_an_update_arrives(botapi, botapi_bot, tg):
    poll = asyncio.create_task(tg.get_updates(timeout=40))
    await botapi.wait_for(lambda: any(c.method == "getUpdates" and c.status is None for c in botapi_bot.calls))
    assert not poll.done()
    botapi_bot.inject_text(USER, "/demo hello")
    [update] = await asyncio.wait_for(poll, 5)  # well before the 40 s poll timeout
    assert update.message.text == "/demo hello"
    assert update.message.entities[0].type == "bot_command" and update.message.entities[0].length == 5


async def test_second_poller_terminates_the_first(botapi, botapi_bot, tg):
    first = asyncio.create_task(tg.get_updates(timeout=40))
    await botapi.wait_for(lambda: any(c.status is None for c in botapi_bot.calls))
    async with telegram.Bot(botapi_bot.token, base_url=botapi.base_url,
                            request=HTTPXRequest(read_timeout=60)) as other_instance:
        second = asyncio.create_task(other_instance.get_updates(timeout=40))
        with pytest.raises(Conflict, match="terminated by other getUpdates request"):
            await asyncio.wait_for(first, 5)
        botapi_bot.inject_text(USER, "hi")
        assert len(await asyncio.wait_for(second, 5)) == 1


async def test_get_updates_conflicts_while_a_webhook_is_set(botapi_bot, tg):
    botapi_bot.inject_text(USER, "pending")
    assert await tg.set_webhook("http://127.0.0.1:9/hook", secret_token="s3cret") is True
    assert botapi_bot.calls[-1].note == "Webhook was set"
    with pytest.raises(Conflict, match="can't use getUpdates method while webhook is active"):
        await tg.get_updates()
    info = await tg.get_webhook_info()
    assert (info.url, info.has_custom_certificate, info.max_connections) == ("http://127.0.0.1:9/hook", False, 40)
    assert await tg.delete_webhook(drop_pending_updates=True) is True
    assert botapi_bot.calls[-1].note == "Webhook was deleted"
    info = await tg.get_webhook_info()
    assert (info.url, info.pending_update_count) == ("", 0)
    assert await tg.get_updates() == ()


async def test_set_webhook_validates_url_and_secret(tg):
    with pytest.raises(telegram.error.BadRequest, match="Invalid webhook url specified"):
        await tg.set_webhook("ftp://example.org/hook")
    with pytest.raises(telegram.error.BadRequest, match="Secret token contains unallowed characters"):
        await tg.set_webhook("http://127.0.0.1:9/hook", secret_token="no spaces")


async def test_webhook_posts_updates_with_the_secret_header(botapi_bot, tg):
    received: asyncio.Queue = asyncio.Queue()

    async def hook(request: web.Request) -> web.Response:
        await received.put((request.headers.get("X-Telegram-Bot-Api-Secret-Token"), await request.json()))
        return web.Response()

    async with webhook_receiver(hook) as url:
        await tg.set_webhook(url, secret_token="s3cret-token_1")
        botapi_bot.inject_text(USER, "/status")
        secret, body = await asyncio.wait_for(received.get(), 5)
        assert secret == "s3cret-token_1"
        update = telegram.Update.de_json(body, tg)
        assert update.message.text == "/status" and update.message.from_user.id == USER
        await botapi_bot.emulator.wait_for(lambda: not botapi_bot.updates)  # delivered = confirmed
        assert (await tg.get_webhook_info()).pending_update_count == 0
        await tg.delete_webhook()


async def test_failed_webhook_delivery_is_retried_and_reported(botapi_bot, tg):
    answers = iter([web.Response(status=500), web.Response()])
    delivered = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        response = next(answers)
        if response.status == 200:
            delivered.set()
        return response

    async with webhook_receiver(hook) as url:
        await tg.set_webhook(url)
        botapi_bot.inject_text(USER, "retry me")
        await asyncio.wait_for(delivered.wait(), 10)  # the first retry comes after 1 s
        info = await tg.get_webhook_info()
        assert info.last_error_message == "Wrong response from the webhook: 500 Internal Server Error"
        assert info.last_error_date is not None
        await tg.delete_webhook()


async def reply_start(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Answers /start with the command's arguments."""
    await update.message.reply_text(f"started {' '.join(context.args)}".strip())


async def echo_photo(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Sends a received photo back as a document, downloaded and re-uploaded."""
    file = await update.message.photo[-1].get_file()
    data = bytes(await file.download_as_bytearray())
    await update.message.reply_document(data, filename="back.jpg", do_quote=True)


def build_application(botapi, botapi_bot, *, updater: bool):
    builder = (ApplicationBuilder().token(botapi_bot.token).base_url(botapi.base_url)
               .base_file_url(botapi.base_file_url))
    if not updater:
        builder = builder.updater(None)
    application = builder.build()
    application.add_handler(CommandHandler("start", reply_start))
    application.add_handler(MessageHandler(filters.PHOTO, echo_photo))
    return application


async def test_application_polling_round_trip(botapi, botapi_bot):
    application = build_application(botapi, botapi_bot, updater=True)
    async with application:
        await application.updater.start_polling(timeout=30)
        await application.start()
        try:
            botapi_bot.inject_text(USER, "/start now")
            call = await botapi_bot.wait_for_call("sendMessage")
            assert call.params["text"] == "started now" and call.params["chat_id"] == USER
            buffer = io.BytesIO()
            Image.new("RGB", (300, 200), "green").save(buffer, "PNG")
            photo = botapi_bot.inject_photo(USER, buffer.getvalue())
            call = await botapi_bot.wait_for_call("sendDocument")
            assert call.files["document"].data == botapi_bot.file_bytes(photo["photo"][-1]["file_id"])
            assert call.result["reply_to_message"]["message_id"] == photo["message_id"]
        finally:
            await application.updater.stop()
            await application.stop()
    assert botapi_bot.updates == []  # the updater confirmed what it handled


async def test_application_behind_a_custom_webhook_route(botapi, botapi_bot):
    """PTB inside a host's aiohttp server (updater None), as the pack's webhook mode runs it."""
    application = build_application(botapi, botapi_bot, updater=False)

    async def hook(request: web.Request) -> web.Response:
        if request.headers.get("X-Telegram-Bot-Api-Secret-Token") != "t0ken":
            return web.Response(status=403)
        await application.update_queue.put(telegram.Update.de_json(await request.json(), application.bot))
        return web.Response()

    async with application, webhook_receiver(hook) as url:
        await application.start()
        try:
            await application.bot.set_webhook(url, secret_token="t0ken")
            botapi_bot.inject_text(USER, "/start hooked")
            call = await botapi_bot.wait_for_call("sendMessage")
            assert call.params["text"] == "started hooked"
            await application.bot.delete_webhook()
        finally:
            await application.stop()
