"""The emulator's web chat in headless Chromium, with a real python-telegram-bot playing the bot.

No ComfyUI here (tests/browser/test_try.py has the whole chain): the bot's side is PTB calls
made by the test, so the page is checked against each thing a bot can do to a chat —
the command menu per language, an inline keyboard whose press reaches the bot as a
callback query and whose answer shows as a toast, a live edit, a reply, a photo sent with
a drag-and-drop, a file sent with the picker, the bot's lossless file and video inline.
Screenshots go to ``$COURIER_ARTIFACTS`` (else pytest's tmp_path), ``browser/chat-*.png``.
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import pytest
import telegram
from PIL import Image
from telegram import (
    BotCommand,
    BotCommandScopeAllPrivateChats,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InputMediaPhoto,
)

from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.emulator.test_botapi import mp4_header
from comfyui_courier.tests.support.requires import require_chromium

pytestmark = pytest.mark.timeout(120)

ADA, GRETA = 1001, 1002


def artifacts(tmp_path: Path) -> Path:
    """Where screenshots are kept: $COURIER_ARTIFACTS/browser, else the test's tmp_path."""
    root = Path(os.environ["COURIER_ARTIFACTS"]) if os.environ.get("COURIER_ARTIFACTS") else tmp_path
    return root / "browser"


def png(color: str, size: tuple[int, int] = (64, 48)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, "PNG")
    return buffer.getvalue()


def file_expression(data: bytes, name: str, mime: str) -> str:
    """JavaScript for a ``File`` holding ``data``, as a picker or a drop hands it to the page."""
    return (f"new File([Uint8Array.from(atob({json.dumps(base64.b64encode(data).decode())}), (c) => c.charCodeAt(0))],"
            f" {json.dumps(name)}, {{type: {json.dumps(mime)}}})")


async def drop_file(page, selector: str, data: bytes, name: str, mime: str) -> None:
    """A drag-and-drop of a file onto ``selector``, as the browser's drop event carries it."""
    await page.evaluate(f"""(() => {{
        const transfer = new DataTransfer();
        transfer.items.add({file_expression(data, name, mime)});
        document.querySelector({json.dumps(selector)}).dispatchEvent(
            new DragEvent('drop', {{dataTransfer: transfer, bubbles: true, cancelable: true}}));
    }})()""")


async def pick_file(page, data: bytes, name: str, mime: str) -> None:
    """The file picker's outcome: the input holds the file and fires ``change``."""
    await page.evaluate(f"""(() => {{
        const transfer = new DataTransfer();
        transfer.items.add({file_expression(data, name, mime)});
        const input = document.getElementById('file');
        input.files = transfer.files;
        input.dispatchEvent(new Event('change'));
    }})()""")


def message_count(who: str) -> str:
    return f"document.querySelectorAll('.message.from-{who}').length"


@pytest.fixture
def chromium():
    return require_chromium()


@pytest.fixture
async def tg(botapi, botapi_bot):
    async with telegram.Bot(botapi_bot.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url) as bot:
        yield bot


