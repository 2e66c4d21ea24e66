"""A plain graph (no Telegram nodes: CheckpointLoaderSimple → KSampler → VAEDecode → SaveImage) on the
tiny SD 1.x checkpoint, published through a real ComfyUI's ``POST /courier/commands`` with
``"auto": true`` (its own node list checks the graph), answers ``/mine a cat`` through the real bot."""

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


async def test_a_published_plain_graph_answers_through_the_real_sampler(
        comfyui_factory, tiny_models, pg_database, botapi, botapi_bot, tmp_path):
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN})
    link_tiny_models(server, tiny_models)
    await asyncio.to_thread(server.start)
    health = await asyncio.to_thread(wait_for_health, server, "database")
    assert health["components"]["database"]["state"] == "ok", health
    async with aiohttp.ClientSession() as http, http.post(
            f"{server.url}/courier/commands", headers={"Authorization": f"Bearer {TOKEN}"},
            json={"workflow": plain_graph(), "auto": True, "name": "mine"}) as reply:
        published = await reply.json()
        assert reply.status == 201, published
    assert published["found"]["prompt"]["text"] == "a cat" and published["found"]["outputs"][0]["node"] == "7"
    async with running_courier(botapi, botapi_bot, pg_database, server.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)):
        request = botapi_bot.inject_text(USER, "/mine a cat")
        document = await botapi_bot.wait_for_call("sendDocument", timeout=RUN_S, where=replies_to(request))
    assert document.result["document"]["file_name"].startswith("mine_")
    with Image.open(io.BytesIO(botapi_bot.file_bytes(document.result["document"]["file_id"]))) as image:
        assert (image.format, image.size) == ("PNG", (128, 128))  # the graph's own size
    saved = list((server.base_directory / "output" / "courier").glob("mine_*.png"))
    assert saved, "the result is not under output/courier/"
    assert not list((server.base_directory / "output").glob("ComfyUI_*.png"))  # the SaveImage did not run
