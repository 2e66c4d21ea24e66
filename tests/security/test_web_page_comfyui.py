"""Threat row: a web page in the operator's browser, against ComfyUI's port and the pack's routes.

A real ComfyUI with the pack and its bot (against the Bot API emulator). The page cannot make the
bot send: an unproved ``send_to_chat`` is blanked by the editor gate (the render is still saved and
the node says why), a proof counts once, for its graph and chat, within five minutes, and the node
sends only to an allowed user or admin of the bot, as PostgreSQL says when it sends (``/allow`` lets
one in, a ban keeps one out); under DNS rebinding (a forged Host, and Chromium mapping evil.example to 127.0.0.1)
every route answers 403. A page of another origin -- another loopback port, a sandboxed frame
(``Origin: null``), or a page reaching ComfyUI at ``0.0.0.0``, ``[::ffff:127.0.0.1]`` or a LAN address,
which ComfyUI's own Origin check does not cover -- neither queues a prompt nor opens ``/ws`` (403).
A proof used on one backend of the bot sends nothing on another, nor after a restart (PostgreSQL keeps
it spent); the owner code is on the console only, never in the log ComfyUI serves at /internal/logs.
"""

import asyncio
import json
import re
import secrets
import time
import urllib.error
import urllib.request

import asyncpg
import pytest
from aiohttp import web

from comfyui_courier.jobs.editor_proof import PROOF_KEY, sign
from comfyui_courier.store import access
from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.fixtures.comfyui import free_port
from comfyui_courier.tests.support.http import handshake
from comfyui_courier.tests.support.requires import require_chromium

TOKEN = "editor-token-" + "x" * 20
USER = 4242  # on the allowlist
STRANGER = 5555  # not on it
LET_IN = 6666  # let in with /allow only: in PostgreSQL, not in the settings
BANNED = 7777  # let in with /allow, then banned
BOOT_S = 90
_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def graph(chat: str, prefix: str = "courier/webpage") -> dict:
    return {"1": {"class_type": "EmptyImage", "inputs": {"width": 16, "height": 16, "batch_size": 1, "color": 0}},
            "2": {"class_type": "CourierTelegramOutput",
                  "inputs": {"filename_prefix": prefix, "images": ["1", 0], "send_to_chat": chat}}}


def proof(prompt: dict, *, age_s: float = 0.0, token: str = TOKEN) -> dict:
    return sign(token, prompt, int((time.time() - age_s) * 1000), secrets.token_hex(16))


def request(server, method: str, path: str, body=None, headers=None) -> tuple[int, dict | str]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with _LOCAL.open(req, timeout=30) as reply:
            status, text = reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


async def queue_and_wait(server, prompt: dict, proof_: dict | None = None) -> dict:
    """POST /prompt as a page or the editor would; the prompt's /history record once it is done."""
    extra = {PROOF_KEY: proof_} if proof_ is not None else {}
    status, reply = await asyncio.to_thread(request, server, "POST", "/prompt",
                                            {"prompt": prompt, "client_id": "page", "extra_data": extra})
    assert status == 200, reply
    prompt_id = reply["prompt_id"]
    deadline = time.monotonic() + 60
    while True:
        _, history = await asyncio.to_thread(request, server, "GET", f"/history/{prompt_id}")
        if prompt_id in history and history[prompt_id]["status"].get("completed") is not None:
            record = history[prompt_id]
            assert record["status"]["status_str"] == "success", json.dumps(record["status"]["messages"])[-2000:]
            return record
        assert time.monotonic() < deadline, f"prompt {prompt_id} did not finish\n{server.log_tail()}"
        await asyncio.sleep(0.2)


def sent_to(bot, chat: int) -> list:
    return [c for c in bot.calls if c.method in ("sendDocument", "sendPhoto")
            and str(c.params.get("chat_id")) == str(chat)]


async def bot_settled(server) -> None:
    deadline = time.monotonic() + BOOT_S
    while True:
        health = await asyncio.to_thread(server.get_json, "/courier/health")
        bot = health["components"]["bot"]
        if bot["state"] == "ok":
            return
        assert bot["state"] in ("starting", "off") and time.monotonic() < deadline, f"{health}\n{server.log_tail()}"
        await asyncio.sleep(0.25)


@pytest.fixture
async def comfyui_with_bot(comfyui_factory, botapi, botapi_bot, pg_database):
    server = comfyui_factory(start=False, env={
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN,
        "COURIER_ALLOWED_USERS": str(USER)})
    await asyncio.to_thread(server.start)
    await bot_settled(server)
    return server


