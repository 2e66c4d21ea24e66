"""Publishing a graph without Telegram nodes from the Courier panel and the workflow menu, in headless
Chromium against a real ComfyUI with the pack (no bot: what is checked is the stored command).

The editor loads ComfyUI's default graph with a second text encoder on the positive side; the
panel's Publish opens the dialog of what was found, which asks for the prompt until one is picked,
then publishes. The workflow menu's entry goes through the same dialog. Screenshots of the dialog
go to ``artifacts/browser/autopublish-*.png``.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.browser.test_panel import ARTIFACTS, post_setting
from comfyui_courier.tests.integration.test_comfyui import wait_for_health
from comfyui_courier.tests.jobs.test_autopublish import TWO_ENCODERS, graph
from comfyui_courier.tests.support.requires import require_chromium

pytestmark = pytest.mark.timeout(240)

TOKEN = "dialog-test-token-8765"
DIALOG = "document.querySelector('[data-courier=auto-dialog]')"


@pytest.fixture
async def editor(comfyui_factory, pg_database):
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN})
    await asyncio.to_thread(server.start)
    health = await asyncio.to_thread(wait_for_health, server, "database")
    assert health["components"]["database"]["state"] == "ok", health
    post_setting(server, "Comfy.TutorialCompleted", True)
    return server


async def pick_in_dialog(page, prompt: str) -> str:
    """Wait for the dialog asking for the prompt, pick node ``prompt``, press Publish; the outputs it showed."""
    await page.wait_for(f"{DIALOG}?.querySelector('[data-courier=auto-problem]')?.textContent"
                        ".includes('choose the prompt')", what="the dialog asking for the prompt")
    assert await page.evaluate(f"{DIALOG}.querySelector('[data-courier=auto-publish]').disabled")
    await page.evaluate(f"(s => {{ s.value = '{prompt}'; s.dispatchEvent(new Event('change')); }})"
                        f"({DIALOG}.querySelector('[data-courier=auto-prompt]'))")
    await page.wait_for(f"!{DIALOG}.querySelector('[data-courier=auto-problem]') && "
                        f"!{DIALOG}.querySelector('[data-courier=auto-publish]').disabled", what="the prompt taken")
    outputs = await page.evaluate(f"{DIALOG}.querySelector('[data-courier=auto-outputs]').textContent")
    await page.screenshot(ARTIFACTS / f"autopublish-{prompt}.png")
    await page.click("[data-courier=auto-dialog] [data-courier=auto-publish]")
    return outputs


async def test_a_plain_graph_is_published_through_the_dialog(editor, tmp_path):
    server = editor
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    async with Chromium(require_chromium(), tmp_path / "profile") as browser:
        page = await browser.new_page()
        await page.goto(server.url)
        await page.wait_for("!!(window.app?.graph && document.querySelector('.side-bar-button'))", 90, "the editor")
        await page.evaluate(f"app.loadApiJson({json.dumps(graph(**TWO_ENCODERS))}, 'two encoders'), true")
        await page.wait_for("app.graph.nodes.length === 9", what="the graph")

        await page.click('.side-bar-button[aria-label^="Courier"]')
        await page.wait_for("!!document.querySelector('.courier-panel [data-courier=token]')", what="the panel")
        await page.type(".courier-panel [data-courier=token]", TOKEN)
        await page.click(".courier-panel [data-courier=token] + button")
        await page.type(".courier-panel [data-courier=publish-name]", "mine")
        await page.click(".courier-panel [data-courier=publish]")
        outputs = await pick_in_dialog(page, "10")
        assert outputs.startswith("#9 "), outputs
        result = await page.wait_for(
            "(t => t && !t.startsWith('Publishing') && t)"
            "(document.querySelector('.courier-panel [data-courier=publish-result]').textContent)", what="publishing")
        assert result.startswith("Published /mine"), result
        assert not await page.evaluate(f"!!{DIALOG}")

        await page.evaluate("void app.extensionManager.command.execute('Courier.PublishAsCommand'), true")
        for label, text in (("Command name", "mine2"), ("Description", "From the menu")):
            await page.wait_for(f"document.querySelector('.prompt-dialog-content label')?.textContent"
                                f".startsWith('{label}')", what=f"the {label} dialog")
            await page.type(".prompt-dialog-content input", text)
            await page.click(".prompt-dialog-content button")
        await pick_in_dialog(page, "6")
        toast = await page.wait_for("document.querySelector('.p-toast-message')?.textContent", what="a toast")
        assert "Published /mine2" in toast, toast
        assert not [line for line in page.console if "courier" in line.lower()], page.console

    for name, prompt, other in (("mine", "10", "6"), ("mine2", "6", "10")):
        stored = server.get_json(f"/courier/commands/{name}/export")
        (source,) = [n for n, node in stored.items() if node["class_type"] == "CourierTelegramInput"]
        assert stored[prompt]["inputs"]["text"] == [source, 0] and isinstance(stored[other]["inputs"]["text"], str)
        assert stored["9"]["class_type"] == "CourierTelegramOutput"
