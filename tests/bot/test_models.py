"""/models, /img's model names and an admin's command defaults end to end: real python-telegram-bot on the
Bot API emulator, real PostgreSQL, the fake ComfyUI offering model files in its loaders' lists (what the
health checks read into the backends table). Sampling itself is tests/integration/test_img_real.py's."""


import pytest

from comfyui_courier.core import i18n
from comfyui_courier.store import backends
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.polling import until

pytestmark = pytest.mark.timeout(120)

ADMIN, USER = 501, 502
CHECKPOINTS = [f"ckpt-{i:02}.safetensors" for i in range(45)] + ["sdxl/juggernautXL.safetensors"]
LORAS = ["detail-tweaker.safetensors", "detail-slider.safetensors", "film.safetensors"]


def en(key: str, **params) -> str:
    return i18n.text("en", key, **params)


@pytest.fixture
async def courier(botapi, botapi_bot, pg_database, fake_comfy, tmp_path):
    fake_comfy.offer("CheckpointLoaderSimple", "ckpt_name", CHECKPOINTS)
    fake_comfy.offer("LoraLoader", "lora_name", LORAS)
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=f"{ADMIN},{USER}", COURIER_ADMIN_USERS=str(ADMIN)) as service:
        await until(lambda: backends.model_choices(service.store.pool), 30, "model lists in the backends table")
        yield service


async def answer(bot, user: int, text: str, method: str = "sendMessage"):
    """The bot's next ``method`` call to ``user``'s chat after ``text`` (a private chat's replies quote nothing)."""
    before = len(bot.outbox)
    bot.inject_text(user, text)
    return await bot.emulator.wait_for(lambda: next(
        (c for c in bot.outbox[before:] if c.method == method and c.params.get("chat_id") == user), None), 30)


async def test_models_lists_each_kind_a_page_at_a_time_with_the_default_marked(courier, botapi_bot):
    first = await answer(botapi_bot, USER, "/models")
    text = first.params["text"]
    assert text.startswith(en("models_page", page=1, pages=2, command="img") + "\n\n" + en("models_backend_id", id=1))
    assert en("models_checkpoints", number=46) in text and "★ ckpt-00.safetensors" in text  # no default set: the first
    assert "http" not in text  # a user sees no backend address
    (buttons,) = first.params["reply_markup"]["inline_keyboard"]
    assert [(b["text"], b["callback_data"]) for b in buttons] == [("▶", "models:1")]

    botapi_bot.inject_callback_query(USER, first.result["message_id"], "models:1")
    second = await botapi_bot.wait_for_call("editMessageText", timeout=30)
    assert second.params["text"].startswith(en("models_page", page=2, pages=2, command="img"))
    assert en("models_loras", number=3) in second.params["text"] and "· film.safetensors" in second.params["text"]
    assert [b["callback_data"] for b in second.params["reply_markup"]["inline_keyboard"][0]] == ["models:0"]

    assert (await answer(botapi_bot, USER, "/settings /img --model juggernaut")).params["text"] == \
        en("admin_only", name="settings /img")
    saved = await answer(botapi_bot, ADMIN, "/settings /img --model ckpt-07 --steps 30")
    assert saved.params["text"] == en("command_settings_saved", name="img", options="--model ckpt-07 --steps 30")
    assert (await answer(botapi_bot, ADMIN, "/settings /img")).params["text"] == \
        en("command_settings_show", name="img", options="--model ckpt-07 --steps 30")
    marked = (await answer(botapi_bot, ADMIN, "/models")).params["text"]
    assert "★ ckpt-07.safetensors" in marked and "★ ckpt-00" not in marked
    assert "(http://127.0.0.1:" in marked  # an admin sees where each backend is
    refused = await answer(botapi_bot, ADMIN, "/settings /img --model ckpt")
    assert refused.params["text"].startswith('--model “ckpt” matches several files: ckpt-00.safetensors, ')
    assert (await answer(botapi_bot, ADMIN, "/settings /img reset")).params["text"] == \
        en("command_settings_cleared", name="img")
    assert (await answer(botapi_bot, ADMIN, "/settings /start --seed 1")).params["text"] == \
        en("command_settings_no_command", name="start")
    assert (await answer(botapi_bot, ADMIN, "/settings /img --neg a\x00b")).params["text"] == \
        en("settings_control_chars")
    assert (await answer(botapi_bot, ADMIN, "/settings /img")).params["text"] == en("command_settings_none", name="img")


