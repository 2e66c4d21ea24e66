"""Telegram Input/Output inside a real ComfyUI (COMFYUI_DIR): animation, video, metadata, editor sending.

Prompts are queued over ComfyUI's HTTP API as a client would; one with an unproved send_to_chat
saves its render and sends nothing (sending with the editor's proof: tests/security/).
"""

import asyncio
import contextlib
import io
import json
import os

import pytest
from PIL import Image

from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.jobs.errors import ComfyError
from comfyui_courier.jobs.file_inputs import NOT_A_COURIER_PICTURE
from comfyui_courier.tests.support.requires import require_module

USER = 4242
BOOT_S = 90
WAIT_S = 30  # a refusal at validation comes at once; reading /dev/zero or a FIFO would never end
JOB_S = 120


def graph(output: dict, *, frames: int = 4, video: bool = False) -> dict:
    nodes = {
        "1": {"class_type": "CourierTelegramInput",
              "inputs": {"command": "nodetest", "prompt": "frames", "seed": 3, "width": 64, "height": 48}},
        "2": {"class_type": "RepeatImageBatch", "inputs": {"image": ["1", 1], "amount": frames}},
        "3": {"class_type": "CourierTelegramOutput", "inputs": {"filename_prefix": "courier/nodetest", **output}},
    }
    if video:
        nodes["4"] = {"class_type": "CreateVideo", "inputs": {"images": ["2", 0], "fps": 4.0}}
    return nodes


async def run(server, workflow: dict):
    """Queue ``workflow`` and wait for it; the PromptResult, or ComfyError with ComfyUI's message."""
    async with ComfyClient(server.url) as client:
        return await client.run_prompt(workflow)


def output_file(server, ref: dict):
    return server.base_directory / "output" / ref["subfolder"] / ref["filename"]


async def test_images_as_animation_make_one_mp4_without_metadata(comfyui):
    av = require_module("av", "PyAV, ComfyUI's video library: install ComfyUI's requirements")
    result = await run(comfyui, graph({"images": ["2", 0], "images_as": "animation", "fps": 4.0}))
    ui = result.outputs["3"]
    assert ui["animated"] == [True]
    (ref,) = ui["images"]
    assert ref["filename"].endswith(".mp4")
    with av.open(str(output_file(comfyui, ref))) as video:
        assert sum(1 for _ in video.decode(video=0)) == 4
        assert not {"prompt", "workflow"} & set(video.metadata)


async def test_a_video_keeps_the_workflow_only_when_asked(comfyui):
    av = require_module("av", "PyAV, ComfyUI's video library: install ComfyUI's requirements")
    for keep in (False, True):
        result = await run(comfyui, graph({"video": ["4", 0], "keep_metadata": keep}, video=True))
        (ref,) = result.outputs["3"]["images"]
        with av.open(str(output_file(comfyui, ref))) as video:
            assert ("prompt" in video.metadata) is keep
            if keep:
                assert json.loads(video.metadata["prompt"])["3"]["class_type"] == "CourierTelegramOutput"


async def test_pngs_carry_no_workflow_unless_asked(comfyui):
    for keep in (False, True):
        result = await run(comfyui, graph({"images": ["2", 0], "keep_metadata": keep}, frames=2))
        refs = result.outputs["3"]["images"]
        assert len(refs) == 2 and "animated" not in result.outputs["3"]
        with Image.open(output_file(comfyui, refs[0])) as png:
            assert ("prompt" in png.text) is keep


async def test_images_and_a_video_together_are_refused(comfyui):
    with pytest.raises(ComfyError, match="either images or a video"):
        await run(comfyui, graph({"images": ["2", 0], "video": ["4", 0]}, video=True))


async def test_an_unproved_send_to_chat_saves_the_render_and_says_why(comfyui):
    result = await run(comfyui, graph({"images": ["2", 0], "send_to_chat": str(USER)}, frames=1))
    (ref,) = result.outputs["3"]["images"]
    assert output_file(comfyui, ref).is_file()
    assert "not sent to Telegram" in result.outputs["3"]["text"][0]  # sending: tests/security/test_web_page_comfyui.py


async def test_a_bad_chat_id_is_refused_before_running(comfyui):
    with pytest.raises(ComfyError, match="send_to_chat must be a Telegram chat id"):
        await run(comfyui, graph({"images": ["2", 0], "send_to_chat": "@me"}, frames=1))


def picture_graph(image: str) -> dict:
    """Telegram Input with ``image`` into a Telegram Output under courier/: a picture read and saved."""
    return {"1": {"class_type": "CourierTelegramInput",
                  "inputs": {"command": "leak", "prompt": "p", "seed": 1, "width": 64, "height": 64, "image": image}},
            "2": {"class_type": "CourierTelegramOutput",
                  "inputs": {"images": ["1", 1], "filename_prefix": "courier/leak"}}}


def png(color=(10, 200, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), color).save(buffer, "PNG")
    return buffer.getvalue()


async def test_only_a_picture_under_input_courier_is_read_the_rest_is_refused_at_validation(comfyui, tmp_path):
    """Issue 27 item 1: the node itself, straight to ComfyUI (no gateway in front)."""
    base = comfyui.base_directory
    courier = base / "input" / "courier"
    courier.mkdir(parents=True, exist_ok=True)
    (courier / "node-ok.png").write_bytes(png())
    (base / "private.png").write_bytes(png((255, 0, 0)))
    (base / "output" / "secret.png").parent.mkdir(parents=True, exist_ok=True)
    (base / "output" / "secret.png").write_bytes(png((0, 0, 255)))
    link = courier / "node-link.png"
    link.unlink(missing_ok=True)
    link.symlink_to(base / "private.png")
    before = set((base / "output" / "courier").glob("leak_*"))
    for image in (str(base / "private.png"), "/etc/hostname", "/etc/nope.png", "../private.png",
                  "secret.png [output]", "courier/node-link.png", "/dev/zero"):
        with pytest.raises(ComfyError) as refused:
            await asyncio.wait_for(run(comfyui, picture_graph(image)), WAIT_S)
        text = str(refused.value)
        assert NOT_A_COURIER_PICTURE in text, (image, text)
        assert str(base) not in text and "custom_nodes" not in text and "telegram_input" not in text, text
    assert set((base / "output" / "courier").glob("leak_*")) == before  # nothing was saved
    result = await asyncio.wait_for(run(comfyui, picture_graph("courier/node-ok.png")), JOB_S)
    (ref,) = result.outputs["2"]["images"]
    with Image.open(output_file(comfyui, ref)) as saved:
        assert saved.size == (16, 16) and saved.getpixel((3, 3))[:3] == (10, 200, 30)


async def test_a_fifo_under_input_courier_is_refused_without_being_opened(comfyui):
    fifo = comfyui.base_directory / "input" / "courier" / "node-fifo.png"
    fifo.parent.mkdir(parents=True, exist_ok=True)
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)  # opened for reading, ComfyUI's thread would wait for a writer forever
    try:
        with pytest.raises(ComfyError, match="not a Courier input picture"):
            await asyncio.wait_for(run(comfyui, picture_graph("courier/node-fifo.png")), WAIT_S)
    finally:
        with contextlib.suppress(OSError):  # release a reader the old code left blocked
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        fifo.unlink()
