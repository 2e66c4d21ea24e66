"""The test API over HTTP, under ``/_emulator``, so a person with curl can play the users.

Plain JSON in and out (not the Bot API envelope); errors are ``{"error": ...}``
with 400, or 404 for an unknown bot. Only this machine's programs and the chat page
may ask (``guard``): a write is ``application/json`` (a file, multipart), else 415.
With ``$E`` the emulator's URL and ``$J`` ``-H 'Content-Type: application/json'``::

    curl $E/_emulator/bots                                                 # -> [{"token", "user"}, ...]
    curl $J $E/_emulator/bots -d '{"token": "123:ABC"}'                    # -> {"token", "user"}
    curl $E/_emulator/users                                                # -> [User, ...]
    curl $J $E/_emulator/users -d '{"id": 42, "first_name": "Ada", "language_code": "de"}'
    curl $J $E/_emulator/bots/123:ABC/messages -d '{"user_id": 42, "text": "/demo hello"}'
    curl -X POST $E/_emulator/bots/123:ABC/messages -F user_id=42 -F photo=@cat.png -F caption=hi
    curl -X POST $E/_emulator/bots/123:ABC/messages -F user_id=42 -F document=@cat.png
    curl $J $E/_emulator/bots/123:ABC/callback_queries -d '{"user_id": 42, "message_id": 2, "data": "x"}'
    curl $J $E/_emulator/bots/123:ABC/inline_queries -d '{"user": 42, "query": "cat", "offset": ""}'  # -> the answer
    curl $J $E/_emulator/bots/123:ABC/inline_results -d '{"user": 42, "inline_query_id": "1", "result_id": "7-1",
                                                         "chat_id": 43}'  # picks one: posted in chat 43
    curl $J $E/_emulator/bots/123:ABC/web_app_data -d '{"user": 42, "data": "{}", "button_text": "🎨 New picture"}'
    curl "$E/_emulator/bots/123:ABC/outbox?since=0&timeout=30"   # long-polls for what the bot did
    curl $E/_emulator/bots/123:ABC/chats/42                        # the chat as the user sees it
    curl -N $E/_emulator/bots/123:ABC/chats/42/events              # the same, again on every change (SSE)
    curl $E/_emulator/bots/123:ABC/menu/42                         # the command menu user 42 sees
    curl -o out.png $E/_emulator/bots/123:ABC/files/<file_id>      # ?download=1: as an attachment
    curl $J $E/_emulator/bots/123:ABC/faults -d '{"method": "sendMessage", "status": 429, "retry_after": 3}'
    curl $J $E/_emulator/bots/123:ABC/faults -d '{"method": "sendPhoto", "hang": true, "times": 2}'
    curl $J $E/_emulator/bots/123:ABC/outage -d '{"seconds": 120}'                  # Telegram down 2 min
    curl $J $E/_emulator/bots/123:ABC/limits -d '{"enforce": true}'   # 429 past Telegram's flood limits
"""

from __future__ import annotations

import contextlib
import json
import mimetypes
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import inline
from .wire import ApiError, loads

if TYPE_CHECKING:
    from .bot import EmulatedBot
    from .server import BotApiEmulator

PREFIX = "/_emulator"
EMULATOR: web.AppKey[BotApiEmulator] = web.AppKey("botapi_emulator")
KEEPALIVE_S = 15.0
routes = web.RouteTableDef()


def make_app(emulator: BotApiEmulator) -> web.Application:
    app = web.Application(middlewares=[_errors])
    app[EMULATOR] = emulator
    app.add_routes(routes)
    return app


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        return web.json_response({"error": error.description}, status=400)
    except (KeyError, LookupError, ValueError, TypeError) as error:
        return web.json_response({"error": f"{type(error).__name__}: {error}"}, status=400)


def _bot(request: web.Request) -> EmulatedBot:
    try:
        return request.app[EMULATOR].bot(request.match_info["token"])
    except KeyError:
        raise web.HTTPNotFound(text=json.dumps({"error": "no such bot"}), content_type="application/json") from None


async def _body(request: web.Request) -> dict[str, Any]:
    body = loads(await request.read()) if request.body_exists else {}
    if not isinstance(body, dict):
        raise TypeError("expected a JSON object")
    return body


@routes.get("/bots")
async def list_bots(request: web.Request) -> web.Response:
    return web.json_response([{"token": bot.token, "user": bot.user} for bot in request.app[EMULATOR].bots])


