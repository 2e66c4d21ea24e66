"""The Courier panel in a real browser against a real ComfyUI with the pack, end to end.

Headless Chromium (Debian's ``chromium``) opens ComfyUI's editor, loads the pack's ``demo``
template from the template list, opens the Courier sidebar tab, enters the admin token, and
publishes the graph as ``/mycmd``. The Bot API emulator (on 127.0.0.1, in this process) then
plays a user sending ``/mycmd hi`` and gets an image back from the bot inside that ComfyUI;
no restart in between. ComfyUI is also an Anyone hidden service on a private test network,
so the panel shows a real onion address and its QR code (and, as it must then, asks for the
token even on loopback). The workflow menu's "Publish as Telegram command" then publishes the
same graph as ``/mycmd2`` through ComfyUI's dialogs, and two stored benchmark runs show up as
the panel's chart.

Screenshots go to ``artifacts/browser/``; ``docs/courier-panel.png`` in the README is the
``03-published.png`` of a run. Skips with the reason when COMFYUI_DIR, Chromium or anon is missing.
"""

from __future__ import annotations

import asyncio
import io
import json
import urllib.request

import pytest
from PIL import Image

from comfyui_courier.gpu.stats import summarize
from comfyui_courier.jobs.seed import seed_manifest
from comfyui_courier.store import benchmarks
from comfyui_courier.store.pool import connect
from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.fixtures.comfyui import PACK_FOLDER_NAME, PACK_ROOT
from comfyui_courier.tests.support.requires import require_chromium

TOKEN = "browser-test-token-5678"
USER = 777
ARTIFACTS = PACK_ROOT / "artifacts" / "browser"
ONION_S = 180  # ComfyUI's anon: start, bootstrap on the private network, publish the service
RESULT_S = 120
_LOCAL = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture
def chromium():
    return require_chromium()


