"""Inline mode: ``inline_query`` updates, ``answerInlineQuery``, and a user choosing a result.

A user types ``@bot words`` in some chat (``inject_inline_query``): the bot gets an ``inline_query``
update (``id``, ``from``, ``query`` up to 256 characters, ``offset``, ``chat_type``) and answers it
once with ``answerInlineQuery``, which is checked against the documented fields: ``results`` (at
most 50, ids of 1-64 bytes, unique), ``cache_time``, ``is_personal``, ``next_offset`` (at most 64
bytes) and ``button`` (``text`` and one of ``start_parameter``, 1-64 of A-Z a-z 0-9 _ -, or
``web_app``). Results may be cached files of the bot (``photo``, ``document``, ``video``, ``gif``,
``mpeg4_gif`` by file id, of the matching kind) or ``article``s; results by URL are not emulated.
Choosing one (``choose``) posts it in the chosen chat as Telegram does, from the user and
``via_bot``; the bot gets that message only in its own private chat with the user (elsewhere it
is no member). ``chosen_inline_result`` updates (``/setinlinefeedback``) are not emulated.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any

from .calls import Call, Verbs
from .params import read_caption, read_markup, read_text
from .wire import bad_request

if TYPE_CHECKING:
    from .bot import EmulatedBot

MAX_QUERY_CHARS = 256
CHAT_TYPES = frozenset({"sender", "private", "group", "supergroup", "channel"})
"""Where the query was typed: ``sender`` is the user's private chat with the bot itself."""
MAX_RESULTS = 50
_START_PARAMETER = re.compile(r"[A-Za-z0-9_-]{1,64}")
CACHED = {"photo": ("photo_file_id", "photo"), "document": ("document_file_id", "document"),
          "video": ("video_file_id", "video"), "gif": ("gif_file_id", "animation"),
          "mpeg4_gif": ("mpeg4_file_id", "animation")}
"""A cached result's type: the field naming its file, and the kind that file must be."""
TITLED = frozenset({"document", "video", "article"})
"""The result types whose ``title`` is required."""
_ids = itertools.count(1)
verbs = Verbs()


def inject_inline_query(bot: EmulatedBot, user_id: int, query: str, offset: str = "",
                        chat_type: str = "sender") -> dict[str, Any]:
    """``user_id`` types ``@bot query`` (the next page: ``offset``); returns the InlineQuery."""
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"an inline query has at most {MAX_QUERY_CHARS} characters")
    if chat_type not in CHAT_TYPES:
        raise ValueError(f"chat_type is one of {sorted(CHAT_TYPES)}, not {chat_type!r}")
    inline_query = {"id": str(next(_ids)), "from": bot.emulator.user(user_id), "query": query,
                    "offset": offset, "chat_type": chat_type}
    bot.inline_queries[inline_query["id"]] = {"query": inline_query, "answer": None}
    bot.add_update("inline_query", inline_query)
    return inline_query


async def answer_of(bot: EmulatedBot, query_id: str, timeout: float = 10.0) -> Call:
    """The bot's answerInlineQuery call for ``query_id`` (accepted or refused), waiting for it."""
    return await bot.emulator.wait_for(lambda: next(
        (c for c in bot.calls if c.method == "answerInlineQuery" and c.status is not None
         and str(c.params.get("inline_query_id")) == query_id), None), timeout)


def choose(bot: EmulatedBot, user_id: int, query_id: str, result_id: str, chat_id: int) -> dict[str, Any]:
    """``user_id`` picks result ``result_id`` of their answered query and sends it to ``chat_id``
    (their private chat with the bot, another user's, or a group: negative). Returns the Message."""
    asked = bot.inline_queries.get(query_id)
    if asked is None or asked["query"]["from"]["id"] != user_id or asked["answer"] is None:
        raise LookupError(f"no answered inline query {query_id} of user {user_id}")
    result = next((r for r in asked["answer"]["results"] if r["id"] == result_id), None)
    if result is None:
        raise LookupError(f"the answer has no result {result_id!r}")
    user = bot.emulator.user(user_id)
    if chat_id < 0:
        chat = bot.group_chat(chat_id, "supergroup", "Group")
    else:
        chat = bot.private_chat(bot.emulator.user(chat_id))
    message = bot.post(chat, user, {"via_bot": bot.sender, **_content(bot, result)}, None, read_markup(result))
    if chat_id == user_id:
        bot.add_update("message", message)
    return message


