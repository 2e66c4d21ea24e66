"""Telegram Output's plain functions without ComfyUI running: PNGs, videos, metadata, sending to a chat."""

import asyncio
import io
import json
import secrets
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image
from telegram import Bot

from comfyui_courier.bot.editor_sends import send_files
from comfyui_courier.core.config import Settings
from comfyui_courier.jobs.editor_proof import Approval
from comfyui_courier.nodes.prefix import courier_prefix
from comfyui_courier.runtime import Courier
from comfyui_courier.tests.support.requires import require_comfy_api, require_module

torch = require_module("torch", "ComfyUI's requirements bring it")
require_comfy_api()
from comfyui_courier.nodes import telegram_output  # noqa: E402 - needs comfy_api importable
from comfyui_courier.nodes.telegram_output import (  # noqa: E402
    Target,
    TelegramOutput,
    save_images,
    save_video,
    send_from_editor,
    strip_video_metadata,
    workflow_metadata,
)

needs_av = pytest.mark.usefixtures("pyav")


@pytest.fixture
def pyav():
    """PyAV, ComfyUI's video library: not a requirement of the pack itself."""
    return require_module("av", "PyAV, ComfyUI's video library: install ComfyUI's requirements")

@pytest.fixture
def deliver(monkeypatch):
    """Run the node as ComfyUI does (hidden inputs on a clone of the class), outside a ComfyUI server."""
    from comfy_api.v0_0_2 import io

    monkeypatch.setitem(sys.modules, "server", None)  # no PromptServer: nothing approved an editor send

    async def run(prompt=None, extra_pnginfo=None, **inputs):
        node = TelegramOutput.PREPARE_CLASS_CLONE({io.Hidden.prompt: prompt, io.Hidden.extra_pnginfo: extra_pnginfo})
        return await node.execute(**inputs)
    return run


PROMPT = {"1": {"class_type": "CourierTelegramInput", "inputs": {"prompt": "a secret"}}}
EXTRA = {"workflow": {"nodes": [], "links": []}}


def frames(count=2, height=32, width=48):
    ramp = np.linspace(0, 1, width, dtype=np.float32)
    return torch.from_numpy(np.stack([np.stack([np.tile(ramp * (i + 1) / count, (height, 1))] * 3, axis=-1)
                                      for i in range(count)]))


def target(tmp_path):
    return Target(str(tmp_path), "result", 7, "courier")


def test_images_are_lossless_pngs_without_metadata_by_default(tmp_path):
    images = frames()
    saved = save_images(images, target(tmp_path), None)
    assert [s.ref for s in saved] == [{"filename": f"result_{n:05}_.png", "subfolder": "courier", "type": "output"}
                                      for n in (7, 8)]
    with Image.open(saved[1].path) as png:
        assert png.text == {}
        pixels = np.asarray(png, dtype=np.float32) / 255
    assert np.abs(pixels - images[1].numpy()).max() <= 0.5 / 255 + 1e-6  # 8-bit rounding only


def test_metadata_is_embedded_when_asked(tmp_path):
    (saved,) = save_images(frames(1), target(tmp_path), workflow_metadata(PROMPT, EXTRA))
    with Image.open(saved.path) as png:
        assert json.loads(png.text["prompt"]) == PROMPT
        assert json.loads(png.text["workflow"]) == EXTRA["workflow"]


def test_workflow_metadata_is_what_comfyui_embeds():
    assert workflow_metadata(PROMPT, EXTRA) == {"prompt": PROMPT, **EXTRA}
    assert workflow_metadata(None, None) == {}


@pytest.mark.parametrize("value,ok", [("", True), ("  ", True), ("123456789", True), ("-1001234567890", True),
                                      ("@channel", False), ("12a", False), ("1; drop", False)])
def test_send_to_chat_must_be_a_chat_id(value, ok):
    assert (TelegramOutput.validate_inputs(send_to_chat=value) is True) == ok


@pytest.mark.parametrize("connected", [{}, {"images": "x", "video": "y"}])
async def test_images_or_a_video_not_both_nor_none(connected, deliver):
    with pytest.raises(ValueError, match="either images or a video"):
        await deliver(**connected)


