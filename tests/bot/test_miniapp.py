"""The Mini App form end to end without a browser: /app's keyboard and the URL it carries, and the
page's answer (``web_app_data``) run as the typed command. Real python-telegram-bot on the Bot API
emulator, real PostgreSQL, the fake ComfyUI offering model files (the browser and real sampling are
tests/browser/test_miniapp.py's)."""

import base64
import hashlib
import json
import zlib
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from comfyui_courier.bot import miniapp
from comfyui_courier.core import i18n
from comfyui_courier.store import backends, commands
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(120)

USER = 601
BUTTON = i18n.text("en", "miniapp_button")
PAGE = "https://forms.example/courier/"


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, fake_comfy, tmp_path, request):
    fake_comfy.offer("CheckpointLoaderSimple", "ckpt_name", ["tiny-sd15.safetensors"])
    fake_comfy.offer("LoraLoader", "lora_name", ["tiny-lora-sd15.safetensors"])
    page = getattr(request, "param", PAGE)
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER), COURIER_MINIAPP_URL=page) as service:
        await until(lambda: backends.model_choices(service.store.pool), 30, "model lists in the backends table")
        yield service


async def reply(bot, send) -> str:
    """The text of the bot's next message to USER after ``send()``."""
    before = len(bot.outbox)
    send()
    call = await bot.emulator.wait_for(lambda: next(
        (c for c in bot.outbox[before:] if c.method == "sendMessage" and c.params.get("chat_id") == USER), None), 30)
    return call.params["text"]


def typed(bot, text: str):
    return lambda: bot.inject_text(USER, text)


def sent(bot, data: str):
    return lambda: bot.inject_web_app_data(USER, data, BUTTON)


def line(text: str) -> str:
    return json.dumps({"v": 1, "line": text})


def page_data(url: str) -> dict:
    """What the page reads from its URL's fragment (``miniapp/app.js``)."""
    version, _, packed = parse_qs(urlsplit(url).fragment)["courier"][0].partition(".")
    assert version == "1"
    return json.loads(zlib.decompress(base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4)), -15))


async def open_keyboard(bot) -> str:
    """/app; the URL of the Mini App button it shows."""
    assert await reply(bot, typed(bot, "/app")) == en("miniapp_open")
    (row,) = bot.keyboards[USER]["keyboard"]
    (button,) = row
    assert button["text"] == BUTTON
    return button["web_app"]["url"]


async def jobs(courier) -> list[dict]:
    async with courier.store.pool.acquire() as conn:
        return [row["params"] for row in await conn.fetch("SELECT params FROM courier_jobs ORDER BY id")]


async def test_the_keyboard_carries_the_form_of_the_user_s_commands_with_their_ranges(courier, botapi_bot):
    url = await open_keyboard(botapi_bot)
    assert url.startswith(PAGE + "#courier=1.") and len(url) <= 2000
    data = page_data(url)
    assert data["words"]["send"] == en("miniapp_send")
    img = next(c for c in data["commands"] if c["name"] == "img")
    assert {o["name"] for o in img["options"]} >= {"seed", "size", "steps", "model", "lora", "strength", "neg"}
    assert data["checkpoints"] == ["tiny-sd15.safetensors"] and data["loras"] == ["tiny-lora-sd15.safetensors"]
    start = await reply(botapi_bot, typed(botapi_bot, "/start"))
    assert start.startswith(en("welcome", name="", commands="")[:3])
    welcome = next(c for c in reversed(botapi_bot.outbox) if c.method == "sendMessage")
    assert welcome.params["reply_markup"]["keyboard"][0][0]["text"] == BUTTON