@routes.post("/bots")
async def add_bot(request: web.Request) -> web.Response:
    body = await _body(request)
    bot = request.app[EMULATOR].add_bot(body.get("token"), username=body.get("username"),
                                        first_name=body.get("first_name", "Courier Test Bot"))
    return web.json_response({"token": bot.token, "user": bot.user})


@routes.get("/users")
async def list_users(request: web.Request) -> web.Response:
    return web.json_response(list(request.app[EMULATOR].users.values()))


@routes.post("/users")
async def add_user(request: web.Request) -> web.Response:
    body = await _body(request)
    return web.json_response(request.app[EMULATOR].add_user(
        int(body["id"]), body.get("first_name"), last_name=body.get("last_name"), username=body.get("username"),
        language_code=body.get("language_code", "en")))


@routes.post("/bots/{token}/messages")
async def inject_message(request: web.Request) -> web.Response:
    """JSON ``{user_id, text, reply_to_message_id?}``, or a form with a ``photo`` or ``document`` file."""
    bot = _bot(request)
    if request.content_type != "multipart/form-data":
        body = await _body(request)
        return web.json_response(bot.inject_text(int(body["user_id"]), str(body["text"]),
                                                 reply_to=body.get("reply_to_message_id")))
    form = await request.post()
    user_id = int(form["user_id"])
    reply_to = int(form["reply_to_message_id"]) if "reply_to_message_id" in form else None
    caption = str(form["caption"]) if "caption" in form else None
    if isinstance(photo := form.get("photo"), web.FileField):
        message = bot.inject_photo(user_id, photo.file.read(), caption=caption, reply_to=reply_to)
    elif isinstance(document := form.get("document"), web.FileField):
        message = bot.inject_document(user_id, document.file.read(), document.filename,
                                      mime_type=document.content_type, caption=caption, reply_to=reply_to)
    else:
        raise KeyError("a 'photo' or 'document' file part")
    return web.json_response(message)


TAKES_FILES = frozenset({inject_message})
"""The handlers that also take ``multipart/form-data`` (``guard``); every other write is JSON only."""


@routes.post("/bots/{token}/callback_queries")
async def inject_callback_query(request: web.Request) -> web.Response:
    body = await _body(request)
    return web.json_response(_bot(request).inject_callback_query(
        int(body["user_id"]), int(body["message_id"]), str(body["data"])))


@routes.post("/bots/{token}/inline_queries")
async def inject_inline_query(request: web.Request) -> web.Response:
    """``{user, query, offset?, chat_type?}``: the user types ``@bot query``; answers with the bot's answer
    (``{"ok": true, "inline_query_id", "results", "next_offset", "cache_time", "is_personal", "button"}``,
    or ``{"ok": false, "inline_query_id", "error"}`` where the emulator refused it), waiting up to 10 s."""
    bot, body = _bot(request), await _body(request)
    query = inline.inject_inline_query(bot, int(body["user"]), str(body.get("query", "")), str(body.get("offset", "")),
                                       str(body.get("chat_type", "sender")))
    call = await inline.answer_of(bot, query["id"])
    if not call.ok:
        return web.json_response({"ok": False, "inline_query_id": query["id"], "error": call.failure.description})
    return web.json_response({"ok": True, "inline_query_id": query["id"], **bot.inline_queries[query["id"]]["answer"]})


@routes.post("/bots/{token}/inline_results")
async def choose_inline_result(request: web.Request) -> web.Response:
    """``{user, inline_query_id, result_id, chat_id}``: the user picks a result; it is posted in ``chat_id``."""
    bot, body = _bot(request), await _body(request)
    return web.json_response(inline.choose(bot, int(body["user"]), str(body["inline_query_id"]),
                                           str(body["result_id"]), int(body["chat_id"])))


@routes.post("/bots/{token}/web_app_data")
async def inject_web_app_data(request: web.Request) -> web.Response:
    """``{user, data, button_text}``: what the Mini App of the chat's keyboard button sent (``keyboards``)."""
    body = await _body(request)
    return web.json_response(_bot(request).inject_web_app_data(int(body["user"]), str(body["data"]),
                                                               str(body["button_text"])))


