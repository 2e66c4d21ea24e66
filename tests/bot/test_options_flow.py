"""Options, /help <command> and /settings end to end: real python-telegram-bot on the Bot API emulator,
real PostgreSQL, and a real ComfyUI (COMFYUI_DIR) where the picture matters; the fake ComfyUI where
only the prompt the bot sends does."""

import functools
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from comfyui_courier.bot.handlers import BUILTIN_COMMANDS
from comfyui_courier.bot.options import option_lines
from comfyui_courier.core import i18n
from comfyui_courier.jobs.options import command_options
from comfyui_courier.store import commands
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tests.support.requires import require_comfyui

USER, OTHER = 111, 222
API_DIR = Path(__file__).resolve().parents[2] / "workflows" / "api"
INPUT = "CourierTelegramInput"
MANY = {  # a published graph that takes --n as one batch: the prompt card, repeated batch times
    "1": {"class_type": INPUT, "inputs": {"command": "many", "prompt": "p", "seed": 0, "width": 64, "height": 64,
                                          "image": "", "options": "n=3"}},
    "2": {"class_type": "RepeatImageBatch", "inputs": {"image": ["1", 1], "amount": ["1", 10]}},
    "3": {"class_type": "CourierTelegramOutput", "inputs": {"images": ["2", 0], "filename_prefix": "courier/many",
                                                           "keep_metadata": False}},
}


@pytest.fixture
async def courier_real(botapi, botapi_bot, pg_database, tmp_path, request):
    require_comfyui()
    comfyui = request.getfixturevalue("comfyui")
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER},{OTHER}") as service:
        yield service