async def test_deliver_reports_images_to_the_ui(tmp_path, monkeypatch, deliver):
    monkeypatch.setattr(telegram_output, "output_target", lambda prefix, w, h: target(tmp_path))
    result = await deliver(filename_prefix="courier/x", images=frames(2), prompt=PROMPT, extra_pnginfo=EXTRA)
    assert [ref["filename"] for ref in result.ui["images"]] == ["result_00007_.png", "result_00008_.png"]
    assert "animated" not in result.ui and result.args == ()


def write_mp4(path, count=3, tags=None):
    """An H.264 MP4 as ComfyUI's VideoFromComponents writes it (its container tags are ``tags``)."""
    import av  # a needs_av test

    with av.open(str(path), mode="w", options={"movflags": "use_metadata_tags"}) as out:
        for key, value in (tags or {}).items():
            out.metadata[key] = value
        stream = out.add_stream("h264", rate=4)
        stream.width, stream.height, stream.pix_fmt = 48, 32, "yuv420p"
        for frame in frames(count).numpy():
            picture = av.VideoFrame.from_ndarray((frame * 255).astype(np.uint8), format="rgb24")
            out.mux(stream.encode(picture.reformat(format="yuv420p")))
        out.mux(stream.encode(None))


def tags_and_frames(path):
    import av  # a needs_av test

    with av.open(str(path)) as video:
        return dict(video.metadata), sum(1 for _ in video.decode(video=0))


class FileVideo:
    """The part of ComfyUI's VIDEO the node uses, backed by a file with tags (like VideoFromFile)."""

    def __init__(self, tags):
        self.tags = tags

    def get_dimensions(self):
        return 48, 32

    def save_to(self, path, format, codec, metadata):
        write_mp4(path, tags={**self.tags, **{k: json.dumps(v) for k, v in (metadata or {}).items()}})


@needs_av
def test_strip_video_metadata_keeps_the_frames(tmp_path):
    path = tmp_path / "in.mp4"
    write_mp4(path, count=5, tags={"prompt": "{\"secret\": 1}", "comment": "x"})
    assert tags_and_frames(path)[0].keys() >= {"prompt", "comment"}
    strip_video_metadata(str(path))
    tags, count = tags_and_frames(path)
    assert count == 5
    assert not {"prompt", "workflow", "comment"} & tags.keys(), tags
    assert not list(tmp_path.glob("*.partial*"))


@needs_av
def test_videos_lose_even_the_tags_of_their_source_file(tmp_path):
    saved = save_video(FileVideo({"workflow": "{}", "prompt": "{}"}), target(tmp_path), None)
    assert saved.ref == {"filename": "result_00007_.mp4", "subfolder": "courier", "type": "output"}
    assert not {"prompt", "workflow"} & tags_and_frames(saved.path)[0].keys()


@needs_av
def test_videos_keep_the_workflow_when_asked(tmp_path):
    saved = save_video(FileVideo({}), target(tmp_path), workflow_metadata(PROMPT, EXTRA))
    tags = tags_and_frames(saved.path)[0]
    assert json.loads(tags["prompt"]) == PROMPT and json.loads(tags["workflow"]) == EXTRA["workflow"]


@needs_av
async def test_a_video_is_reported_as_animated(tmp_path, monkeypatch, deliver):
    monkeypatch.setattr(telegram_output, "output_target", lambda prefix, w, h: target(tmp_path))
    result = await deliver(filename_prefix="courier/x", video=FileVideo({}))
    assert result.ui == {"images": [{"filename": "result_00007_.mp4", "subfolder": "courier", "type": "output"}],
                            "animated": (True,)}


@pytest.fixture
async def bot(botapi, botapi_bot):
    """A python-telegram-bot Bot on the emulator; user 4242 has started a chat with it."""
    botapi_bot.inject_text(4242, "/start")
    async with Bot(botapi_bot.token, base_url=botapi.base_url, base_file_url=botapi.base_file_url) as ptb:
        yield ptb