async def test_send_to_chat_needs_a_fresh_proof_for_its_graph_and_an_allowed_chat(comfyui_with_bot, botapi_bot):
    server = comfyui_with_bot
    botapi_bot.inject_text(USER, "/help")  # a user who has started the bot
    botapi_bot.inject_text(STRANGER, "/help")
    # the attack of issue 17: one unauthenticated POST /prompt
    record = await queue_and_wait(server, graph(str(USER)))
    (ref,) = record["outputs"]["2"]["images"]
    assert (server.base_directory / "output" / ref["subfolder"] / ref["filename"]).is_file()  # still saved
    assert "no proof of the editor" in record["outputs"]["2"]["text"][0]
    assert record["prompt"][2]["2"]["inputs"]["send_to_chat"] == ""  # blanked before it ran
    assert sent_to(botapi_bot, USER) == []

    valid = proof(graph(str(USER), "courier/proved"))
    record = await queue_and_wait(server, graph(str(USER), "courier/proved"), valid)
    assert "text" not in record["outputs"]["2"]
    assert PROOF_KEY not in record["prompt"][3]  # the proof is not left in /history
    assert len(sent_to(botapi_bot, USER)) == 2  # the lossless file and its preview

    refused = {
        "replayed": (graph(str(USER), "courier/proved"), valid),
        "stale": (graph(str(USER), "courier/stale"), proof(graph(str(USER), "courier/stale"), age_s=301)),
        "another graph": (graph(str(USER), "courier/other"), proof(graph(str(USER), "courier/proved"))),
        "another chat": (graph(str(USER), "courier/chat"), proof(graph("7", "courier/chat"))),
        "not allowed": (graph(str(STRANGER), "courier/stranger"), proof(graph(str(STRANGER), "courier/stranger"))),
        "guessed token": (graph(str(USER), "courier/guess"), proof(graph(str(USER), "courier/guess"), token="x")),
    }
    for case, (prompt, given) in refused.items():
        record = await queue_and_wait(server, prompt, given)
        assert "not sent to Telegram" in record["outputs"]["2"]["text"][0], case
        if case == "not allowed":  # a good proof: the node refuses the chat as it sends
            assert refusal(record) == f"chat {STRANGER} is not an allowed user or admin of the bot"
    assert len(sent_to(botapi_bot, USER)) == 2 and sent_to(botapi_bot, STRANGER) == []


async def test_a_user_let_in_only_in_postgresql_receives_the_render_and_a_banned_one_does_not(
        comfyui_with_bot, botapi_bot, pg_database):
    server = comfyui_with_bot
    conn = await asyncpg.connect(pg_database)
    try:
        for user in (LET_IN, BANNED):
            await access.set_allowed(conn, user, True)  # as /allow does
        await access.set_banned(conn, BANNED, True)
    finally:
        await conn.close()
    for user in (LET_IN, BANNED):
        botapi_bot.inject_text(user, "/help")  # users who have started the bot
    let_in, banned = graph(str(LET_IN), "courier/let-in"), graph(str(BANNED), "courier/banned")
    record = await queue_and_wait(server, let_in, proof(let_in))
    assert "text" not in record["outputs"]["2"]
    assert len(sent_to(botapi_bot, LET_IN)) == 2  # the lossless file and its preview
    record = await queue_and_wait(server, banned, proof(banned))
    (ref,) = record["outputs"]["2"]["images"]
    assert (server.base_directory / "output" / ref["subfolder"] / ref["filename"]).is_file()  # still saved
    assert refusal(record) == f"chat {BANNED} is not an allowed user or admin of the bot"
    assert sent_to(botapi_bot, BANNED) == []


async def test_a_proof_sends_once_on_every_backend_of_the_bot(comfyui_with_bot, comfyui_factory, botapi, botapi_bot,
                                                             pg_database):
    """A second ComfyUI serving the same bot (a fresh gate, as after a restart) approves a copy of a used
    proof in its own memory; PostgreSQL, which both share, lets it send nothing (it sent again)."""
    first = comfyui_with_bot
    botapi_bot.inject_text(USER, "/help")  # a user who has started the bot
    prompt = graph(str(USER), "courier/once")
    given = proof(prompt)
    record = await queue_and_wait(first, prompt, given)
    assert "text" not in record["outputs"]["2"] and len(sent_to(botapi_bot, USER)) == 2
    second = comfyui_factory(start=False, env={
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN, "COURIER_ALLOWED_USERS": str(USER),
        "COURIER_RECEIVE_UPDATES": "0"})  # the first takes the updates
    await asyncio.to_thread(second.start)
    await bot_settled(second)
    record = await queue_and_wait(second, prompt, given)
    assert refusal(record) == "the editor's proof was already used (on another server of the bot, or before a restart)"
    assert len(sent_to(botapi_bot, USER)) == 2