@pytest.fixture
async def courier_fake(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{USER},{OTHER}") as service:
        yield service


def replies_to(message):
    """Whether a sent message replies to ``message`` (message ids count per chat)."""
    def replies(sent):
        return (sent.get("chat", {}).get("id") == message["chat"]["id"]
                and sent.get("reply_to_message", {}).get("message_id") == message["message_id"])
    return replies


async def results(bot, message, count=1) -> list[bytes]:
    """The bytes of the ``count`` lossless results the bot sent in reply to ``message`` (as files, or
    an album of files)."""
    replies = replies_to(message)

    def sent():
        found = [m for c in bot.outbox if c.method in ("sendDocument", "sendMediaGroup")
                 for m in (c.result if isinstance(c.result, list) else [c.result]) if "document" in m and replies(m)]
        return found if len(found) >= count else None
    try:
        documents = await bot.emulator.wait_for(sent, timeout=90)
    except TimeoutError:
        raise AssertionError(f"no {count} results; the bot sent: {texts(bot)}") from None
    return [bot.file_bytes(document["document"]["file_id"]) for document in documents]


async def all_done(bot, count: int) -> None:
    """Wait until ``count`` jobs have said Done: none is still delivering when the test ends."""
    await bot.emulator.wait_for(lambda: sum(c.method == "editMessageText" and c.params["text"].startswith("Done")
                                            for c in bot.outbox) == count, timeout=60)


def texts(bot) -> list[str]:
    return [c.params.get("text") for c in bot.outbox if c.method in ("sendMessage", "editMessageText")]


async def answer(bot, user: int, text: str) -> str:
    """The text of the first message the bot sends after ``user`` sends ``text``, a job's status
    aside: one posted earlier may still be on its way then (held by Telegram's limit per chat)."""
    before = len(bot.outbox)
    bot.inject_text(user, text)

    def reply():
        return next((c for c in bot.outbox[before:]
                     if c.method == "sendMessage" and not c.params["text"].startswith("Rendering /")), None)

    try:
        call = await bot.emulator.wait_for(reply, timeout=10)
    except TimeoutError:
        raise AssertionError(f"no reply; the bot sent: {texts(bot)}") from None
    return call.params["text"]


def pixels(data: bytes) -> np.ndarray:
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    return np.asarray(image.convert("RGB"))


async def job_params(courier) -> list[dict]:
    async with courier.store.pool.acquire() as conn:
        return [row["params"] for row in await conn.fetch("SELECT params FROM courier_jobs ORDER BY id")]


async def test_the_same_seed_gives_the_same_png_and_another_seed_another(courier_real, botapi_bot):
    """Two users (so ComfyUI cannot answer from its cache) ask /demo --seed 7: byte-identical PNGs."""
    (first,) = await results(botapi_bot, botapi_bot.inject_text(USER, "/demo --seed 7 x"))
    (again,) = await results(botapi_bot, botapi_bot.inject_text(OTHER, "/demo --seed 7 x"))
    (other,) = await results(botapi_bot, botapi_bot.inject_text(USER, "/demo --seed 8 x"))
    assert first == again
    assert not np.array_equal(pixels(first), pixels(other))
    await all_done(botapi_bot, 3)
    assert [(p["prompt"], p["seed"], p["options"]) for p in await job_params(courier_real)] == [
        ("x", 7, "--seed 7"), ("x", 7, "--seed 7"), ("x", 8, "--seed 8")]


async def test_n_makes_jobs_from_consecutive_seeds_where_the_graph_takes_no_batch(courier_real, botapi_bot):
    pair = await results(botapi_bot, botapi_bot.inject_text(USER, "/demo --n 2 --seed 7 x"), count=2)
    (alone,) = await results(botapi_bot, botapi_bot.inject_text(OTHER, "/demo x --seed 8"))
    assert alone in pair and len(set(pair)) == 2  # one is seed 8's card, the other (seed 7's) differs
    await all_done(botapi_bot, 3)
    assert [p["seed"] for p in await job_params(courier_real)] == [7, 8, 8]


async def test_ar_and_size_set_the_picture_s_size(courier_real, botapi_bot):
    (wide,) = await results(botapi_bot, botapi_bot.inject_text(USER, "/demo --ar 16:9 x"))
    assert pixels(wide).shape == (384, 688, 3)  # 512x512's area at 16:9, sides in multiples of 16
    (sized,) = await results(botapi_bot, botapi_bot.inject_text(USER, "/demo x --size 300x200"))
    assert pixels(sized).shape == (200, 304, 3)  # rounded to multiples of 8
    await all_done(botapi_bot, 2)


async def test_n_is_one_batch_where_the_graph_takes_the_input_s_batch(courier_real, botapi_bot):
    await commands.put_command(courier_real.store.pool, "many", workflow=MANY, description="a batch")
    request = botapi_bot.inject_text(USER, "/many --n 3 --seed 5 cards")
    found = await results(botapi_bot, request, count=3)
    assert len({bytes(pixels(data)) for data in found}) == 1  # the card, three times
    (params,) = await job_params(courier_real)
    assert params["seed"] == 5 and params["inputs"] == {"batch": 3}
    await all_done(botapi_bot, 1)
    botapi_bot.inject_text(USER, "/many --n 4 cards")
    await botapi_bot.wait_for_call("sendMessage",
                                   where=lambda c: "--n takes a whole number from 1 to 3" in c.params["text"])


async def test_options_reach_the_telegram_input_of_the_prompt_sent(courier_fake, botapi_bot, fake_comfy):
    botapi_bot.inject_text(USER, "/sd3 --steps 7 a cat --neg blurry, dark --ar 16:9")
    await botapi_bot.wait_for_call("editMessageText", where=lambda c: c.params["text"].startswith("/sd3 failed"),
                                   timeout=30)  # no weights here; what matters is what was sent
    (sent,) = [r.json["prompt"] for r in fake_comfy.requests if r.method == "POST" and r.path == "/prompt"]
    (node,) = [n["inputs"] for n in sent.values() if n["class_type"] == INPUT]
    assert (node["prompt"], node["steps"], node["negative"], node["width"], node["height"]) == \
        ("a cat", 7, "blurry, dark", 1360, 768)
    sampler = next(n["inputs"] for n in sent.values() if n["class_type"] == "KSampler")
    assert sampler["steps"] == [next(i for i, n in sent.items() if n["class_type"] == INPUT), 8]


@pytest.mark.parametrize(("text", "reply"), [
    ("/demo --colour red x", "/demo has no option --colour. It takes: --seed, --ar, --size, --n."),
    ("/f --steps 9 x", "--steps takes a whole number from 1 to 8, not “9”."),
    ("/demo x --seed", "--seed needs a value, e.g. --seed 7."),
    ("/demo --ar 20:1 x", "--ar takes an aspect ratio W:H from 1:16 to 16:1 (e.g. --ar 16:9), not “20:1”."),
    ("/demo --size 10x10 x", "--size takes WIDTHxHEIGHT, each from 64 to 2048 (e.g. --size 1024x768), not “10x10”."),
    ("/demo --n 5 x", "--n takes a whole number from 1 to 4, not “5”."),
    ("/demo --seed 1 --seed 2 x", "--seed is given twice: give it once."),
    ("/demo --seed 7", "Please add a description: /demo <text>"),
])
async def test_a_bad_option_is_explained_and_nothing_is_queued(courier_fake, botapi_bot, text, reply):
    assert await answer(botapi_bot, USER, text) == reply
    assert await job_params(courier_fake) == []


async def test_the_explanation_is_in_the_user_s_language(courier_fake, botapi_bot):
    botapi_bot.emulator.add_user(USER, "Anna", language_code="de")
    text = await answer(botapi_bot, USER, "/f --steps 99 x")
    assert text == "--steps nimmt eine ganze Zahl von 1 bis 8, nicht „99“."
    botapi_bot.emulator.add_user(OTHER, "Ivan", language_code="ru")
    assert "нет опции --neg" in await answer(botapi_bot, OTHER, "/f --neg x y")


async def test_help_lists_a_command_s_options(courier_fake, botapi_bot):
    text = await answer(botapi_bot, USER, "/help sd3")
    assert text.startswith("/sd3 — Image from text with Stable Diffusion 3.5")
    for line in ("--seed N", "--ar W:H — aspect ratio, from 1:4 to 4:1", "--size WxH",
                 "--steps N — sampling steps, from 1 to 50 (default 20)", "--n N — N results (up to 4)", "--neg text"):
        assert line in text
    text = await answer(botapi_bot, USER, "/help /demoedit")
    assert "--seed N" in text and "--ar" not in text and "--n" not in text
    text = await answer(botapi_bot, USER, "/help nosuch")
    assert text == "I don't know /nosuch. Send /help for the list of commands."
    assert "/help <command>" in await answer(botapi_bot, USER, "/help")


async def test_help_answers_for_every_shipped_and_built_in_command(courier_fake, botapi_bot):
    """``/help <name>`` for each command of commands.json (its options as /help lists them) and each built-in."""
    shipped = json.loads((API_DIR / "commands.json").read_text(encoding="utf-8"))
    for name in shipped:
        command = await commands.get_command(courier_fake.store.pool, name)
        text = await answer(botapi_bot, USER, f"/help {name}")
        assert text.startswith(f"/{name} — ") and "I don't know" not in text, text
        for line in option_lines(command_options(command.workflow), functools.partial(i18n.text, "en")):
            assert line in text, (name, line)
    for name in BUILTIN_COMMANDS:
        text = await answer(botapi_bot, USER, f"/help {name}")
        assert text.startswith(f"/{name} — ") and "I don't know" not in text, text


async def test_help_settings_explains_the_defaults_in_the_user_s_language(courier_fake, botapi_bot):
    text = await answer(botapi_bot, USER, "/help settings")
    assert text.startswith("/settings — Your default options\n")
    assert "/settings reset" in text and text.endswith(
        "Options you can set as defaults: --seed, --ar, --size, --steps, --n, --neg, --model, --lora, --cfg, "
        "--strength")
    botapi_bot.emulator.add_user(OTHER, "Anna", language_code="de")
    text = await answer(botapi_bot, OTHER, f"/help@{botapi_bot.user['username']} /settings")
    assert text.startswith("/settings — Deine Standardoptionen") and "--ar 16:9 --steps 4" in text


async def test_settings_keep_defaults_that_apply_where_a_command_takes_them(courier_fake, botapi_bot):
    say = botapi_bot.inject_text
    assert "no default options" in await answer(botapi_bot, USER, "/settings")
    assert await answer(botapi_bot, USER, "/settings --ar 2:1 --steps 30") == \
        "Saved. Your default options: --ar 2:1 --steps 30"
    assert await answer(botapi_bot, USER, "/settings --steps 3 --neg fog") == \
        "Saved. Your default options: --steps 3 --ar 2:1 --neg fog"  # merged: the new ones first
    assert (await answer(botapi_bot, USER, "/settings")).startswith(
        "Your default options: --steps 3 --ar 2:1 --neg fog")
    async with courier_fake.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT options FROM courier_user_options WHERE user_id = $1", USER) == \
            "--steps 3 --ar 2:1 --neg fog"

    for text in ("/demo x", "/sd3 --steps 9 y", "/demo --size 64x64 z"):
        say(USER, text)
    say(OTHER, "/demo w")  # another user's defaults are their own
    async def outcomes() -> dict | None:  # sd3 has no weights here: what it was sent matters
        async with courier_fake.store.pool.acquire() as conn:
            rows = await conn.fetch("SELECT params->>'prompt' AS prompt, status FROM courier_jobs")
        ended = {row["prompt"]: row["status"] for row in rows if row["status"] not in ("queued", "running")}
        return ended if len(ended) == 4 else None

    assert await until(outcomes, 60, "the four jobs ended") == {
        "x": "succeeded", "y": "failed", "z": "succeeded", "w": "succeeded"}
    def said() -> list[str]:
        return [str(c.params.get("text") or c.params.get("caption") or "") for c in botapi_bot.outbox]
    try:
        await botapi_bot.emulator.wait_for(lambda: [t for t in said() if t.startswith("/sd3 failed")], timeout=60)
    except TimeoutError:
        raise AssertionError(f"no '/sd3 failed' among {said()}") from None
    by_prompt = {params["prompt"]: params for params in await job_params(courier_fake)}
    demo, sd3, sized, other = (by_prompt[prompt] for prompt in "xyzw")
    assert (demo["inputs"], demo["options"]) == ({"width": 720, "height": 368}, "--ar 2:1")  # demo takes no steps
    assert sd3["inputs"] == {"steps": 9, "width": 1456, "height": 720, "negative": "fog"}  # typed --steps wins
    assert sized["inputs"] == {"width": 64, "height": 64}  # typed --size: the default --ar gives way
    assert other["inputs"] == {}

    assert await answer(botapi_bot, USER, "/settings reset") == "Your default options are cleared."
    assert "no default options" in await answer(botapi_bot, USER, "/settings")
    async with courier_fake.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_user_options") == 0


@pytest.mark.parametrize(("text", "reply"), [
    ("/settings a cat",
     "/settings takes options only, e.g. /settings --ar 16:9 --steps 4 — or /settings reset to clear them."),
    ("/settings --colour red",
     "/settings has no option --colour. It takes: --seed, --ar, --size, --steps, --n, --neg, --model, --lora, "
     "--cfg, --strength."),
    ("/settings --n 9", "--n takes a whole number from 1 to 4, not “9”."),
    ("/settings --neg a\x00b", "Options cannot hold control characters (such as NUL): nothing was saved."),
])
async def test_bad_settings_are_explained_and_nothing_is_kept(courier_fake, botapi_bot, text, reply):
    assert await answer(botapi_bot, USER, text) == reply
    async with courier_fake.store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM courier_user_options") == 0
