"""Threat row: a credential holder (or a published command) naming a server file in a node's input.

Issue 27 item 1. Before, ``CourierTelegramInput(image="/somewhere/private.png") ->
CourierTelegramOutput(filename_prefix="courier/leak")`` passed the hidden service's gateway (it
checked node types only), ComfyUI read the picture and saved it where ``/view`` hands it out; a
``name [output]`` or ``../`` did the same. Now the gateway judges each file input's value
(``jobs/file_inputs.py``, wired as ``runtime`` wires it, through ``AnyoneService``) and answers
403, the node refuses the same names by itself when the prompt goes straight to ComfyUI, and
publishing refuses a graph that names such a file.

The gateway runs in this process on 127.0.0.1 in front of a real ComfyUI 0.3.64 with the pack
(fixture pattern of test_leaked_client_key.py); ``LoadImage`` is among the sendable types, as it
is once a published command uses it.
"""

import asyncio
import io
import re
import uuid

import aiohttp
import pytest
from PIL import Image

from comfyui_courier.anyone import AnyoneService
from comfyui_courier.anyone.gateway_policy import CREDENTIAL_HEADER, digest
from comfyui_courier.core.config import Settings
from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.jobs.errors import ComfyError, PromptRejected
from comfyui_courier.jobs.file_inputs import NOT_A_COURIER_PICTURE, refusal
from comfyui_courier.jobs.seed import sendable_node_types
from comfyui_courier.server_routes import publish

BOT = "bot-host-credential"
JOB_S = 120
WAIT_S = 30


@pytest.fixture
async def gateway(comfyui, tmp_path):
    """(gateway URL, ComfyUI): the gateway as the Anyone service builds it, with the runtime's graph check."""
    async def node_types():  # the shipped commands' types, and one published command's LoadImage
        return await sendable_node_types() | {"LoadImage"}

    service = AnyoneService(Settings(), tmp_path, comfyui.url, node_types=node_types, graph_check=refusal)
    service.gateway.policy.credentials = frozenset((digest(BOT),))
    address = await service.gateway.start()  # host:port, as anon's HiddenServicePort takes it
    try:
        yield f"http://{address}", comfyui
    finally:
        await service.gateway.stop()


def png(color) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), color).save(buffer, "PNG")
    return buffer.getvalue()


def leak(image: str) -> dict:
    return {"1": {"class_type": "CourierTelegramInput",
                  "inputs": {"command": "leak", "prompt": "p", "seed": 1, "width": 64, "height": 64, "image": image}},
            "2": {"class_type": "CourierTelegramOutput",
                  "inputs": {"images": ["1", 1], "filename_prefix": "courier/leak"}}}


def load_image(image: str) -> dict:
    return {"1": {"class_type": "LoadImage", "inputs": {"image": image}},
            "2": {"class_type": "CourierTelegramOutput",
                  "inputs": {"images": ["1", 0], "filename_prefix": "courier/leak"}}}


async def test_no_node_reads_a_file_outside_courier_through_the_gateway_or_straight(gateway):
    url, comfy = gateway
    base = comfy.base_directory
    private = base / "operator-private.png"  # a real picture, outside ComfyUI's input and output folders
    private.write_bytes(png((255, 0, 0)))
    (base / "output").mkdir(exist_ok=True)
    (base / "output" / "operator-render.png").write_bytes(png((0, 0, 255)))
    (base / "input").mkdir(exist_ok=True)
    (base / "input" / "editor-upload.png").write_bytes(png((0, 255, 0)))
    saved_before = set((base / "output" / "courier").glob("leak_*"))
    names = (str(private), "../operator-private.png", "operator-render.png [output]", "editor-upload.png",
             "courier/../editor-upload.png", "/etc/hostname")
    async with aiohttp.ClientSession(headers={CREDENTIAL_HEADER: BOT}) as attacker:
        async def queue(graph: dict) -> tuple[int, str]:
            body = {"prompt": graph, "client_id": "attacker", "prompt_id": str(uuid.uuid4())}
            async with attacker.post(f"{url}/prompt", json=body) as reply:
                return reply.status, await reply.text()

        for name in names:
            for graph in (leak(name), load_image(name)):
                status, text = await queue(graph)
                assert status == 403 and "outside Courier's folders" in text, (name, status, text)
                assert str(base) not in text
    async with ComfyClient(comfy.url) as straight:  # no gateway: the Telegram Input refuses by itself
        for name in names:
            with pytest.raises(ComfyError, match=re.escape(NOT_A_COURIER_PICTURE)):
                await asyncio.wait_for(straight.run_prompt(leak(name)), WAIT_S)
    assert set((base / "output" / "courier").glob("leak_*")) == saved_before


