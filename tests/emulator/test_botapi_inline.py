"""Inline mode on the emulator, with the real python-telegram-bot: inline_query updates, answerInlineQuery
checked against the Bot API's documented fields, a chosen result posted via the bot, the test API."""

import asyncio

import aiohttp
import pytest
import telegram
from telegram import (
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    InlineQueryResultArticle,
    InlineQueryResultCachedDocument,
    InlineQueryResultCachedPhoto,
    InlineQueryResultsButton,
    InputTextMessageContent,
    SwitchInlineQueryChosenChat,
)
from telegram.error import BadRequest

from comfyui_courier.emulator.botapi import inline

USER, FRIEND = 42, 43


@pytest.fixture
async def tg(botapi, botapi_bot):
    async with telegram.Bot(botapi_bot.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url) as bot:
        yield bot


async def query_of(tg, botapi_bot, text: str = "cat", offset: str = "") -> telegram.InlineQuery:
    """The user types ``@bot text``; the bot reads the update."""
    asked = inline.inject_inline_query(botapi_bot, USER, text, offset)
    [update] = [u for u in await tg.get_updates() if u.inline_query and u.inline_query.id == asked["id"]]
    assert (update.inline_query.query, update.inline_query.offset, update.inline_query.from_user.id) == (
        text, offset, USER)
    return update.inline_query


def document(botapi_bot) -> str:
    return botapi_bot.inject_document(USER, b"lossless bytes", "cat.png")["document"]["file_id"]


async def test_a_cached_document_is_answered_and_posted_via_the_bot_with_its_buttons(tg, botapi_bot):
    file_id = document(botapi_bot)
    query = await query_of(tg, botapi_bot, "cat", "")
    chooser = SwitchInlineQueryChosenChat("cat", allow_user_chats=True)
    share = InlineKeyboardMarkup([[InlineKeyboardButton("📤", switch_inline_query_chosen_chat=chooser)]])
    assert await query.answer([InlineQueryResultCachedDocument("r1", "a cat", file_id, caption="/img cat",
                                                               reply_markup=share)],
                              is_personal=True, cache_time=5, next_offset="20")
    answer = botapi_bot.inline_queries[query.id]["answer"]
    assert (answer["is_personal"], answer["cache_time"], answer["next_offset"]) == (True, 5, "20")
    posted = inline.choose(botapi_bot, USER, query.id, "r1", FRIEND)
    assert posted["via_bot"]["id"] == botapi_bot.id and posted["from"]["id"] == USER
    assert posted["document"]["file_id"] == file_id and posted["caption"] == "/img cat"
    assert posted["reply_markup"] == share.to_dict()
    assert botapi_bot.history(FRIEND) == [posted]
    with pytest.raises(LookupError):  # a result the answer did not have
        inline.choose(botapi_bot, USER, query.id, "r2", FRIEND)


async def test_a_result_chosen_in_the_bots_own_chat_reaches_the_bot(tg, botapi_bot):
    query = await query_of(tg, botapi_bot)
    await query.answer([InlineQueryResultArticle("a", "hello", InputTextMessageContent("hi *there*", "Markdown"))])
    posted = inline.choose(botapi_bot, USER, query.id, "a", USER)
    assert posted["text"] == "hi there" and posted["via_bot"]["username"] == botapi_bot.user["username"]
    [update] = [u for u in await tg.get_updates(offset=-1) if u.message]
    assert update.message.via_bot.id == botapi_bot.id


@pytest.mark.parametrize(("results", "button", "error"), [
    ([InlineQueryResultArticle("x", "a", InputTextMessageContent("a"))] * 2, None, "RESULT_ID_DUPLICATE"),
    ([InlineQueryResultArticle(str(n), "a", InputTextMessageContent("a")) for n in range(51)], None,
     "RESULTS_TOO_MUCH"),
    ([InlineQueryResultArticle("x" * 65, "a", InputTextMessageContent("a"))], None, "RESULT_ID_INVALID"),
    ([InlineQueryResultCachedPhoto("p", "AgACnot-a-file")], None, "wrong file identifier"),
    ([], InlineQueryResultsButton("go", start_parameter="no spaces"), "START_PARAM_INVALID"),
    ([], InlineQueryResultsButton("go", start_parameter="x" * 65), "START_PARAM_INVALID"),
])
async def test_answers_against_the_documented_fields_are_refused_as_telegram_does(tg, botapi_bot, results, button,
                                                                                  error):
    query = await query_of(tg, botapi_bot)
    with pytest.raises(BadRequest, match=f"(?i){error}"):  # python-telegram-bot capitalizes it
        await query.answer(results, button=button)


async def test_a_file_of_another_kind_and_a_second_answer_are_refused(tg, botapi_bot):
    query = await query_of(tg, botapi_bot)
    with pytest.raises(BadRequest, match="(?i)wrong file identifier"):  # a document is no photo
        await query.answer([InlineQueryResultCachedPhoto("p", document(botapi_bot))])
    assert await query.answer([], button=InlineQueryResultsButton("Open the bot", start_parameter="inline"))
    with pytest.raises(BadRequest, match="(?i)query is too old"):
        await query.answer([])
    with pytest.raises(ValueError):  # Telegram clients send at most 256 characters
        inline.inject_inline_query(botapi_bot, USER, "x" * (inline.MAX_QUERY_CHARS + 1))
    with pytest.raises(ValueError):
        inline.inject_inline_query(botapi_bot, USER, "cat", chat_type="forum")


async def test_the_test_api_asks_and_chooses(botapi, botapi_bot, tg):
    file_id = document(botapi_bot)

    async def bot_answers():
        update = await botapi.wait_for(lambda: next((u for u in botapi_bot.updates if "inline_query" in u), None))
        await tg.answer_inline_query(update["inline_query"]["id"], [
            InlineQueryResultCachedDocument("r", "a cat", file_id)], is_personal=True)

    async with aiohttp.ClientSession() as http:

        answering = asyncio.create_task(bot_answers())
        async with http.post(f"{botapi.url}/_emulator/bots/{botapi_bot.token}/inline_queries",
                             json={"user": USER, "query": "cat", "offset": ""}) as response:
            answer = await response.json()
        await answering
        assert answer["ok"] and answer["is_personal"] and [r["id"] for r in answer["results"]] == ["r"]
        async with http.post(f"{botapi.url}/_emulator/bots/{botapi_bot.token}/inline_results",
                             json={"user": USER, "inline_query_id": answer["inline_query_id"], "result_id": "r",
                                   "chat_id": FRIEND}) as response:
            posted = await response.json()
    assert posted["via_bot"]["id"] == botapi_bot.id and posted["document"]["file_id"] == file_id


@pytest.mark.parametrize("button", [{"text": "📤", "switch_inline_query_chosen_chat": "cat"},
                                    {"text": "📤", "switch_inline_query_chosen_chat": {"query": 7}},
                                    {"text": "📤", "switch_inline_query_chosen_chat": {"allow_user_chats": "yes"}},
                                    {"text": "📤", "switch_inline_query": {"query": "cat"}}])
async def test_switch_inline_buttons_are_checked_against_the_documented_fields(botapi, botapi_bot, tg, button):
    botapi_bot.inject_text(USER, "/start")
    with pytest.raises(BadRequest, match="(?i)can't parse inline keyboard button"):
        await tg.send_message(USER, "a result", reply_markup={"inline_keyboard": [[button]]})
