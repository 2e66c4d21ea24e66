"""The Mini App form in headless Chromium: the emulator's web chat opens it from /app's keyboard, the
page (served by the real ComfyUI's pack at /courier/miniapp/) builds the line, and the real bot runs it
on the tiny models: a picture arrives, and the job row holds what the typed command's holds.

Chromium runs without the same-origin policy so the test can fill the page inside the chat's overlay
(the chat and the page are on two ports). Screenshots of the form, light and dark, go to
``$COURIER_ARTIFACTS/browser`` (else pytest's tmp_path); ``docs/miniapp-light.png`` and
``docs/miniapp-dark.png`` are a run's, cropped to the overlay.
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from PIL import Image

from comfyui_courier.core import i18n
from comfyui_courier.store import backends, sessions
from comfyui_courier.tests.browser.cdp import Chromium
from comfyui_courier.tests.browser.test_chat import artifacts
from comfyui_courier.tests.browser.test_try import READY_S, environment, folder, read_until, running_try  # noqa: F401
from comfyui_courier.tests.fixtures.comfyui import free_port
from comfyui_courier.tests.fixtures.tiny_models import link_tiny_models
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tests.support.requires import require_chromium

pytestmark = pytest.mark.timeout(300)

USER = 1931
RUN_S = 120.0
FORM = "document.querySelector('#miniapp iframe')?.contentDocument"
TYPED = "/img a cat --model tiny-sd15.safetensors --lora tiny-lora-sd15.safetensors:0.8 --size 128 --steps 12 --seed 7"


@pytest.fixture
async def courier(comfyui_factory, tiny_models, pg_database, botapi, botapi_bot, tmp_path):
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database})
    link_tiny_models(server, tiny_models)
    await asyncio.to_thread(server.start)
    botapi.add_user(USER, "Ada", language_code="en")
    async with running_courier(botapi, botapi_bot, pg_database, server.url, tmp_path, COURIER_ALLOWED_USERS=str(USER),
                               COURIER_MINIAPP_URL=f"{server.url}/courier/miniapp/") as service:
        await until(lambda: backends.model_choices(service.store.pool), 60, "model lists in the backends table")
        yield service


async def job_rows(courier) -> list[dict]:
    async with courier.store.pool.acquire() as conn:
        return [dict(row) for row in await conn.fetch("SELECT command, params FROM courier_jobs ORDER BY id")]


async def fill_form(page, values: dict[str, str]) -> None:
    """Open the form from the keyboard and set its fields (the command first: it draws the others)."""
    await page.click("#reply-keyboard button")
    await page.wait_for(f"{FORM}?.getElementById('command')?.options.length > 0", what="the form")
    await page.evaluate(f"""(() => {{
        const form = {FORM};
        for (const [id, value] of Object.entries({json.dumps(values)})) {{
            const field = form.getElementById(id);
            field.value = value;
            field.dispatchEvent(new Event('change'));
        }}
        return true;
    }})()""")


async def shoot(page, path) -> None:
    """The overlay with the form, small: cropped, and in a 64-colour palette."""
    await page.screenshot(path)
    box = await page.evaluate("(() => { const r = document.getElementById('miniapp').getBoundingClientRect();"
                              " return [r.x, r.y, r.right, r.bottom].map(Math.round); })()")
    Image.open(path).crop(box).convert("P", palette=Image.Palette.ADAPTIVE, colors=64).save(path, optimize=True)


async def test_the_form_from_the_keyboard_queues_the_typed_command_s_job(courier, botapi, botapi_bot, tmp_path):
    shots = artifacts(tmp_path)
    async with Chromium(require_chromium(), tmp_path / "profile", "--disable-web-security",
                        "--disable-site-isolation-trials") as browser:
        page = await browser.new_page()
        await page.goto(f"{botapi.url}/?bot={botapi_bot.token}&user={USER}")
        await page.type("#text", "/app")
        await page.click("#send")
        await page.wait_for("document.querySelector('#reply-keyboard button')?.textContent === "
                            + json.dumps(i18n.text("en", "miniapp_button")), what="the form's keyboard button")
        await fill_form(page, {"command": "img", "prompt": "a cat", "model": "tiny-sd15.safetensors",
                               "lora": "tiny-lora-sd15.safetensors", "lora-weight": "0.8", "size": "128",
                               "steps": "12", "seed": "7"})
        await shoot(page, shots / "miniapp-light.png")
        await page.evaluate(f"{FORM}.getElementById('send').click()")
        await page.wait_for("document.getElementById('miniapp').hidden", what="the form to close")
        sent = await botapi_bot.wait_for_call("sendDocument", timeout=RUN_S,
                                              where=lambda c: c.params.get("chat_id") == USER)
        assert Image.open(io.BytesIO(botapi_bot.file_bytes(sent.result["document"]["file_id"]))).size == (128, 128)
        await until(lambda: sessions.get_session(courier.store.pool, USER, USER), RUN_S,
                    "the result kept as the chat's last (what --strength works on)")

        await page.send("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        await fill_form(page, {"command": "img", "prompt": "a dark cat", "strength": "0.5"})
        await shoot(page, shots / "miniapp-dark.png")
        await page.evaluate(f"{FORM}.getElementById('send').click()")
        await page.wait_for("document.getElementById('miniapp').hidden", what="the form to close")
        assert not page.console, page.console
        await rows_at_least(courier, botapi_bot, 2, "the form's img2img job", page)

    botapi_bot.inject_text(USER, TYPED)
    await rows_at_least(courier, botapi_bot, 3, "the typed command's job")
    form, img2img, typed = await job_rows(courier)
    assert form["command"] == typed["command"] == "img"
    for key in ("prompt", "seed", "options", "inputs", "workflow", "image_file_id"):
        assert form["params"][key] == typed["params"][key], key
    assert typed["params"]["options"] == TYPED.removeprefix("/img a cat ")
    assert img2img["params"]["options"] == "--strength 0.5" and img2img["params"]["image_file_id"]


async def rows_at_least(courier, bot, count: int, what: str, page=None) -> None:
    async def enough() -> bool:
        return len(await job_rows(courier)) >= count

    try:
        await until(enough, RUN_S, what)
    except AssertionError as error:
        said = [c.params.get("text") or c.params.get("caption") for c in bot.outbox][-5:]
        shown = await page.evaluate("document.getElementById('toast').textContent") if page else None
        raise AssertionError(f"{error}; the bot said last: {said}; the chat's toast: {shown}") from None


async def test_try_serves_the_form_and_its_chat_opens_it(request, tmp_path):
    """``try`` as a user runs it: /app's button opens the page ComfyUI serves, and its /img gets a picture."""
    comfyui = request.getfixturevalue("folder")  # test_try's: a user's ComfyUI folder with the tiny models
    port, comfyui_port = free_port(), free_port()
    async with running_try(comfyui, port, comfyui_port, environment(tmp_path / "tmp")) as process:
        await read_until(process.stdout, "Courier is ready", READY_S)
        async with Chromium(require_chromium(), tmp_path / "profile", "--disable-web-security",
                            "--disable-site-isolation-trials") as browser:
            page = await browser.new_page()
            await page.goto(f"http://127.0.0.1:{port}/")
            await page.wait_for("document.getElementById('user').options.length === 3", what="the users")
            await page.type("#text", "/app")
            await page.click("#send")
            await fill_form(page, {"command": "img", "prompt": "a cat", "size": "128", "steps": "4"})
            opened = await page.evaluate(f"{FORM}.location.href")
            assert opened.startswith(f"http://127.0.0.1:{comfyui_port}/courier/miniapp/#courier=1."), opened
            await page.evaluate(f"{FORM}.getElementById('send').click()")
            await page.wait_for("[...document.querySelectorAll('.message.from-bot img.media')].some((img) => "
                                "img.complete && img.naturalWidth === 128)", RUN_S, "the form's /img picture")
            assert not page.console, page.console
