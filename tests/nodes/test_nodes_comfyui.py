"""Telegram Input/Output inside a real ComfyUI (COMFYUI_DIR): animation, video, metadata, editor sending.

Prompts are queued over ComfyUI's HTTP API as the editor queues them. The sending test starts a
ComfyUI whose bot talks to the Bot API emulator of this test (on 127.0.0.1); ComfyUI is started
off the event loop so the emulator keeps answering while it boots.
"""

import asyncio
import io
import json

import pytest
from PIL import Image

from comfyui_courier.jobs.comfy_client import ComfyClient, ComfyError
from comfyui_courier.tests.support.requires import require_module

USER = 4242
BOOT_S = 90


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


async def test_sending_from_the_editor_needs_the_bot(comfyui):
    await bot_settled(comfyui, "off")
    with pytest.raises(ComfyError, match="bot is not running \\(TELEGRAM_BOT_TOKEN is not set\\)"):
        await run(comfyui, graph({"images": ["2", 0], "send_to_chat": str(USER)}, frames=1))


async def test_a_bad_chat_id_is_refused_before_running(comfyui):
    with pytest.raises(ComfyError, match="send_to_chat must be a Telegram chat id"):
        await run(comfyui, graph({"images": ["2", 0], "send_to_chat": "@me"}, frames=1))


async def bot_settled(server, expected: str) -> None:
    """Wait until the pack's boot has decided about the bot, which must then be ``expected``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOOT_S
    while True:
        health = await asyncio.to_thread(server.get_json, "/courier/health")
        bot = health["components"]["bot"]
        if bot["state"] != "starting" and bot["reason"] != "not started":
            assert bot["state"] == expected, f"{health}\n{server.log_tail()}"
            return
        assert loop.time() < deadline, f"bot undecided after {BOOT_S} s: {health}"
        await asyncio.sleep(0.25)


@pytest.fixture
async def comfyui_with_bot(comfyui_factory, botapi, botapi_bot, pg_database):
    server = comfyui_factory(start=False, env={
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database})
    await asyncio.to_thread(server.start)
    await bot_settled(server, "ok")
    return server


async def test_send_to_chat_delivers_the_render_from_the_editor(comfyui_with_bot, botapi_bot):
    botapi_bot.inject_text(USER, "/help")  # a user who has started the bot
    result = await run(comfyui_with_bot, graph({"images": ["2", 0], "send_to_chat": str(USER)}, frames=1))
    (ref,) = result.outputs["3"]["images"]
    document = await botapi_bot.wait_for_call(
        "sendDocument", timeout=30, where=lambda call: call.params.get("chat_id") in (USER, str(USER)))
    sent = botapi_bot.file_bytes(document.result["document"]["file_id"])
    assert sent == output_file(comfyui_with_bot, ref).read_bytes()
    with Image.open(io.BytesIO(sent)) as image:
        assert image.size == (64, 48) and "prompt" not in image.text