@routes.get("/bots/{token}/outbox")
async def outbox(request: web.Request) -> web.Response:
    """Outbox calls from index ``since``; with ``timeout``, waits up to that long for one to exist."""
    bot = _bot(request)
    since = int(request.query.get("since", 0))
    timeout = float(request.query.get("timeout", 0))
    if timeout > 0:
        with contextlib.suppress(TimeoutError):
            await request.app[EMULATOR].wait_for(lambda: len(bot.outbox) > since, timeout)
    calls = bot.outbox[since:]
    return web.json_response({"calls": [call.to_json() for call in calls], "next": since + len(calls)})


@routes.get("/bots/{token}/chats/{chat_id}")
async def history(request: web.Request) -> web.Response:
    return web.json_response(_bot(request).history(int(request.match_info["chat_id"])))


@routes.get("/bots/{token}/chats/{chat_id}/events")
async def chat_events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: the chat view (``chat_view``) now, then again each time it changes."""
    emulator, bot, chat_id = request.app[EMULATOR], _bot(request), int(request.match_info["chat_id"])
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    sent = ""

    def news() -> str | bool:
        view = json.dumps(chat_view(bot, chat_id))
        return emulator.closing or (view != sent and view)

    while not emulator.closing:
        try:
            view = await emulator.wait_for(news, KEEPALIVE_S)
        except TimeoutError:
            await response.write(b": keepalive\n\n")
            continue
        if emulator.closing:
            break
        sent = view
        await response.write(f"data: {view}\n\n".encode())
    return response


def chat_view(bot: EmulatedBot, chat_id: int) -> dict[str, Any]:
    """What a Telegram client shows of a private chat: messages, the command menu, callback answers."""
    user = bot.emulator.users.get(chat_id, {})
    answers = [call.params for call in bot.outbox if call.method == "answerCallbackQuery"]
    return {"messages": bot.history(chat_id), "menu": bot.command_menu(chat_id, user.get("language_code", "")),
            "answers": answers, "keyboard": bot.keyboards.get(chat_id)}


@routes.get("/bots/{token}/menu/{user_id}")
async def command_menu(request: web.Request) -> web.Response:
    emulator, user_id = request.app[EMULATOR], int(request.match_info["user_id"])
    language = emulator.users.get(user_id, {}).get("language_code", "")
    return web.json_response(_bot(request).command_menu(user_id, language))


@routes.get("/bots/{token}/files/{file_id}")
async def file_bytes(request: web.Request) -> web.Response:
    """The file with its MIME type, so a browser shows it; ``?download=1`` saves it under its name."""
    stored = _bot(request).files[request.match_info["file_id"]]
    headers = {}
    if request.query.get("download"):
        name = stored.content.get("file_name") if isinstance(stored.content, dict) else None
        headers["Content-Disposition"] = f'attachment; filename="{name or stored.file_path.rpartition("/")[2]}"'
    return web.Response(body=stored.data, headers=headers,
                        content_type=mimetypes.guess_type(stored.file_path)[0] or "application/octet-stream")


@routes.post("/bots/{token}/faults")
async def add_fault(request: web.Request) -> web.Response:
    """``{method, times?, hang?, perform?}`` or ``{method, times?, status?, retry_after?, description?}``."""
    bot, body = _bot(request), await _body(request)
    if body.get("hang"):
        bot.hang(str(body["method"]), times=int(body.get("times", 1)), perform=bool(body.get("perform")))
    else:
        bot.fail(str(body["method"]), times=int(body.get("times", 1)), status=int(body.get("status", 429)),
                 retry_after=body.get("retry_after"), description=body.get("description"))
    return web.json_response({"ok": True})


@routes.post("/bots/{token}/outage")
async def add_outage(request: web.Request) -> web.Response:
    """``{seconds, hang?}``: every send, edit and delete fails (502, or no answer) for ``seconds``."""
    bot, body = _bot(request), await _body(request)
    bot.outage(float(body["seconds"]), hang=bool(body.get("hang")))
    return web.json_response({"ok": True})


@routes.get("/bots/{token}/limits")
async def get_limits(request: web.Request) -> web.Response:
    return web.json_response({"enforce": _bot(request).flood_limits is not None})


@routes.post("/bots/{token}/limits")
async def set_limits(request: web.Request) -> web.Response:
    """``{enforce: bool}``: answer 429 past Telegram's flood limits (``limits``), or no longer."""
    bot, body = _bot(request), await _body(request)
    if not isinstance(body.get("enforce"), bool):
        raise TypeError("enforce: true or false")
    bot.enforce_limits(body["enforce"])
    return web.json_response({"enforce": body["enforce"]})
