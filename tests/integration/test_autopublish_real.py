"""A plain graph (no Telegram nodes: CheckpointLoaderSimple → KSampler → VAEDecode → SaveImage) on the
tiny SD 1.x checkpoint, published through a real ComfyUI's ``POST /courier/commands`` with
``"auto": true`` (its own node list checks the graph), answers ``/mine a cat`` through the real bot;
so do one saving an animated WEBP (sent as an MP4) and one whose LoadImage becomes the user's picture."""

import asyncio
import io

import aiohttp
import pytest
from PIL import Image

from comfyui_courier.tests.fixtures.tiny_models import link_tiny_models
from comfyui_courier.tests.integration.test_comfyui import wait_for_health
from comfyui_courier.tests.integration.test_tiny_models_real import RUN_S, graph
from comfyui_courier.tests.support.courier import replies_to, running_courier

pytestmark = pytest.mark.timeout(240)

USER = 1919
TOKEN = "autopublish-test-token-4321"


def plain_graph() -> dict:
    """The tiny checkpoint's text-to-image graph as users save theirs: a SaveImage at the end."""
    prompt = graph(steps=4, size=128, seed=7)
    prompt["7"] = {"class_type": "SaveImage", "inputs": {"images": ["6", 0], "filename_prefix": "ComfyUI"}}
    return prompt


def animation_graph() -> dict:
    """Two frames saved as an animated WEBP: the command sends them as an MP4."""
    prompt = graph(steps=2, size=64, seed=7)
    prompt["4"]["inputs"]["batch_size"] = 2
    prompt["7"] = {"class_type": "SaveAnimatedWEBP", "inputs": {
        "images": ["6", 0], "filename_prefix": "ComfyUI", "fps": 4.0, "lossless": False, "quality": 80,
        "method": "default"}}
    return prompt


def img2img_graph() -> dict:
    """A LoadImage encoded and sampled at half strength: the command takes the user's picture."""
    prompt = plain_graph()
    del prompt["4"]
    prompt["20"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
    prompt["21"] = {"class_type": "VAEEncode", "inputs": {"pixels": ["20", 0], "vae": ["1", 2]}}
    prompt["5"]["inputs"] |= {"latent_image": ["21", 0], "denoise": 0.5}
    return prompt


def png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 80, 40)).save(buffer, "PNG")
    return buffer.getvalue()


async def test_a_published_plain_graph_answers_through_the_real_sampler(
        comfyui_factory, tiny_models, pg_database, botapi, botapi_bot, tmp_path):
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN})
    link_tiny_models(server, tiny_models)
    await asyncio.to_thread(server.start)
    health = await asyncio.to_thread(wait_for_health, server, "database")
    assert health["components"]["database"]["state"] == "ok", health
    found = {}
    async with aiohttp.ClientSession() as http:
        for name, workflow in (("mine", plain_graph()), ("anim", animation_graph()), ("edit", img2img_graph())):
            async with http.post(f"{server.url}/courier/commands", headers={"Authorization": f"Bearer {TOKEN}"},
                                 json={"workflow": workflow, "auto": True, "name": name}) as reply:
                published = await reply.json()
                assert reply.status == 201, published
                found[name] = published["found"]
    assert found["mine"]["prompt"]["text"] == "a cat" and found["mine"]["outputs"][0]["node"] == "7"
    assert found["anim"]["outputs"][0]["sent_as"] == "animation" and found["edit"]["image"]["node"] == "20"
    async with running_courier(botapi, botapi_bot, pg_database, server.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)):
        request = botapi_bot.inject_text(USER, "/mine a cat")
        document = await botapi_bot.wait_for_call("sendDocument", timeout=RUN_S, where=replies_to(request))
        animated = botapi_bot.inject_text(USER, "/anim a cat")
        video = await botapi_bot.wait_for_call("sendVideo", timeout=RUN_S, where=replies_to(animated))
        edited = botapi_bot.inject_photo(USER, png(96, 128), caption="/edit a dog")
        picture = await botapi_bot.wait_for_call("sendDocument", timeout=RUN_S, where=replies_to(edited))
    assert document.result["document"]["file_name"].startswith("mine_")
    with Image.open(io.BytesIO(botapi_bot.file_bytes(document.result["document"]["file_id"]))) as image:
        assert (image.format, image.size) == ("PNG", (128, 128))  # the graph's own size
    name = video.result["video"]["file_name"]
    assert name.startswith("anim_") and name.endswith(".mp4"), name
    with Image.open(io.BytesIO(botapi_bot.file_bytes(picture.result["document"]["file_id"]))) as image:
        assert image.size == (96, 128)  # the user's picture, sampled at half strength
    saved = list((server.base_directory / "output" / "courier").glob("mine_*.png"))
    assert saved, "the result is not under output/courier/"
    assert not list((server.base_directory / "output").glob("ComfyUI_*.png"))  # the SaveImage did not run
