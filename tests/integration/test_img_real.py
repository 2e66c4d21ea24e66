"""/img through the real sampler: the shipped command on the pack's tiny SD 1.x checkpoint and LoRA
(``python <pack> tiny-models``) in a real ComfyUI, the real bot on the Bot API emulator, real PostgreSQL.

What it proves: the checkpoint and LoRA a typed name means reach the backend's loaders (a LoraLoader
chain the bot inserts), KSampler's progress becomes the status edits with step and percentage, the live
preview is sent, a reply to a picture is img2img from that picture at ``--strength``, the Native Size
node gives an SD 1.x model 512×512 (an ``--ar`` at that pixel count), and a name that means no file,
or two, gets the reply naming them.
"""

import asyncio
import io

import pytest
from PIL import Image

from comfyui_courier.core import i18n
from comfyui_courier.store import backends
from comfyui_courier.tests.fixtures.tiny_models import link_tiny_models
from comfyui_courier.tests.support.courier import replies_to, running_courier, shown_text
from comfyui_courier.tests.support.polling import until
from comfyui_courier.tools.tiny_models import CHECKPOINT

pytestmark = pytest.mark.timeout(300)

RUN_S = 180.0  # a job's 72 steps take about 6 s alone, far longer beside other test workers
USER = 1819
TWIN = "twin-tiny-sd15.safetensors"  # a second checkpoint whose name shares "sd15" with the tiny one
STEPS = 72  # about 6 s of sampling at 128 px on two cores (12 steps take about 1 s): with the chat's
# share of Telegram's limit (13 messages in any 10 s) and the live preview, two step counts show


@pytest.fixture
async def courier(comfyui_factory, tiny_models, pg_database, botapi, botapi_bot, tmp_path):
    """The backend's pack on the bot's database (results are handed over through it), as in production."""
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database},
                             extra_args=["--preview-method", "latent2rgb"])
    link_tiny_models(server, tiny_models)
    (server.base_directory / "models" / "checkpoints" / TWIN).symlink_to(tiny_models / CHECKPOINT)
    await asyncio.to_thread(server.start)
    async with running_courier(botapi, botapi_bot, pg_database, server.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as service:
        await until(lambda: backends.model_choices(service.store.pool), 60, "model lists in the backends table")
        yield service


async def result(bot, request: dict) -> Image.Image:
    try:
        call = await bot.wait_for_call("sendDocument", timeout=RUN_S, where=replies_to(request))
    except TimeoutError:
        raise AssertionError(f"no result; the bot said: {shown(bot)[-6:]}") from None
    return Image.open(io.BytesIO(bot.file_bytes(call.result["document"]["file_id"])))


async def answered(bot, text: str, expected: str) -> None:
    """The bot sends ``expected`` to the chat after ``text`` (a private chat's replies quote nothing, and
    a job's status may be posted meanwhile)."""
    before = len(bot.outbox)
    bot.inject_text(USER, text)
    try:
        await bot.emulator.wait_for(lambda: any(
            c.method == "sendMessage" and c.params["chat_id"] == USER and c.params["text"] == expected
            for c in bot.outbox[before:]), 30)
    except TimeoutError:
        raise AssertionError(f"not {expected!r} after {text!r}: {shown(bot)[-4:]}") from None


def shown(bot) -> list[str]:
    return [shown_text(c) for c in bot.outbox
            if c.method in ("editMessageText", "editMessageCaption", "editMessageMedia", "sendPhoto", "sendMessage")]


async def test_img_samples_with_the_named_checkpoint_and_lora_showing_steps_and_a_preview(courier, botapi_bot):
    request = botapi_bot.inject_text(USER, f"/img a cat --model tiny --lora tiny-lora:0.8 --size 128 --steps {STEPS}")
    picture = await result(botapi_bot, request)
    assert picture.size == (128, 128)

    def step(value: int, **eta) -> str:
        return i18n.text("en", "progress_eta" if eta else "progress", name="img", value=value, max=STEPS,
                         percent=100 * value // STEPS, **eta)

    steps = {step(value) for value in range(1, STEPS + 1)}
    steps |= {step(value, seconds=s) for value in range(1, STEPS + 1) for s in range(1, int(RUN_S))}
    assert len(steps.intersection(shown(botapi_bot))) >= 2, shown(botapi_bot)
    previews = [c for c in botapi_bot.outbox if c.method == "sendPhoto" and c.params.get("caption") in steps]
    assert previews, "no live preview was sent"  # a photo captioned with a step, not the result's photo
    (job,) = await courier.store.pool.fetch("SELECT params->'workflow' AS graph FROM courier_jobs")
    graph = job["graph"]
    assert {n["inputs"]["ckpt_name"] for n in graph.values() if n["class_type"] == "CheckpointLoaderSimple"} == \
        {CHECKPOINT.name}
    assert [(n["inputs"]["lora_name"], n["inputs"]["strength_model"]) for n in graph.values()
            if n["class_type"] == "LoraLoader"] == [("tiny-lora-sd15.safetensors", 0.8)]

    await answered(botapi_bot, "/img a cat --model nothing-like-it", i18n.text(
        "en", "model_unknown", option="model", name="nothing-like-it", matches=f"{CHECKPOINT.name}, {TWIN}"))
    await answered(botapi_bot, "/img a cat --model sd15", i18n.text(
        "en", "model_ambiguous", option="model", name="sd15", matches=f"{CHECKPOINT.name}, {TWIN}"))


async def test_img_on_a_picture_is_img2img_and_without_a_size_takes_the_model_s_own(courier, botapi_bot):
    source = io.BytesIO()
    Image.new("RGB", (96, 64), (200, 40, 40)).save(source, "PNG")
    photo = botapi_bot.inject_photo(USER, source.getvalue())
    request = botapi_bot.inject_text(USER, "/img a dog --model tiny --strength 0.5 --steps 4",
                                     reply_to=photo["message_id"])
    assert (await result(botapi_bot, request)).size == (96, 64)  # the picture's, not a latent of its own
    (job,) = await courier.store.pool.fetch("SELECT params FROM courier_jobs")
    graph = job["params"]["workflow"]
    (sampler,) = [n for n in graph.values() if n["class_type"] == "KSampler"]
    assert sampler["inputs"]["denoise"] == 0.5 and graph[sampler["inputs"]["latent_image"][0]]["class_type"] == \
        "VAEEncode"
    assert job["params"]["image_file_id"] == photo["photo"][-1]["file_id"]

    plain = botapi_bot.inject_text(USER, "/img a dog --model tiny --steps 2")
    assert (await result(botapi_bot, plain)).size == (512, 512)  # Native Size: SD 1.x
    wide = botapi_bot.inject_text(USER, "/img a dog --model tiny --steps 1 --ar 2:1")
    assert (await result(botapi_bot, wide)).size == (728, 360)  # 2:1 at SD 1.x's pixel count, not 1456x720
