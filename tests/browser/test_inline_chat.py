"""Inline mode in the emulator's web chat, headless Chromium against the real bot (python-telegram-bot,
real PostgreSQL): ``@bot cat`` lists the user's own result, picking it posts it "via @bot"; a result's
📤 Share lists that result alone; a stranger's ``@bot`` lists nothing but the button to the bot's
chat. Screenshots as test_chat's."""

from __future__ import annotations

import pytest

from comfyui_courier.bot.keyboards import result_keyboard
from comfyui_courier.core import i18n
from comfyui_courier.tests.bot.test_inline import result
from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.browser.test_chat import artifacts, png
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.requires import require_chromium

pytestmark = pytest.mark.timeout(180)

ADA, GRETA = 1001, 1002
RESULTS = "#inline-results li[data-result-id]"


async def test_at_bot_lists_the_users_results_and_picking_one_posts_it_via_the_bot(
        botapi, botapi_bot, pg_database, tmp_path):
    chromium, shots = require_chromium(), artifacts(tmp_path)
    botapi.add_user(ADA, "Ada")
    botapi.add_user(GRETA, "Greta", language_code="de")
    async with FakeComfyUI(steps=0) as fake, running_courier(botapi, botapi_bot, pg_database, fake.url, tmp_path,
                                                           COURIER_ALLOWED_USERS=f"{ADA}") as courier, \
            Chromium(chromium, tmp_path / "profile") as browser:
        job = await result(courier, botapi_bot, ADA, "a red cat", data=png("red", (80, 60)))
        page = await browser.new_page()
        await page.goto(f"{botapi.url}/?user={ADA}")
        await page.wait_for("document.getElementById('bot-name').textContent.includes('@')", what="the bot")
        await page.type("#text", f"@{botapi_bot.user['username']} cat")
        await page.wait_for(f"document.querySelectorAll('{RESULTS}').length === 1", what="Ada's one result")
        assert await page.evaluate(f"document.querySelector('{RESULTS}').dataset.resultId") == f"{job}-1"
        await page.wait_for(f"document.querySelector('{RESULTS} img')?.naturalWidth === 80", what="its picture")
        await page.screenshot(shots / "chat-inline-1-results.png")
        await page.click(RESULTS)
        posted = await botapi.wait_for(lambda: next((m for m in botapi_bot.history(ADA) if "via_bot" in m), None))
        assert posted["from"]["id"] == ADA and posted["via_bot"]["id"] == botapi_bot.id
        await page.wait_for("document.querySelector('.message .via')?.textContent === "
                            f"'via @{botapi_bot.user['username']}'", what="the result posted via the bot")
        await page.screenshot(shots / "chat-inline-2-posted.png")

        # 📤 Share under a result types "@bot <its token>", which lists that result only
        other = await result(courier, botapi_bot, ADA, "another red cat")
        async with courier.store.pool.acquire() as conn:
            await conn.execute("INSERT INTO courier_result_buttons (token, job_id) VALUES ('tok-1', $1)", job)
        await courier.bot.application.bot.send_message(ADA, "Done", reply_markup=result_keyboard(
            "tok-1", lambda key: i18n.text("en", key)))
        share = i18n.text("en", "button_share")
        await page.wait_for(f"[...document.querySelectorAll('.keyboard button')].some((b) => b.textContent === "
                            f"{share!r})", what="the Share button")
        await page.evaluate(f"[...document.querySelectorAll('.keyboard button')].find((b) => b.textContent === "
                            f"{share!r}).dataset.share = '1'")
        await page.click("button[data-share]")
        await page.wait_for(f"document.getElementById('text').value === '@{botapi_bot.user['username']} tok-1'",
                            what="the shared query typed")
        await page.wait_for(f"[...document.querySelectorAll('{RESULTS}')].map((li) => li.dataset.resultId).join() "
                            f"=== '{job}-1'", what="the shared result alone")
        assert other != job

        await page.goto(f"{botapi.url}/?user={GRETA}")  # a stranger: no results, the way to the bot's chat
        await page.wait_for("document.getElementById('bot-name').textContent.includes('@')", what="the bot")
        await page.type("#text", f"@{botapi_bot.user['username']} cat")
        await page.wait_for("document.querySelector('#inline-results .inline-button')?.textContent === "
                            f"{i18n.text('de', 'inline_start')!r}", what="the stranger's button")
        assert await page.evaluate(f"document.querySelectorAll('{RESULTS}').length") == 0
        assert not page.console, page.console