async def test_forged_paging_data_is_answered_like_a_stale_button(courier, botapi_bot):
    """``models:²`` (a digit to ``str.isdigit``, not to ``int``) and ``models:1`` on a photo: a press
    no page can answer, told as any stale button, with no incident."""
    first = (await answer(botapi_bot, USER, "/models")).result
    photo = {"message_id": 9001, "date": first["date"], "chat": first["chat"], "from": first["from"],
             "photo": [{"file_id": "p", "file_unique_id": "p", "width": 8, "height": 8}]}
    for number, (message, data) in enumerate(((first, "models:²"), (photo, "models:1"))):
        before = len(botapi_bot.outbox)
        botapi_bot.inject_update({"callback_query": {"id": f"forged-{number}", "from": botapi_bot.emulator.user(USER),
                                                     "message": message, "chat_instance": "1", "data": data}})
        answered = await botapi_bot.wait_for_call(
            "answerCallbackQuery", where=lambda c, n=number: c.params["callback_query_id"] == f"forged-{n}", timeout=30)
        assert answered.params.get("text") == en("button_stale"), data
        assert [c.method for c in botapi_bot.outbox[before:]] == ["answerCallbackQuery"], data


@pytest.mark.parametrize(("typed", "reply"), [
    ("--model nothing-like-it", en("model_unknown", option="model", name="nothing-like-it",
                                   matches=", ".join(CHECKPOINTS[:8]) + ", …")),
    ("--model ckpt-0", en("model_ambiguous", option="model", name="ckpt-0",
                          matches=", ".join(CHECKPOINTS[:8]) + ", …")),
    ("--lora detail", en("model_ambiguous", option="lora", name="detail",
                         matches="detail-slider.safetensors, detail-tweaker.safetensors")),
    ("--lora flim", en("model_unknown", option="lora", name="flim", matches="film.safetensors")),
    ("--cfg 99", en("option_bad_decimal", name="cfg", value="99", low="0", high="30")),
])
async def test_a_name_that_means_no_file_or_several_is_refused_with_the_close_ones(courier, botapi_bot, typed, reply):
    assert (await answer(botapi_bot, USER, f"/img a cat {typed}")).params["text"] == reply


async def test_img_queues_the_graph_with_the_files_its_names_mean(courier, botapi_bot, fake_comfy):
    await answer(botapi_bot, ADMIN, "/settings /img --model ckpt-07 --cfg 5")
    await answer(botapi_bot, USER, "/settings --lora film:0.5")
    botapi_bot.inject_text(USER, "/img a cat --lora tweak --lora slider:-1 --seed 3")
    posted = await until(lambda: _posted(fake_comfy), 30, "the job's prompt at the backend")
    (loader,) = [n for n in posted.values() if n["class_type"] == "CheckpointLoaderSimple"]
    assert loader["inputs"]["ckpt_name"] == "ckpt-07.safetensors"  # the admin's default
    loras = sorted((n for n in posted.values() if n["class_type"] == "LoraLoader"), key=lambda n: n["inputs"]["clip"])
    assert {(n["inputs"]["lora_name"], n["inputs"]["strength_model"]) for n in loras} == {
        ("detail-tweaker.safetensors", 1.0), ("detail-slider.safetensors", -1.0)}  # typed: the user's default gives way
    (sampler,) = [n for n in posted.values() if n["class_type"] == "KSampler"]
    assert sampler["inputs"]["cfg"] == 5.0 and sampler["inputs"]["denoise"] == 1.0


async def _posted(fake) -> dict | None:
    prompts = [r.json["prompt"] for r in fake.requests if r.method == "POST" and r.path == "/prompt"]
    return prompts[-1] if prompts else None