async def test_the_web_chat_shows_what_the_bot_does_and_plays_the_user(botapi, botapi_bot, tg, chromium, tmp_path):
    shots = artifacts(tmp_path)
    await tg.set_my_commands([BotCommand("demo", "Cards from your text"), BotCommand("help", "Help")])
    await tg.set_my_commands([BotCommand("demo", "Karten aus deinem Text")], scope=BotCommandScopeAllPrivateChats(),
                             language_code="de")
    async with Chromium(chromium, tmp_path / "profile") as browser:
        page = await browser.new_page()
        await page.goto(f"{botapi.url}/")
        await page.wait_for("document.getElementById('user').options.length === 3", what="the made-up users")
        assert sorted(user["language_code"] for user in botapi.users.values()) == ["de", "en", "ru"]
        assert await page.evaluate("document.getElementById('bot-name').textContent") == (
            f"{botapi_bot.user['first_name']} @{botapi_bot.user['username']}")

        # the command menu as suggestions, in the user's language
        await page.click("#menu-button")
        await page.wait_for("[...document.querySelectorAll('#suggestions b')].map((b) => b.textContent).join() "
                            "=== '/demo,/help'", what="the whole menu")
        await page.type("#text", "/d")
        await page.wait_for("document.querySelector('#suggestions li b')?.textContent === '/demo'", what="suggestions")
        assert "Cards from your text" in await page.evaluate("document.getElementById('suggestions').textContent")
        await page.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Tab", "code": "Tab",
                                                   "windowsVirtualKeyCode": 9})
        assert await page.evaluate("document.getElementById('text').value") == "/demo "
        await page.send("Input.insertText", {"text": "hello"})
        await page.click("#send")
        request = await botapi.wait_for(lambda: next((m for m in botapi_bot.history(ADA) if "text" in m), None))
        assert request["text"] == "/demo hello" and request["entities"][0]["type"] == "bot_command"

        # a status message edited live, then an inline keyboard that reaches the bot
        status = await tg.send_message(ADA, "Queued (1st)", reply_to_message_id=request["message_id"])
        await page.wait_for("document.querySelector('.message.from-bot')?.textContent.includes('Queued (1st)')",
                            what="the status message")
        assert await page.evaluate("document.querySelector('.message.from-bot .quote').textContent") == "/demo hello"
        keyboard = InlineKeyboardMarkup([[InlineKeyboardButton("Again", callback_data="again"),
                                          InlineKeyboardButton("Stop", callback_data="stop")]])
        await tg.edit_message_text("Running 50%", ADA, status.message_id, reply_markup=keyboard)
        await page.wait_for("document.querySelector('.message.from-bot')?.textContent.includes('Running 50%')",
                            what="the edit")
        assert await page.evaluate("document.querySelector('.message.from-bot .meta').textContent.startsWith('edited')")
        await page.screenshot(shots / "chat-1-keyboard.png")
        await page.click('.message.from-bot button[data-button="again"]')
        updates = await botapi.wait_for(lambda: [u for u in botapi_bot.updates if "callback_query" in u])
        query = updates[-1]["callback_query"]
        assert (query["data"], query["from"]["id"], query["message"]["message_id"]) == ("again", ADA, status.message_id)
        assert await tg.answer_callback_query(query["id"], text="Running it again")
        await page.wait_for("!document.getElementById('toast').hidden "
                            "&& document.getElementById('toast').textContent === 'Running it again'",
                            what="the callback answer as a toast")

        # a photo by drag-and-drop, with a caption and as a reply
        await page.click(f'.message[data-message-id="{status.message_id}"] .text')
        await page.wait_for("!document.getElementById('reply-bar').hidden", what="the reply bar")
        await drop_file(page, "#messages", png("blue"), "blue.png", "image/png")
        await page.wait_for("!document.getElementById('attachment-bar').hidden", what="the attachment bar")
        await page.type("#text", "/demoedit")
        await page.click("#send")
        sent = await botapi.wait_for(lambda: next((m for m in botapi_bot.history(ADA) if "photo" in m), None))
        assert sent["caption"] == "/demoedit" and sent["reply_to_message"]["message_id"] == status.message_id
        await page.wait_for("document.querySelector('.message.from-user img.media')?.naturalWidth === 64",
                            what="the user's photo in the chat")

        # a file by the picker stays a file (its bytes kept); the bot's document shows inline, lossless
        await pick_file(page, png("green"), "green.png", "image/png")
        await page.click("#as-file")
        await page.click("#send")
        document = await botapi.wait_for(lambda: next((m for m in botapi_bot.history(ADA) if "document" in m), None))
        assert botapi_bot.file_bytes(document["document"]["file_id"]) == png("green")
        result = png("red", (80, 60))
        await tg.send_document(ADA, result, filename="result.png", caption="the lossless file")
        await page.wait_for("document.querySelector('.message.from-bot img.media')?.naturalWidth === 80",
                            what="the bot's document shown inline")
        behind_the_click = await page.evaluate(
            "fetch(document.querySelector('.message.from-bot img.media').closest('a').href)"
            ".then((reply) => reply.arrayBuffer()).then((body) => [...new Uint8Array(body)])")
        assert bytes(behind_the_click) == result
        await tg.send_video(ADA, mp4_header(320, 240, 2), filename="clip.mp4", supports_streaming=True)
        await page.wait_for("document.querySelector('.message.from-bot video.media')?.src.includes('/files/')",
                            what="the video inline")
        await page.screenshot(shots / "chat-2-media.png")

        # an album stacks as one bubble; a status photo edited to another photo shows the new one
        album = await tg.send_media_group(ADA, [InputMediaPhoto(png("red", (30, 20))),
                                               InputMediaPhoto(png("blue", (30, 20)))])
        await page.wait_for(f"document.querySelector('.message[data-message-id=\"{album[1].message_id}\"]')"
                            "?.classList.contains('album-next')", what="the album as one bubble")
        assert await page.evaluate(f"document.querySelector('.message[data-message-id=\"{album[0].message_id}\"]')"
                                   ".className") == "message from-bot in-album"
        preview = await tg.send_photo(ADA, png("red", (40, 30)), caption="Rendering 1/2")
        await tg.edit_message_media(InputMediaPhoto(png("blue", (50, 30)), caption="Rendering 2/2"), ADA,
                                    preview.message_id)
        edited = f"document.querySelector('.message[data-message-id=\"{preview.message_id}\"]')"
        await page.wait_for(f"{edited}?.querySelector('img.media')?.naturalWidth === 50", what="the edited media")
        assert await page.evaluate(f"{edited}.textContent.includes('Rendering 2/2')")
        assert await page.evaluate(f"{edited}.querySelector('.meta').textContent.startsWith('edited')")
        await page.screenshot(shots / "chat-3-album.png")

        # another user: their own chat, their language's menu
        await page.evaluate(f"(() => {{ const s = document.getElementById('user'); s.value = '{GRETA}';"
                            " s.dispatchEvent(new Event('change')); })()")
        await page.wait_for(f"{message_count('bot')} === 0 && {message_count('user')} === 0", what="Greta's empty chat")
        await page.type("#text", "/")
        await page.wait_for("document.getElementById('suggestions').textContent.includes('Karten aus deinem Text')",
                            what="the German menu")
        assert not page.console, page.console
