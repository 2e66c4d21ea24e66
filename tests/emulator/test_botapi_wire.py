"""The wire: every transport the Bot API accepts, the HTTP test API, and the standalone server."""

import asyncio
import io
import json
import signal
import sys
from pathlib import Path

import aiohttp
import pytest
from PIL import Image

from comfyui_courier.emulator.botapi import main as emulator_main

pytestmark = pytest.mark.timeout(30)

USER = 42
PACK_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def api(botapi, botapi_bot):
    botapi_bot.inject_text(USER, "/start")
    return f"{botapi.base_url}{botapi_bot.token}"


async def test_query_urlencoded_json_and_multipart_bodies_read_alike(botapi_bot, http, api):
    markup = {"inline_keyboard": [[{"text": "Go", "callback_data": "go"}]]}
    form = aiohttp.FormData({"chat_id": str(USER), "text": "multipart", "reply_markup": json.dumps(markup)})
    requests = [
        http.get(f"{api}/sendMessage", params={"chat_id": USER, "text": "query",
                                               "reply_markup": json.dumps(markup)}),
        http.post(f"{api}/sendMessage", data={"chat_id": USER, "text": "form", "reply_markup": json.dumps(markup)}),
        http.post(f"{api}/sendMessage", json={"chat_id": USER, "text": "json", "reply_markup": markup}),
        http.post(f"{api}/SENDMESSAGE", data=form),  # method names are case-insensitive
    ]
    for request in requests:
        async with request as response:
            body = await response.json()
            assert response.status == 200 and body["ok"] is True
            assert body["result"]["reply_markup"] == markup
    assert [(c.method, c.params) for c in botapi_bot.outbox] == [
        ("sendMessage", {"chat_id": USER, "text": text, "reply_markup": markup})
        for text in ("query", "form", "json", "multipart")]


async def test_multipart_upload_with_json_fields(botapi_bot, http, api):
    buffer = io.BytesIO()
    Image.new("RGB", (50, 40), "blue").save(buffer, "PNG")
    form = aiohttp.FormData()
    form.add_field("chat_id", str(USER))
    form.add_field("caption", "*bold* move", content_type="text/plain")
    form.add_field("parse_mode", "MarkdownV2")
    form.add_field("photo", buffer.getvalue(), filename="p.png", content_type="image/png")
    async with http.post(f"{api}/sendPhoto", data=form) as response:
        result = (await response.json())["result"]
    assert result["caption"] == "bold move"
    assert result["caption_entities"] == [{"type": "bold", "offset": 0, "length": 4}]
    assert [(p["width"], p["height"]) for p in result["photo"]] == [(50, 40)]
    assert botapi_bot.outbox[0].files["photo"].filename == "p.png"


async def test_bad_bodies_are_rejected(http, api):
    async with http.post(f"{api}/sendMessage", data=b"{not json", headers={"Content-Type": "application/json"}) as r:
        assert (r.status, (await r.json())["description"]) == (400, "Bad Request: can't parse JSON object")
    async with http.post(f"{api}/sendMessage", json={"chat_id": USER, "text": "x", "reply_markup": "{"}) as r:
        assert (await r.json())["description"] == "Bad Request: can't parse reply keyboard markup JSON object"


def nested(depth: int) -> str:
    """JSON objects nested ``depth`` deep; beyond 401, only the opening brackets (as an attacker sends them)."""
    return '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1) if depth <= 401 else "[" * depth


@pytest.mark.parametrize("depth", [400, 401, 100_000])
async def test_json_nesting_is_bounded_at_400_whatever_the_transport(botapi_bot, http, api, depth):
    """Deeper is unparsable (400), never a RecursionError (500): a JSON body, a form's JSON field."""
    body = f'{{"chat_id": {USER}, "text": "x", "reply_markup": {nested(depth - 1)}}}'  # the body is one deeper
    async with http.post(f"{api}/sendMessage", data=body, headers={"Content-Type": "application/json"}) as r:
        assert (r.status, (await r.json()).get("description")) == (
            (200, None) if depth <= 400 else (400, "Bad Request: can't parse JSON object"))
    form = {"chat_id": USER, "text": "x", "reply_markup": nested(depth)}
    async with http.post(f"{api}/sendMessage", data=form) as r:
        assert (r.status, (await r.json()).get("description")) == (
            (200, None) if depth <= 400 else (400, "Bad Request: can't parse reply keyboard markup JSON object"))
    assert len(botapi_bot.outbox) == (2 if depth <= 400 else 0)


async def test_files_are_served_only_under_their_path(botapi, botapi_bot, http, api):
    message = botapi_bot.inject_document(USER, b"%PDF-1.4 tiny", "doc.pdf")
    async with http.get(f"{api}/getFile", params={"file_id": message["document"]["file_id"]}) as response:
        file = (await response.json())["result"]
    assert file["file_path"] == "documents/file_1.pdf" and file["file_size"] == 13
    async with http.get(f"{botapi.base_file_url}{botapi_bot.token}/{file['file_path']}") as response:
        assert await response.read() == b"%PDF-1.4 tiny"
    async with http.get(f"{botapi.base_file_url}{botapi_bot.token}/documents/file_9.pdf") as response:
        assert (response.status, await response.json()) == (
            404, {"ok": False, "error_code": 404, "description": "Not Found"})


