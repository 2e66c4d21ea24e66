"""Reply keyboards on the emulator, as the Bot API docs describe them, with a real python-telegram-bot:
a ``web_app`` button, what the chat shows until ReplyKeyboardRemove, and the page's ``web_app_data``."""

import json
import re

import aiohttp
import pytest
import telegram
from telegram import KeyboardButton, ReplyKeyboardMarkup, ReplyKeyboardRemove, WebAppInfo
from telegram.error import BadRequest

pytestmark = pytest.mark.timeout(30)

USER = 42
PAGE = "https://forms.example/app/#courier=1.x"


@pytest.fixture
async def tg(botapi, botapi_bot):
    botapi_bot.inject_text(USER, "/start")
    async with telegram.Bot(botapi_bot.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url) as bot:
        yield bot


def form(url: str = PAGE, text: str = "🎨 New picture") -> ReplyKeyboardMarkup:
    return ReplyKeyboardMarkup([[KeyboardButton(text, web_app=WebAppInfo(url))]], resize_keyboard=True)


async def test_a_web_app_keyboard_stays_in_the_chat_until_removed(botapi, botapi_bot, tg):
    message = await tg.send_message(USER, "Tap below", reply_markup=form())
    assert message.reply_markup is None  # a reply keyboard is the chat's, not the message's
    assert botapi_bot.keyboards[USER]["keyboard"][0][0]["web_app"] == {"url": PAGE}
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{botapi.url}/_emulator/bots/{botapi_bot.token}/chats/{USER}") as response:
            assert response.status == 200
        async with http.post(f"{botapi.url}/_emulator/bots/{botapi_bot.token}/web_app_data",
                             json={"user": USER, "data": '{"v": 1}', "button_text": "🎨 New picture"}) as response:
            sent = await response.json()
    assert sent["web_app_data"] == {"data": '{"v": 1}', "button_text": "🎨 New picture"}
    update = botapi_bot.updates[-1]["message"]
    assert update["from"]["id"] == USER and update["web_app_data"]["data"] == '{"v": 1}'
    await tg.send_message(USER, "Bye", reply_markup=ReplyKeyboardRemove())
    assert botapi_bot.keyboards[USER] is None
    with pytest.raises(LookupError, match="no Mini App button"):
        botapi_bot.inject_web_app_data(USER, "{}", "🎨 New picture")


async def test_the_page_s_data_is_what_telegram_takes(botapi_bot, tg):
    await tg.send_message(USER, "Tap below", reply_markup=form())
    with pytest.raises(ValueError, match="1-4096 bytes"):
        botapi_bot.inject_web_app_data(USER, "x" * 4097, "🎨 New picture")
    with pytest.raises(ValueError, match="1-4096 bytes"):
        botapi_bot.inject_web_app_data(USER, "", "🎨 New picture")
    with pytest.raises(LookupError):
        botapi_bot.inject_web_app_data(USER, "{}", "another button")
    assert json.loads(botapi_bot.inject_web_app_data(USER, "é" * 2048, "🎨 New picture")["web_app_data"]["data"]
                      .join('""'))


@pytest.mark.parametrize(("markup", "error"), [
    (form("http://forms.example/app/"), "Only HTTPS links are allowed"),
    (form("ftp://127.0.0.1/app/"), "Only HTTPS links are allowed"),
    ({"keyboard": [[{"text": "x", "web_app": {"url": PAGE}, "request_contact": True}]]}, "only one of"),
    ({"keyboard": [[{"text": ""}]]}, "KeyboardButton must be an Object"),
    ({"keyboard": "x"}, "must be an Array of Arrays"),
    ({"remove_keyboard": False}, "can't parse reply keyboard markup"),
    ({"keyboard": [["x"]], "input_field_placeholder": "p" * 65}, "input_field_placeholder"),
])
async def test_a_keyboard_the_docs_do_not_allow_is_refused(botapi_bot, tg, markup, error):
    markup = markup.to_dict() if isinstance(markup, ReplyKeyboardMarkup) else markup
    with pytest.raises(BadRequest, match=f"(?i){re.escape(error)}"):  # PTB shows it capitalized
        await tg._post("sendMessage", {"chat_id": USER, "text": "hi", "reply_markup": markup})
    assert USER not in botapi_bot.keyboards


async def test_a_loopback_http_page_is_taken_for_try_and_a_group_gets_no_web_app_button(botapi_bot, tg):
    await tg.send_message(USER, "Tap below", reply_markup=form("http://127.0.0.1:8188/courier/miniapp/"))
    assert botapi_bot.keyboards[USER]["keyboard"][0][0]["web_app"]["url"].startswith("http://127.0.0.1:8188/")
    botapi_bot.inject_group_text(-100, USER, "/start")
    with pytest.raises(BadRequest, match="(?i)button_type_invalid"):
        await tg.send_message(-100, "Tap below", reply_markup=form())