def post_setting(server, key: str, value) -> None:
    request = urllib.request.Request(f"{server.url}/settings/{key}", data=json.dumps(value).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with _LOCAL.open(request, timeout=10) as reply:
        assert reply.status == 200


async def until(check, timeout: float, what: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := await asyncio.to_thread(check)):
        assert loop.time() < deadline, f"no {what} after {timeout:.0f} s"
        await asyncio.sleep(0.5)
    return value


@pytest.fixture
async def comfyui_with_everything(comfyui_factory, anyone_privnet, anon_binary, botapi, botapi_bot, pg_database):
    """ComfyUI + pack: bot on the emulator, admin token, PostgreSQL of the test, hidden service on the privnet."""
    server = comfyui_factory(start=False, env={
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN, "COURIER_PROGRESS_INTERVAL_S": "0",
        "COURIER_ALLOWED_USERS": "*", "COURIER_ANYONE": "1", "COURIER_ANYONE_AGREE_TO_TERMS": "1",
        "COURIER_ANON_BINARY": str(anon_binary)})
    server.prepare()
    anyone_privnet.write_test_network(server.user_directory / "courier")
    await asyncio.to_thread(server.start)  # off the loop: the emulator must answer the booting bot

    def ready():
        health = server.get_json("/courier/health")["components"]
        anyone = server.get_json("/courier/anyone", token=TOKEN)  # a hidden service: loopback is no proof
        return health["bot"]["state"] == "ok" and anyone["onion_address"] and health

    await until(ready, ONION_S, f"bot and hidden service; log:\n{server.log_tail()}")
    post_setting(server, "Comfy.TutorialCompleted", True)  # no first-run template dialog
    return server


def replies_to(request):
    return lambda call: call.result.get("reply_to_message", {}).get("message_id") == request["message_id"]


async def add_benchmark_runs(dsn: str) -> None:
    """Two stored runs of the Benchmark node, for the panel's chart."""
    connection = await connect(dsn)
    try:
        for device, wall_s in (("cpu", [2.0, 2.4, 2.2]), ("cuda:0", [0.4, 0.5, 0.45])):
            await benchmarks.add_benchmark_run(connection, workflow="demo", device=device, wall_s=wall_s,
                                               stats=summarize(wall_s).as_dict())
    finally:
        await connection.close()


async def test_publish_from_the_panel_then_the_bot_answers(comfyui_with_everything, botapi_bot, chromium,
                                                           pg_database, tmp_path):
    server = comfyui_with_everything
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    templates = server.get_json("/api/workflow_templates")
    assert sorted(templates[PACK_FOLDER_NAME]) == ["demo", "demoedit"]

    async with Chromium(chromium, tmp_path / "profile") as browser:
        page = await browser.new_page()
        await page.goto(server.url)
        await page.wait_for("!!(window.app?.graph && document.querySelector('.side-bar-button'))", 90, "the editor")
        loaded = await page.evaluate(f"""(async () => {{
            const reply = await fetch('/api/workflow_templates/{PACK_FOLDER_NAME}/demo.json');
            await app.loadGraphData(await reply.json(), true, true, 'demo');
            return app.graph.nodes.map((node) => node.type).sort();
        }})()""")
        assert loaded == ["CourierTelegramInput", "CourierTelegramOutput", "ImageSharpen"]
        await page.screenshot(ARTIFACTS / "01-editor.png")

        await page.click('.side-bar-button[aria-label^="Courier"]')
        await page.wait_for("!!document.querySelector('.courier-panel [data-courier=token]')", what="the panel")
        await page.wait_for("document.querySelector('.courier-panel [data-courier=publish-name]').value === 'demo'",
                            what="the command name taken from the graph's Telegram Input")
        await page.wait_for("document.querySelector('.courier-panel [data-courier=token-help]').textContent"
                            ".includes('COURIER_ADMIN_TOKEN')",
                            what="the panel asking for the token (this server is a hidden service)")
        await page.screenshot(ARTIFACTS / "02-panel-without-token.png")

        await page.type(".courier-panel [data-courier=token]", TOKEN)
        await page.click(".courier-panel [data-courier=token] + button")
        await page.wait_for("!!document.querySelector('.courier-panel img.courier-qr')?.naturalWidth",
                            what="the onion address's QR code")
        onion = await page.evaluate("document.querySelector('.courier-panel [data-courier=onion]').textContent")
        assert onion == server.get_json("/courier/anyone", token=TOKEN)["url"]
        await page.wait_for("!!document.querySelector('.courier-panel tr[data-command=demo]')", what="the commands")
        options = await page.evaluate("Object.fromEntries([...document.querySelectorAll('.courier-panel "
                                      "tr[data-command]')].map((row) => [row.dataset.command, "
                                      "row.querySelector('[data-courier=options]')?.textContent ?? '']))")
        assert options["f"] == "--seed --ar --size 256–2048 --steps 1–8 --n 1–4", options
        assert options["demoedit"] == "--seed" and options["sd3"].endswith("--neg"), options
        assert await page.evaluate(
            "document.querySelector('.courier-panel [data-component=bot]').textContent.includes('ok')")

        await page.type(".courier-panel [data-courier=publish-name]", "mycmd")
        await page.type(".courier-panel [data-courier=publish-description]", "Cards from your text")
        await page.click(".courier-panel [data-courier=publish]")
        result = await page.wait_for(
            "(t => t && !t.startsWith('Publishing') && t)"
            "(document.querySelector('.courier-panel [data-courier=publish-result]').textContent)", what="publishing")
        assert result.startswith("Published /mycmd") and "menu is updated" in result, result
        await page.wait_for("!!document.querySelector('.courier-panel tr[data-command=mycmd]')",
                            what="/mycmd in the commands table")
        await page.evaluate("document.querySelector('.courier-panel [data-courier=publish-result]')"
                            ".scrollIntoView({block: 'center'})")
        await page.screenshot(ARTIFACTS / "03-published.png")

        await add_benchmark_runs(pg_database)
        await page.click(".courier-panel [data-courier=token] + button")  # Save refreshes every section
        await page.wait_for("document.querySelectorAll('.courier-panel svg.courier-chart rect').length === 2",
                            what="the benchmark chart")
        await page.evaluate("document.querySelector('.courier-panel svg.courier-chart').scrollIntoView()")
        await page.screenshot(ARTIFACTS / "04-benchmarks.png")

        # the Models section: /f lacks its weights on this ComfyUI, each with its download link; /demo needs none
        ready = "document.querySelector('.courier-panel [data-courier=readiness] tr[data-models-of={}] td[data-ready]')"
        await page.wait_for(f"{ready.format('f')}?.dataset.ready === 'false'", what="/f not ready (no weights here)")
        assert await page.evaluate(f"{ready.format('demo')}.dataset.ready") == "true"
        links = await page.evaluate("[...document.querySelectorAll('.courier-panel [data-courier=readiness] "
                                    "tr[data-models-of=f] a')].map((a) => a.href)")
        assert sorted(links) == sorted(model["url"] for model in seed_manifest()["f"]["models"])
        await page.evaluate("document.querySelector('.courier-panel [data-courier=readiness]').scrollIntoView()")
        await page.screenshot(ARTIFACTS / "06-models.png")

        # the workflow menu's entry runs the same publishing through ComfyUI's dialogs
        assert await page.evaluate("app.extensionManager.command.commands"
                                   ".some((command) => command.id === 'Courier.PublishAsCommand')")
        await page.evaluate("void app.extensionManager.command.execute('Courier.PublishAsCommand'), true")
        for label, text in (("Command name", "mycmd2"), ("Description", "From the menu")):
            await page.wait_for(f"document.querySelector('.prompt-dialog-content label')?.textContent"
                                f".startsWith('{label}')", what=f"the {label} dialog")
            await page.type(".prompt-dialog-content input", text)
            await page.click(".prompt-dialog-content button")
        toast = await page.wait_for("document.querySelector('.p-toast-message')?.textContent", what="a toast")
        assert "Published /mycmd2" in toast, toast
        assert not [line for line in page.console if "courier" in line.lower()], page.console

    menu = [c["command"] for listed in botapi_bot.commands.values() for c in listed]
    assert {"mycmd", "mycmd2"} <= set(menu)  # setMyCommands, without a restart

    request = botapi_bot.inject_text(USER, "/mycmd hi")
    document = await botapi_bot.wait_for_call("sendDocument", where=replies_to(request), timeout=RESULT_S)
    data = botapi_bot.file_bytes(document.result["document"]["file_id"])
    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG" and image.size == (512, 512)
        assert "prompt" not in image.text  # no workflow in what users get
    (ARTIFACTS / "05-bot-reply.png").write_bytes(data)