async def test_http_test_api_drives_a_demo(botapi, http):
    control = f"{botapi.url}/_emulator"
    async with http.post(f"{control}/bots", json={"token": "123456:DEMO-token"}) as response:
        assert (await response.json())["token"] == "123456:DEMO-token"
    bot = f"{control}/bots/123456:DEMO-token"
    async with http.post(f"{control}/users", json={"id": 7, "first_name": "Ada", "language_code": "de"}) as response:
        assert (await response.json())["language_code"] == "de"
    async with http.post(f"{bot}/messages", json={"user_id": 7, "text": "/demo hi"}) as response:
        assert (await response.json())["entities"][0]["type"] == "bot_command"
    form = aiohttp.FormData({"user_id": "7"})
    form.add_field("document", b"bytes", filename="in.bin", content_type="application/octet-stream")
    async with http.post(f"{bot}/messages", data=form) as response:
        file_id = (await response.json())["document"]["file_id"]
    async with http.get(f"{bot}/files/{file_id}") as response:
        assert await response.read() == b"bytes"

    async def bot_replies() -> None:
        api = f"{botapi.base_url}123456:DEMO-token"
        async with http.post(f"{api}/sendMessage", json={
                "chat_id": 7, "text": "pick", "reply_markup": {"inline_keyboard": [[
                    {"text": "A", "callback_data": "a"}]]}}) as response:
            assert response.status == 200

    waiting = asyncio.ensure_future(http.get(f"{bot}/outbox", params={"since": 0, "timeout": 10}))
    await bot_replies()
    async with await waiting as response:
        outbox = await response.json()
    assert outbox["next"] == 1 and outbox["calls"][0]["method"] == "sendMessage"
    async with http.post(f"{bot}/callback_queries", json={"user_id": 7, "message_id": 3, "data": "a"}) as response:
        assert (await response.json())["data"] == "a"
    async with http.get(f"{bot}/chats/7") as response:
        assert [m.get("text") for m in await response.json()] == ["/demo hi", None, "pick"]
    async with http.post(f"{bot}/faults", json={"method": "getMe", "status": 500}) as response:
        assert response.status == 200
    async with http.get(f"{botapi.base_url}123456:DEMO-token/getMe") as response:
        assert response.status == 500
    async with http.post(f"{bot}/callback_queries", json={"user_id": 7, "message_id": 3, "data": "zz"}) as response:
        assert response.status == 400 and "no button" in (await response.json())["error"]
    async with http.get(f"{control}/bots/1:nobody/chats/7") as response:
        assert response.status == 404


LAUNCH = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("comfyui_courier", sys.argv[1] + "/__init__.py",
                                              submodule_search_locations=[sys.argv[1]])
pack = importlib.util.module_from_spec(spec)
sys.modules["comfyui_courier"] = pack
spec.loader.exec_module(pack)
from comfyui_courier.emulator.botapi import main
sys.exit(main(sys.argv[2:]))
"""


async def test_main_serves_standalone_until_interrupted(http):
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", LAUNCH, str(PACK_ROOT), "--port", "0", "--token", "99:standalone",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd="/")
    try:
        # 60 s: a cold interpreter on a busy machine
        first_line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        url = first_line.rsplit(" ", 1)[-1].strip()
        assert url.startswith("http://127.0.0.1:")
        async with http.get(f"{url}/bot99:standalone/getMe") as response:
            assert (await response.json())["result"]["id"] == 99
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 10) == 0, (await process.stderr.read()).decode()


async def test_http_test_api_for_the_web_chat(botapi, botapi_bot, http):
    """What the web chat reads: bots with tokens, users, a user's menu, a chat's events, typed files."""
    control = f"{botapi.url}/_emulator"
    bot = f"{control}/bots/{botapi_bot.token}"
    botapi.add_user(USER, "Greta", language_code="de")
    async with http.get(f"{control}/bots") as response:
        assert await response.json() == [{"token": botapi_bot.token, "user": botapi_bot.user}]
    async with http.get(f"{control}/users") as response:
        assert await response.json() == [botapi.users[USER]]
    botapi_bot.commands[('{"type": "default"}', "")] = [{"command": "demo", "description": "Cards"}]
    botapi_bot.commands[('{"type": "all_private_chats"}', "de")] = [{"command": "demo", "description": "Karten"}]
    async with http.get(f"{bot}/menu/{USER}") as response:
        assert await response.json() == [{"command": "demo", "description": "Karten"}]
    async with http.get(f"{bot}/menu/7") as response:  # no language: the default list
        assert await response.json() == [{"command": "demo", "description": "Cards"}]

    async with http.get(f"{bot}/chats/{USER}/events") as events:
        assert events.content_type == "text/event-stream"
        first = json.loads((await events.content.readuntil(b"\n\n")).removeprefix(b"data: "))
        assert first["messages"] == [] and first["menu"][0]["description"] == "Karten"
        sent = botapi_bot.inject_photo(USER, png_bytes(), caption="/demoedit")
        second = json.loads((await asyncio.wait_for(events.content.readuntil(b"\n\n"), 5)).removeprefix(b"data: "))
        assert second["messages"] == [sent]
    async with http.get(f"{bot}/files/{sent['photo'][-1]['file_id']}") as response:
        assert response.content_type == "image/jpeg"
    document = botapi_bot.inject_document(USER, png_bytes(), "cat.png")["document"]
    async with http.get(f"{bot}/files/{document['file_id']}", params={"download": "1"}) as response:
        assert response.content_type == "image/png"
        assert response.headers["Content-Disposition"] == 'attachment; filename="cat.png"'
    async with http.get(f"{botapi.url}/") as response:
        assert response.status == 200 and "/web/chat.js" in await response.text()
    async with http.get(f"{botapi.url}/web/chat.js") as response:
        assert response.status == 200


def png_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (40, 30), "blue").save(buffer, "PNG")
    return buffer.getvalue()


def test_main_refuses_to_listen_beyond_loopback(capsys):
    with pytest.raises(SystemExit) as exit_info:
        emulator_main(["--host", "0.0.0.0", "--port", "0"])
    assert exit_info.value.code == 2
    assert "--host 0.0.0.0 is not a loopback address" in capsys.readouterr().err