async def test_the_form_s_line_queues_the_job_the_typed_command_queues(courier, botapi_bot):
    await open_keyboard(botapi_bot)
    command = "/img a cat --model tiny-sd15 --lora tiny-lora-sd15:0.8 --size 128 --steps 12 --seed 5"
    botapi_bot.inject_text(USER, command)
    botapi_bot.inject_web_app_data(USER, line(command), BUTTON)
    await until(lambda: len_at_least(courier, 2), 30, "two jobs queued")
    first, second = await jobs(courier)
    assert first["options"] == second["options"] == command.removeprefix("/img a cat ")
    same = ("prompt", "seed", "inputs", "workflow", "image_file_id")
    assert {key: first[key] for key in same} == {key: second[key] for key in same}


async def len_at_least(courier, count: int) -> bool:
    return len(await jobs(courier)) >= count


@pytest.mark.parametrize("data", ["not json", "x" * 4096, json.dumps({"v": 2, "line": "/img a cat"}),
                                  json.dumps(["/img a cat"]), line("a cat, no command"), line("/img@other_bot a cat")])
async def test_an_answer_that_is_no_command_line_is_told_so(courier, botapi_bot, data):
    await open_keyboard(botapi_bot)
    assert await reply(botapi_bot, sent(botapi_bot, data)) == en("miniapp_bad")
    assert await jobs(courier) == []


@pytest.mark.parametrize("text", ["/nosuch a cat", "/img a cat --steps 0", "/img a cat --size 99999",
                                  "/img a cat --model gone-model", "/img a cat --lora tiny-lora-sd15:11",
                                  "/img a cat --strength 2", "/img --seed 3"])
async def test_a_bad_line_gets_the_typed_command_s_reply(courier, botapi_bot, text):
    await open_keyboard(botapi_bot)
    said = await reply(botapi_bot, typed(botapi_bot, text))
    assert await reply(botapi_bot, sent(botapi_bot, line(text))) == said
    assert await jobs(courier) == []


async def test_a_built_in_s_name_is_no_command_of_the_form(courier, botapi_bot):
    await open_keyboard(botapi_bot)
    assert await reply(botapi_bot, sent(botapi_bot, line("/forget"))) == en("unknown_command", name="forget")


async def test_ranges_edited_in_the_url_change_nothing_the_bot_accepts(courier, botapi_bot):
    data = page_data(await open_keyboard(botapi_bot))
    img = next(c for c in data["commands"] if c["name"] == "img")
    steps = next(o for o in img["options"] if o["name"] == "steps")
    typed_high = steps["high"]
    steps["high"] = 10000  # what a user who edits the URL would let the form send
    text = f"/img a cat --steps {steps['high']}"
    refused = await reply(botapi_bot, sent(botapi_bot, line(text)))
    assert refused == await reply(botapi_bot, typed(botapi_bot, text))
    assert str(typed_high) in refused
    assert await jobs(courier) == []


@pytest.mark.parametrize("courier", [""], indirect=True)
async def test_without_a_url_there_is_no_button_and_app_says_how_to_set_it_up(courier, botapi_bot):
    assert await reply(botapi_bot, typed(botapi_bot, "/app")) == en("miniapp_unset")
    assert "reply_markup" not in next(c for c in reversed(botapi_bot.outbox) if c.method == "sendMessage").params
    assert USER not in botapi_bot.keyboards


def test_past_2000_characters_the_page_gets_its_words_and_a_text_field():
    img = json.loads((Path(miniapp.__file__).parents[1] / "workflows" / "api" / "img.json").read_text())
    now = datetime.now(timezone.utc)

    def listed(count: int) -> list[commands.Command]:  # names deflate cannot shrink
        return [commands.Command(name=hashlib.sha256(bytes([index])).hexdigest()[:32], description="", workflow=img,
                                 owner=None, enabled=True, source="published", created_at=now, updated_at=now)
                for index in range(count)]

    few = miniapp.page_url(PAGE, "ru", listed(3), {})
    assert [c["name"] for c in page_data(few)["commands"]] == [c.name for c in listed(3)]
    many = miniapp.page_url(PAGE, "ru", listed(80), {})
    assert len(many) <= 2000 and page_data(many) == {"words": miniapp.words("ru")}
    assert page_data(many)["words"]["line"] == i18n.text("ru", "miniapp_line")