def _content(bot: EmulatedBot, result: dict[str, Any]) -> dict[str, Any]:
    """What the message of a chosen result shows."""
    if result["type"] == "article":
        return _article_text(result["input_message_content"])
    field, kind = CACHED[result["type"]]
    stored = bot.files[result[field]].content
    content = {kind: stored, **({"document": stored} if kind == "animation" else {})}
    return {**content, **read_caption(result)}


def _article_text(content: dict[str, Any]) -> dict[str, Any]:
    """An article's InputTextMessageContent as a message's text (checked as sendMessage's)."""
    return read_text({"text": content["message_text"], "parse_mode": content.get("parse_mode"),
                  "entities": content.get("entities")})


def _check_result(bot: EmulatedBot, result: Any, seen: set[str]) -> None:
    if not isinstance(result, dict) or not isinstance(result.get("type"), str):
        raise bad_request("can't parse InlineQueryResult: expected an Object")
    result_id = result.get("id")
    if not isinstance(result_id, str) or not 1 <= len(result_id.encode()) <= 64:
        raise bad_request("RESULT_ID_INVALID")
    if result_id in seen:
        raise bad_request("RESULT_ID_DUPLICATE")
    seen.add(result_id)
    kind = result["type"]
    if kind in TITLED and not (isinstance(result.get("title"), str) and result["title"]):
        raise bad_request(f'can\'t parse InlineQueryResult: field "title" must be of type String ({kind})')
    if kind == "article":
        content = result.get("input_message_content")
        if not isinstance(content, dict) or "message_text" not in content:
            raise bad_request("can't parse InputMessageContent: expected an Object with message_text")
        _article_text(content)
    elif kind in CACHED:
        field, file_kind = CACHED[kind]
        stored = bot.files.get(str(result.get(field, "")))
        if stored is None or stored.kind != file_kind:
            raise bad_request("wrong file identifier/HTTP URL specified")
        read_caption(result)
    else:
        raise bad_request("RESULT_TYPE_INVALID")
    read_markup(result)


def _check_button(button: Any) -> None:
    if button is None:
        return
    if not isinstance(button, dict) or not isinstance(button.get("text"), str) or not button["text"]:
        raise bad_request("can't parse InlineQueryResultsButton: text must be a non-empty String")
    start, web_app = button.get("start_parameter"), button.get("web_app")
    if (start is None) == (web_app is None):
        raise bad_request("can't parse InlineQueryResultsButton: one of start_parameter and web_app is needed")
    if start is not None and not (isinstance(start, str) and _START_PARAMETER.fullmatch(start)):
        raise bad_request("START_PARAM_INVALID")
    if web_app is not None and not (isinstance(web_app, dict) and str(web_app.get("url", "")).startswith("https://")):
        raise bad_request("BUTTON_URL_INVALID")


@verbs("answerInlineQuery", outbound=True)
async def _answer_inline_query(bot: EmulatedBot, call: Call) -> bool:
    params = call.params
    asked = bot.inline_queries.get(str(params.get("inline_query_id", "")))
    if asked is None or asked["answer"] is not None:
        raise bad_request("query is too old and response timeout expired or query ID is invalid")
    results = params.get("results")
    if not isinstance(results, list):
        raise bad_request('parameter "results" is required and must be an Array of InlineQueryResult')
    if len(results) > MAX_RESULTS:
        raise bad_request("RESULTS_TOO_MUCH")
    seen: set[str] = set()
    for result in results:
        _check_result(bot, result, seen)
    next_offset = params.get("next_offset", "")
    if not isinstance(next_offset, str) or len(next_offset.encode()) > 64:
        raise bad_request("NEXT_OFFSET_INVALID")
    cache_time = params.get("cache_time", 300)
    if not isinstance(cache_time, int) or isinstance(cache_time, bool) or cache_time < 0:
        raise bad_request("CACHE_TIME_INVALID")
    _check_button(params.get("button"))
    asked["answer"] = {"results": results, "next_offset": next_offset, "cache_time": cache_time,
                       "is_personal": bool(params.get("is_personal")), "button": params.get("button")}
    return True
