"""Publishing from the Courier panel a graph whose model file no backend has: the panel asks first
(declined: nothing is stored), and once confirmed says which files are missing on which backend.
Headless Chromium against a real ComfyUI with the pack and real PostgreSQL, whose backends table
says what the one backend has (as its health check would record it); screenshot of the question in
``artifacts/browser/publish-missing-models.png``."""

from __future__ import annotations

import asyncio
import json

import pytest

from comfyui_courier.store import backends
from comfyui_courier.store.pool import create_pool
from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.browser.test_panel import ARTIFACTS, post_setting
from comfyui_courier.tests.integration.test_comfyui import wait_for_health
from comfyui_courier.tests.jobs.test_autopublish import DEFAULT_SD
from comfyui_courier.tests.support.requires import require_chromium

pytestmark = pytest.mark.timeout(240)

TOKEN = "missing-models-token-5678"
BACKEND = "http://127.0.0.1:9"  # no dispatcher runs (no bot): only the test records what it has
QUESTION = "document.querySelector('[data-courier=missing-dialog]')"
RESULT = "document.querySelector('.courier-panel [data-courier=publish-result]').textContent"


async def publish_and_answer(page, answer: str) -> str:
    """Press Publish, then the found dialog's Publish, then ``answer`` in the question; its message."""
    await page.click(".courier-panel [data-courier=publish]")
    await page.wait_for("!!document.querySelector('[data-courier=auto-dialog] [data-courier=auto-publish]')"
                        " && !document.querySelector('[data-courier=auto-publish]').disabled", what="the found dialog")
    await page.click("[data-courier=auto-dialog] [data-courier=auto-publish]")
    message = await page.wait_for(f"{QUESTION}?.querySelector('[data-courier=missing-message]')?.textContent",
                                  what="the question")
    await page.screenshot(ARTIFACTS / "publish-missing-models.png")
    await page.click(f"[data-courier=missing-dialog] [data-courier={answer}]")
    return message


async def test_the_panel_asks_before_publishing_a_graph_no_backend_can_run(comfyui_factory, pg_database, tmp_path):
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN,
                                               "COURIER_BACKENDS": BACKEND})
    await asyncio.to_thread(server.start)
    health = await asyncio.to_thread(wait_for_health, server, "database")
    assert health["components"]["database"]["state"] == "ok", health
    pool = await create_pool(pg_database)
    try:
        await backends.register_backends(pool, [BACKEND])
        await backends.record_check(pool, BACKEND, models=["other.safetensors"])
    finally:
        await pool.close()
    post_setting(server, "Comfy.TutorialCompleted", True)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    lacked = f"{BACKEND}: {DEFAULT_SD['4']['inputs']['ckpt_name']} (checkpoints)"
    async with Chromium(require_chromium(), tmp_path / "profile") as browser:
        page = await browser.new_page()
        await page.goto(server.url)
        await page.wait_for("!!(window.app?.graph && document.querySelector('.side-bar-button'))", 90, "the editor")
        await page.evaluate(f"app.loadApiJson({json.dumps(DEFAULT_SD)}, 'default'), true")
        await page.wait_for("app.graph.nodes.length === 7", what="the graph")
        await page.click('.side-bar-button[aria-label^="Courier"]')
        await page.wait_for("!!document.querySelector('.courier-panel [data-courier=token]')", what="the panel")
        await page.type(".courier-panel [data-courier=token]", TOKEN)
        await page.click(".courier-panel [data-courier=token] + button")
        await page.type(".courier-panel [data-courier=publish-name]", "mine")

        asked = await publish_and_answer(page, "missing-cancel")
        assert lacked in asked, asked
        assert await page.wait_for(f"({RESULT}) === 'Not published.' && ({RESULT})", what="declined")
        status, _ = await asyncio.to_thread(server.get, "/courier/commands/mine/export")
        assert status == 404

        await publish_and_answer(page, "missing-publish")
        result = await page.wait_for(f"(t => t.startsWith('Published') && t)({RESULT})", what="publishing")
        assert result.startswith("Published /mine") and f"Missing on {lacked}" in result, result
        assert not [line for line in page.console if "courier" in line.lower()], page.console
    stored = server.get_json("/courier/commands/mine/export")
    assert stored["4"]["inputs"]["ckpt_name"] == DEFAULT_SD["4"]["inputs"]["ckpt_name"]
