"""Threat row: a web page in the operator's browser, against the emulator behind ``python <pack> try``.

The emulator is started as ``try`` starts it (``tryout.start_emulator``: its own port, one bot
with a random token). The attacks are made by a real Chromium:

- CSRF: a page served from another loopback port sends, as any site can without a CORS
  preflight, ``fetch(..., {mode: "no-cors", method: "POST"})`` with a ``text/plain`` body (an
  injected ``/demo csrf`` from user 42, an added bot) and with a ``FormData`` body (a photo
  from user 42). The page is even given the bot's token, which a real attacker cannot know.
- DNS rebinding: Chromium resolves ``evil.example`` to 127.0.0.1 (``--host-resolver-rules``),
  loads ``http://evil.example:<emulator port>/`` and asks the test API same-origin, which the
  browser allows: it must get 403 and no token.

Each refusal is checked twice: by what the emulator answered (its access log, so a request
that never arrived fails the test) and by its state (no update queued, no bot added). Then
the same rules over plain HTTP: text/plain is 415, a foreign Origin or Host is 403, 100,000
nested ``[`` is 400, and the chat page's own requests still pass.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import re

import aiohttp
import pytest
from aiohttp import web
from PIL import Image

from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.fixtures.comfyui import free_port
from comfyui_courier.tests.support.requires import require_chromium
from comfyui_courier.tools.tryout import start_emulator

pytestmark = pytest.mark.timeout(120)

USER = 42
ATTACK = """(async () => {
  const api = %(api)s, token = %(token)s, sent = [];
  const post = async (path, body) => {
    await fetch(api + path, {mode: "no-cors", method: "POST", body});
    sent.push(path);
  };
  await post(`/bots/${token}/messages`, JSON.stringify({user_id: %(user)d, text: "/demo csrf"}));
  await post("/bots", JSON.stringify({token: "666:evil"}));
  const form = new FormData();
  form.append("user_id", "%(user)d");
  const png = Uint8Array.from(atob(%(png)s), (c) => c.charCodeAt(0));
  form.append("photo", new Blob([png], {type: "image/png"}), "x.png");
  await post(`/bots/${token}/messages`, form);
  return sent;
})()"""
REBOUND = """(async () => {
  const answers = [];
  for (const [method, path, body] of %(requests)s) {
    const reply = await fetch(path, method === "GET" ? {} : {
      method, headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
    answers.push([reply.status, await reply.text()]);
  }
  return answers;
})()"""


def png() -> str:
    """A real picture, base64: on the code before the guard, the photo was injected too."""
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(buffer, "PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture
async def emulator():
    emulator = await start_emulator(free_port())
    try:
        yield emulator
    finally:
        await emulator.stop()


@pytest.fixture
def access_log(caplog):
    """The emulator's access log: ``(method, path, status)`` of each request it answered."""
    caplog.set_level(logging.INFO, logger="aiohttp.access")
    pattern = re.compile(r'"(\w+) (\S+) HTTP/[\d.]+" (\d+)')

    def answered() -> list[tuple[str, str, int]]:
        return [(m[1], m[2], int(m[3])) for record in caplog.records if record.name == "aiohttp.access"
                if (m := pattern.search(record.getMessage()))]
    return answered


@pytest.fixture
def chromium():
    return require_chromium()


async def test_a_page_from_another_loopback_port_cannot_write_to_the_emulator(emulator, access_log, chromium,
                                                                               tmp_path):
    bot = emulator.bots[0]
    api = f"{emulator.url}/_emulator"
    async def cats(_: web.Request) -> web.Response:
        return web.Response(text="<!doctype html><title>cats</title>", content_type="text/html")

    attacker = web.Application()
    attacker.router.add_get("/", cats)
    runner = web.AppRunner(attacker)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", free_port())
    await site.start()
    try:
        async with Chromium(chromium, tmp_path / "profile") as browser:
            page = await browser.new_page()
            await page.goto(f"http://127.0.0.1:{runner.addresses[0][1]}/")
            sent = await page.evaluate(ATTACK % {"api": json.dumps(api), "token": json.dumps(bot.token),
                                                 "user": USER, "png": json.dumps(png())})
    finally:
        await runner.cleanup()
    paths = [f"/_emulator/bots/{bot.token}/messages", "/_emulator/bots", f"/_emulator/bots/{bot.token}/messages"]
    assert sent == [path.removeprefix("/_emulator") for path in paths]  # every fetch was made ...
    assert [(m, p, s) for m, p, s in access_log() if m == "POST"] == [("POST", p, 403) for p in paths]  # ... refused
    assert bot.updates == [] and bot.history(USER) == [] and emulator.bots == [bot]


async def test_a_rebound_name_gets_nothing_from_the_emulator(emulator, access_log, chromium, tmp_path):
    bot = emulator.bots[0]
    requests = [["GET", "/_emulator/bots", None], ["GET", "/_emulator/users", None],
                ["POST", f"/_emulator/bots/{bot.token}/messages", {"user_id": USER, "text": "/demo rebound"}],
                ["POST", "/_emulator/bots", {"token": "666:evil"}]]
    async with Chromium(chromium, tmp_path / "profile", "--host-resolver-rules=MAP evil.example 127.0.0.1") as browser:
        page = await browser.new_page()
        await page.goto(f"http://evil.example:{emulator.port}/")
        assert await page.evaluate("location.origin") == f"http://evil.example:{emulator.port}"
        answers = await page.evaluate(REBOUND % {"requests": json.dumps(requests)})
    assert [status for status, _ in answers] == [403] * len(requests), answers
    assert not any(bot.token.partition(":")[2] in text for _, text in answers)
    assert ("GET", "/", 403) in access_log()  # the chat page itself is not served to that name either
    assert bot.updates == [] and emulator.bots == [bot]


@pytest.fixture
async def http():
    async with aiohttp.ClientSession(trust_env=False) as session:
        yield session


async def test_a_text_plain_write_is_415_and_json_passes(emulator, http):
    bot = emulator.bots[0]
    body = json.dumps({"user_id": USER, "text": "/demo csrf"})
    url = f"{emulator.url}/_emulator/bots/{bot.token}/messages"
    for content_type in ("text/plain;charset=UTF-8", "application/x-www-form-urlencoded"):
        async with http.post(url, data=body, headers={"Content-Type": content_type}) as reply:
            assert reply.status == 415, await reply.text()
    async with http.post(f"{emulator.url}/_emulator/bots") as reply:  # no body, no type: refused too
        assert reply.status == 415
    assert bot.updates == [] and len(emulator.bots) == 1
    async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as reply:
        assert reply.status == 200
    assert len(bot.updates) == 1


@pytest.mark.parametrize("origin", ["http://127.0.0.1:1", "http://evil.example", "null"])
async def test_a_foreign_origin_is_403(emulator, http, origin):
    bot = emulator.bots[0]
    async with http.post(f"{emulator.url}/_emulator/bots/{bot.token}/messages", headers={"Origin": origin},
                         json={"user_id": USER, "text": "/demo csrf"}) as reply:
        assert reply.status == 403
    assert bot.updates == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]"])
async def test_the_chat_pages_own_origin_passes(emulator, http, host):
    own = f"{host}:{emulator.port}"
    async with http.post(f"{emulator.url}/_emulator/users", headers={"Host": own, "Origin": f"http://{own}"},
                         json={"id": USER, "first_name": "Ada"}) as reply:
        assert reply.status == 200
    assert emulator.users[USER]["first_name"] == "Ada"


async def test_a_foreign_host_is_403_on_every_route(emulator, http):
    """DNS rebinding without a browser: the name is the attacker's, the address ours."""
    bot = emulator.bots[0]
    emulator.add_user(USER)
    paths = ["/", "/web/chat.js", "/_emulator/bots", "/_emulator/users", f"/_emulator/bots/{bot.token}/chats/{USER}",
             f"/_emulator/bots/{bot.token}/chats/{USER}/events", f"/_emulator/bots/{bot.token}/outbox",
             f"/bot{bot.token}/getMe"]
    for path in paths:
        async with http.get(f"{emulator.url}{path}", headers={"Host": f"evil.example:{emulator.port}"}) as reply:
            assert reply.status == 403, path
            assert bot.token.partition(":")[2] not in await reply.text()
    async with http.get(f"{emulator.url}/_emulator/bots") as reply:  # as the chat page asks
        assert reply.status == 200 and [b["token"] for b in await reply.json()] == [bot.token]


async def test_json_nested_100000_deep_is_400(emulator, http):
    bot = emulator.bots[0]
    deep = "[" * 100_000
    for url in (f"{emulator.url}/_emulator/users", f"{emulator.url}/_emulator/bots/{bot.token}/messages",
                f"{emulator.base_url}{bot.token}/sendMessage"):
        async with http.post(url, data=deep, headers={"Content-Type": "application/json"}) as reply:
            assert reply.status == 400, url
    async with http.post(f"{emulator.base_url}{bot.token}/sendMessage",
                         data={"chat_id": USER, "text": "x", "reply_markup": deep}) as reply:
        assert reply.status == 400