async def test_the_owner_code_is_on_the_console_and_never_in_the_log_comfyui_serves(comfyui_with_bot):
    """No admin yet: the owner code is printed for the operator. Whoever reaches ComfyUI reads its log at
    /internal/logs (logging and sys.stderr end there): the code must not be in it."""
    server = comfyui_with_bot
    (code,) = re.findall(r"/start ([A-Za-z0-9_-]{22}) ", server.log_text())  # ComfyUI's stdout and stderr
    status, served = await asyncio.to_thread(request, server, "GET", "/internal/logs")
    assert status == 200 and "[Courier]" in served  # our log lines are there
    assert code not in served
    assert "owner code is printed on the console (stderr), not in this log" in served


def refusal(record: dict) -> str:
    """Why Telegram Output sent nothing, as its UI text says after the prefix every refusal has."""
    (text,) = record["outputs"]["2"]["text"]
    assert text.startswith("not sent to Telegram: "), text
    return text.removeprefix("not sent to Telegram: ")


async def serve_page(script: str):
    """An aiohttp server on a free loopback port whose one page runs ``script``: (runner, port)."""
    async def index(_):
        return web.Response(text=f"<script>{script}</script>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, port


async def attack_page(host_name: str, comfy_port: int):
    """A page that POSTs /prompt and calls /courier/* on ComfyUI at ``host_name``."""
    script = f"""
      const target = "http://{host_name}:{comfy_port}";
      const body = JSON.stringify({{prompt: {json.dumps(graph(str(USER), "courier/attack"))}, client_id: "page"}});
      async function hit(path, init) {{
        try {{ const r = await fetch(target + path, init); return r.type === "opaque" ? "opaque" : r.status; }}
        catch (e) {{ return "failed: " + e; }}
      }}
      window.results = Promise.all([
        hit("/prompt", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}}),
        hit("/api/prompt", {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}}),
        hit("/courier/files/delete", {{method: "POST", mode: "no-cors", body: "{{}}"}}),
        hit("/courier/health", {{mode: "no-cors"}}),
      ]).then((r) => (window.done = r));
    """
    return await serve_page(script)


async def test_dns_rebinding_and_cross_origin_pages_reach_nothing(comfyui_with_bot, botapi_bot, tmp_path):
    server = comfyui_with_bot
    comfy_port = int(server.url.rsplit(":", 1)[1])
    forged = {"Host": f"evil.example:{comfy_port}", "Origin": f"http://evil.example:{comfy_port}"}
    status, reply = await asyncio.to_thread(request, server, "POST", "/prompt",
                                            {"prompt": graph(str(USER))}, forged)
    assert status == 403 and reply["error"]["code"] == "host_not_allowed"
    for path in ("/courier/health", "/api/courier/commands", "/queue", "/history", "/"):
        status, _ = await asyncio.to_thread(request, server, "GET", path, None, forged)
        assert status == 403, path
    assert (await asyncio.to_thread(request, server, "GET", "/courier/health"))[0] == 200  # 127.0.0.1 passes

    binary = require_chromium()
    pages = [await attack_page("evil.example", comfy_port), await attack_page("127.0.0.1", comfy_port)]
    try:
        async with Chromium(binary, tmp_path / "profile",
                            "--host-resolver-rules=MAP evil.example 127.0.0.1") as browser:
            page = await browser.new_page()
            for (_, port), origin in zip(pages, ("evil.example", "127.0.0.1"), strict=True):
                await page.goto(f"http://{origin}:{port}/")
                results = await page.wait_for("window.done", timeout=30, what=f"the {origin} page's requests")
                assert all(r == "opaque" or str(r).startswith("failed") for r in results), results
    finally:
        for runner, _ in pages:
            await runner.cleanup()
    _, history = await asyncio.to_thread(request, server, "GET", "/history")
    queued = [r["prompt"][2]["2"]["inputs"].get("filename_prefix") for r in history.values()]
    assert "courier/attack" not in queued  # neither page's prompt was queued
    assert sent_to(botapi_bot, USER) == []
    log = server.log_text()
    assert "Host 'evil.example:" in log  # the rebinding page was refused by the Host check
    assert f"Origin 'http://127.0.0.1:{pages[1][1]}' is not this server's" in log  # the other port's page


IP_LITERAL_ATTACKS = {"courier/attack-any": "0.0.0.0", "courier/attack-mapped": "[::ffff:127.0.0.1]",
                      "courier/attack-null": "127.0.0.1"}  # the last from a sandboxed frame: Origin null
PROBE = """
async function probe(target, prefix) {
  const body = JSON.stringify({prompt: GRAPHS[prefix], client_id: "page"});
  let post;
  try {
    post = (await fetch(target + "/prompt", {method: "POST", mode: "no-cors",
                                             headers: {"Content-Type": "text/plain"}, body})).type;
  } catch (e) { post = "failed: " + e; }
  const socket = await new Promise((resolve) => {
    const ws = new WebSocket(target.replace("http:", "ws:") + "/ws?clientId=page");
    ws.onopen = () => { ws.close(); resolve("open"); };
    ws.onerror = () => resolve("refused");
  });
  return {prefix, post, socket};
}
"""


async def ip_literal_page(comfy_port: int):
    """A page that POSTs /prompt (text/plain, no preflight) and opens /ws on ComfyUI at ``0.0.0.0`` and
    ``[::ffff:127.0.0.1]``, and through a sandboxed frame (``Origin: null``) at ``127.0.0.1``."""
    common = f"const GRAPHS = {json.dumps({prefix: graph(str(USER), prefix) for prefix in IP_LITERAL_ATTACKS})};{PROBE}"
    target = {prefix: f"http://{host}:{comfy_port}" for prefix, host in IP_LITERAL_ATTACKS.items()}
    frame = (f"<script>{common}probe({json.dumps(target['courier/attack-null'])}, 'courier/attack-null')"
             ".then((r) => parent.postMessage(r, '*'));</script>")
    srcdoc = json.dumps(frame).replace("</", "<\\/")  # a JS string inside the page's <script>
    script = f"""{common}
      const fromFrame = new Promise((resolve) => window.addEventListener("message", (e) => resolve(e.data)));
      const frame = document.createElement("iframe");
      frame.sandbox = "allow-scripts";
      frame.srcdoc = {srcdoc};
      document.documentElement.append(frame);
      Promise.all([probe({json.dumps(target['courier/attack-any'])}, "courier/attack-any"),
                   probe({json.dumps(target['courier/attack-mapped'])}, "courier/attack-mapped"),
                   fromFrame]).then((r) => (window.done = r));
    """
    return await serve_page(script)


def queued_prefixes(server) -> set[str]:
    """The filename prefixes of Telegram Output in every prompt ComfyUI holds: running, pending or done."""
    _, queue = request(server, "GET", "/queue")
    _, history = request(server, "GET", "/history")
    prompts = [item[2] for item in queue["queue_running"] + queue["queue_pending"]]
    prompts += [record["prompt"][2] for record in history.values()]
    return {prompt["2"]["inputs"].get("filename_prefix") for prompt in prompts if "2" in prompt}


async def test_a_page_on_another_origin_reaches_nothing_through_ip_literal_hosts(comfyui_factory, pg_database,
                                                                                  tmp_path):
    """0.0.0.0 and [::ffff:127.0.0.1] are not loopback to ComfyUI's check, and it lets Origin null through."""
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database})
    await asyncio.to_thread(server.start)
    comfy_port = int(server.url.rsplit(":", 1)[1])
    lan = f"192.168.1.5:{comfy_port}"  # ComfyUI run with --listen 0.0.0.0, reached at its LAN address
    status, reply = await asyncio.to_thread(request, server, "POST", "/prompt", {"prompt": {}},
                                            {"Host": lan, "Origin": f"http://evil.example:{comfy_port}"})
    assert (status, reply["error"]["code"]) == (403, "origin_not_allowed"), reply
    status, reply = await asyncio.to_thread(request, server, "POST", "/prompt", {"prompt": {}},
                                            {"Host": lan, "Origin": f"http://{lan}"})
    assert status == 400 and "type" in reply["error"], reply  # its own page: ComfyUI judged the (empty) prompt
    for origin, status in ((f"http://evil.example:{comfy_port}", 403), (f"http://{lan}", 101)):
        assert await handshake(f"{server.url}/ws?clientId=page", lan, origin) == status, origin
    runner, port = await ip_literal_page(comfy_port)
    try:
        async with Chromium(require_chromium(), tmp_path / "profile",
                            "--host-resolver-rules=MAP evil.example 127.0.0.1") as browser:
            page = await browser.new_page()
            await page.goto(f"http://evil.example:{port}/")
            results = await page.wait_for("window.done", timeout=30, what="the page's requests")
    finally:
        await runner.cleanup()
    assert {r["prefix"] for r in results} == set(IP_LITERAL_ATTACKS), results
    assert queued_prefixes(server) & set(IP_LITERAL_ATTACKS) == set()  # no prompt of the page's was queued
    assert all(r["post"] == "opaque" and r["socket"] == "refused" for r in results), results
    log = server.log_text()
    for origin in (f"'http://evil.example:{port}'", "'null'"):
        assert f"Origin {origin} is not this server's" in log, origin  # refused by the Host guard