@needs_av
async def test_send_files_sends_images_losslessly_and_videos_as_video(tmp_path, bot, botapi_bot):
    (png,) = save_images(frames(1), target(tmp_path), None)
    mp4 = tmp_path / "clip.mp4"
    write_mp4(mp4)
    sent = await send_files(bot, 4242, [png.path, str(mp4)])
    assert [s["kind"] for s in sent] == ["image", "video"]
    methods = [(c.method, c.params.get("chat_id")) for c in botapi_bot.outbox]
    assert methods == [("sendDocument", 4242), ("sendPhoto", 4242), ("sendVideo", 4242), ("sendDocument", 4242)]
    video, video_file = botapi_bot.outbox[2:]  # the video streamable, its file beside it
    assert video.params["supports_streaming"] is True
    assert video_file.result["reply_to_message"]["message_id"] == video.result["message_id"]
    assert botapi_bot.file_bytes(video_file.result["document"]["file_id"]) == mp4.read_bytes()
    document = botapi_bot.outbox[0].result["document"]
    assert botapi_bot.file_bytes(document["file_id"]) == Path(png.path).read_bytes()
    with Image.open(io.BytesIO(botapi_bot.file_bytes(document["file_id"]))) as image:
        assert image.size == (48, 32)


def approval(chat: int, nonce: str | None = None) -> Approval:
    """What the editor gate approves for node 2 of a proved prompt."""
    return Approval(chat, "2", nonce or secrets.token_hex(16), time.time() + 600)


async def test_send_from_editor_uses_the_running_bot_for_allowed_users_only_and_each_proof_once(
        tmp_path, bot, botapi_bot, store):
    (png,) = save_images(frames(1), target(tmp_path), None)
    courier = Courier(Settings(allowed_users=[4242]), tmp_path, None)
    courier.bot, courier.store = SimpleNamespace(application=SimpleNamespace(bot=bot)), store
    sent = approval(4242)
    assert await send_from_editor(courier, asyncio.get_running_loop(), sent, [png]) is None
    assert botapi_bot.outbox[0].method == "sendDocument"
    count = len(botapi_bot.outbox)
    assert await send_from_editor(courier, asyncio.get_running_loop(), approval(5555), [png]) == (
        "chat 5555 is not an allowed user or admin of the bot")
    # the same proof approved again by another backend's gate, or after a restart: spent in PostgreSQL
    assert await send_from_editor(courier, asyncio.get_running_loop(), approval(4242, sent.nonce), [png]) == (
        "the editor's proof was already used (on another server of the bot, or before a restart)")
    assert len(botapi_bot.outbox) == count  # nothing sent, and no exception: the render stays saved


async def test_send_from_editor_says_why_when_the_bot_is_not_running(tmp_path):
    courier = Courier(Settings(), tmp_path, None)
    courier.health.set("bot", "off", "TELEGRAM_BOT_TOKEN is not set")
    saved = target(tmp_path).file(0, ".png")
    with pytest.raises(RuntimeError, match="bot is not running \\(TELEGRAM_BOT_TOKEN is not set\\); the render is "
                                           "saved as output/courier/result_00007_.png$"):  # no server path
        await send_from_editor(courier, asyncio.get_running_loop(), approval(4242), [saved])
    with pytest.raises(RuntimeError, match="Courier is not loaded"):
        await send_from_editor(None, asyncio.get_running_loop(), approval(4242), [saved])


@pytest.mark.parametrize("prefix,kept", [("courier/result", "courier/result"), ("result", "courier/result"),
                                         ("other/x", "courier/other/x"), ("courier", "courier/courier")])
def test_filename_prefix_is_kept_under_courier(prefix, kept):
    assert courier_prefix(prefix) == kept


def test_images_as_must_be_one_of_its_choices():
    """ComfyUI 0.3.64 does not check a v3 combo's value against its options: the node does."""
    assert TelegramOutput.validate_inputs(images_as="animation") is True
    assert TelegramOutput.validate_inputs(images_as="gif") == "images_as must be one of images, animation, not 'gif'"


@pytest.mark.parametrize("prefix", ["../x", "courier/../../x", "/abs/x", "\\x", "c:x", "", "a\\..\\..\\x"])
def test_filename_prefix_cannot_leave_courier(prefix):
    assert "filename_prefix must be a relative name under courier/" in TelegramOutput.validate_inputs(
        filename_prefix=prefix)