async def test_a_link_out_of_courier_passes_the_gateway_s_names_and_the_node_refuses_it(gateway):
    url, comfy = gateway
    courier = comfy.base_directory / "input" / "courier"
    courier.mkdir(parents=True, exist_ok=True)
    (comfy.base_directory / "operator-private.png").write_bytes(png((255, 0, 0)))
    link = courier / "job-777.png"  # a name a job's upload could have
    link.unlink(missing_ok=True)
    link.symlink_to(comfy.base_directory / "operator-private.png")
    async with ComfyClient(url, headers={CREDENTIAL_HEADER: BOT}) as bot:
        with pytest.raises(ComfyError, match=re.escape(NOT_A_COURIER_PICTURE)):
            await asyncio.wait_for(bot.run_prompt(leak("courier/job-777.png")), WAIT_S)


async def test_a_job_s_uploaded_picture_still_runs_through_the_gateway(gateway):
    url, _ = gateway
    async with ComfyClient(url, headers={CREDENTIAL_HEADER: BOT}) as bot:
        name = await bot.upload_image(png((10, 200, 30)), f"job-{uuid.uuid4().hex[:8]}.png", "courier")
        assert name.startswith("courier/")
        result = await asyncio.wait_for(bot.run_prompt(leak(name)), JOB_S)
        (file,) = result.files
        with Image.open(io.BytesIO(await bot.view(file.filename, file.subfolder, file.type))) as picture:
            assert picture.getpixel((3, 3))[:3] == (10, 200, 30)


async def test_a_model_loader_takes_only_what_its_folder_lists(comfyui):
    """Why the loaders' names need no more than a plain check here: ComfyUI validates them (0.3.64)."""
    graph = {"1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "/etc/hostname"}},
             "2": {"class_type": "PreviewAny", "inputs": {"source": ["1", 0]}}}
    async with ComfyClient(comfyui.url) as straight:
        with pytest.raises(PromptRejected) as refused:
            await asyncio.wait_for(straight.run_prompt(graph), WAIT_S)
    (error,) = refused.value.node_errors["1"]["errors"]
    assert (error["type"], error["extra_info"]["input_name"]) == ("value_not_in_list", "ckpt_name")


@pytest.mark.parametrize("auto", [None, {"image": "1"}])
async def test_an_admin_published_graph_naming_a_server_file_is_refused_before_it_is_stored(auto):
    """A published command would send the file to every user who runs it (the route: test_commands.py)."""
    if auto is None:  # a command graph: its Telegram Input names the file
        graph = leak("/srv/private.png")
    else:  # a plain graph published with auto: the user's picture takes LoadImage 1's place, 3 stays
        graph = {"1": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
                 "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}},
                 "3": {"class_type": "LoadImage", "inputs": {"image": "../private.png"}},
                 "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": "y"}}}
    types = {"CourierTelegramInput", "CourierTelegramOutput", "LoadImage", "SaveImage"}
    with pytest.raises(publish.FileRefused) as refused:  # raised before the database (None here) is asked
        await publish.publish(None, graph, types, name="leak", auto=auto)
    problem = refused.value.problem
    assert (problem.key, problem.params["node_id"]) == ("file_input_refused", "1" if auto is None else "3")
    assert "private" not in str(refused.value)
