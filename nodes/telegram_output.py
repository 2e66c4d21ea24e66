"""Telegram Output: saves what the bot delivers -- lossless images, or a video -- and can send it from the editor.

A bot job's results are sent by the dispatcher, which reads this node's UI output. The bot
sets ``bot_job`` on each job's node, which then hands it the files without a ``/view`` round
trip (``hand_back``). Run from the editor with ``send_to_chat`` set, the node sends the render
itself through the running Courier's bot ("send this render to my Telegram"), but only when
Courier's editor gate approved that prompt (``editor_proof``), since anyone who can queue a prompt
could set the input, and only to an allowed user or admin of the bot (PostgreSQL is asked as it
sends). Publishing the graph as a command resets it, so bot jobs never send twice. Files go
under ``output/courier/`` whatever ``filename_prefix`` says, and errors name them relative to
ComfyUI's folders (they land in ``/history``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from comfy_api.v0_0_2 import io

from ..core import imaging
from ..jobs.comfy.records import PUSH_MAX_BYTES, png_preview_payload
from .prefix import courier_prefix

IMAGES_AS = ("images", "animation")
CHAT_ID = re.compile(r"-?[0-9]{1,20}")
SEND_TIMEOUT_S = 120.0


class Saved(NamedTuple):
    path: str
    ref: dict[str, str]  # {filename, subfolder, type}: what ComfyUI's UI and the dispatcher read
    data: bytes | None = None  # what was written, for an image


class Target(NamedTuple):
    """Where numbered output files go, as ComfyUI's ``folder_paths.get_save_image_path`` says."""

    folder: str
    name: str
    counter: int
    subfolder: str

    def file(self, index: int, suffix: str) -> Saved:
        filename = f"{self.name}_{self.counter + index:05}_{suffix}"
        return Saved(os.path.join(self.folder, filename),
                     {"filename": filename, "subfolder": self.subfolder, "type": "output"})


class TelegramOutput(io.ComfyNode):
    NODE_ID = "CourierTelegramOutput"

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id=cls.NODE_ID,
            display_name="Telegram Output (Courier)",
            category="Courier/Telegram",
            description=("What is connected here is sent back to the Telegram chat: images as lossless files, "
                         "or a video (connect a VIDEO, or set images_as to animation to turn the frames into an "
                         "MP4). Workflow metadata is stripped unless keep_metadata is on. In the editor, set "
                         "send_to_chat to your Telegram id to get the render in your chat."),
            inputs=[  # names and order are fixed: saved editor graphs store widget values by position
                io.String.Input("filename_prefix", default="courier/result"),
                io.Image.Input("images", optional=True),
                io.Video.Input("video", optional=True),
                io.Combo.Input("images_as", options=list(IMAGES_AS), optional=True, default="images",
                               tooltip="animation: the images are the frames of one MP4"),
                io.Float.Input("fps", optional=True, default=8.0, min=1.0, max=120.0, step=1.0,
                               tooltip="Frame rate when images_as is animation"),
                io.Boolean.Input("keep_metadata", optional=True, default=False,
                                 tooltip="Embed the workflow in the file (others can read it)"),
                io.String.Input("send_to_chat", optional=True, default="",
                                tooltip="Editor only: also send the render to this Telegram chat "
                                        "id (your user id for your private chat with the bot). "
                                        "Reset when the graph is published as a command."),
                io.String.Input("bot_job", optional=True, default="",
                                tooltip="Set by the bot for each of its jobs (the node then hands the "
                                        "bot its files directly). Leave empty."),
            ],
            outputs=[],
            hidden=[io.Hidden.prompt, io.Hidden.extra_pnginfo],
            is_output_node=True,
        )

    @classmethod
    def validate_inputs(cls, filename_prefix="courier/result", images_as="images", send_to_chat=""):
        if images_as not in IMAGES_AS:  # ComfyUI does not check a v3 combo's value against its options
            return f"images_as must be one of {', '.join(IMAGES_AS)}, not {images_as!r}"
        if send_to_chat.strip() and not CHAT_ID.fullmatch(send_to_chat.strip()):
            return f"send_to_chat must be a Telegram chat id (a number), not {send_to_chat!r}"
        try:
            courier_prefix(filename_prefix)
        except ValueError as exc:
            return str(exc)
        return True

    @classmethod
    async def execute(cls, filename_prefix="courier/result", images=None, video=None, images_as="images",
                      fps=8.0, keep_metadata=False, send_to_chat="", bot_job="") -> io.NodeOutput:
        if (images is None) == (video is None):
            raise ValueError("connect either images or a video to Telegram Output "
                             "(use two Telegram Output nodes to send both)")
        prompt = cls.hidden.prompt
        metadata = workflow_metadata(prompt, cls.hidden.extra_pnginfo) if keep_metadata else None
        filename_prefix = courier_prefix(filename_prefix)
        if video is None and images_as == "images":
            saved = save_images(images, output_target(filename_prefix, images.shape[2], images.shape[1]), metadata)
            ui = {"images": [s.ref for s in saved]}
        else:
            if video is None:
                video = frames_to_video(images, fps)
            saved = [save_video(video, output_target(filename_prefix, *video.get_dimensions()), metadata)]
            ui = {"images": [s.ref for s in saved], "animated": (True,)}  # as ComfyUI's SaveVideo
        if bot_job:
            hand_back(saved)
        approval, refusal = editor_verdict(send_to_chat, prompt)
        if approval is not None:
            refusal = await send_from_editor(*running_courier(), approval, saved)
        if refusal is not None:
            ui["text"] = [f"not sent to Telegram: {refusal}"]  # the files are saved all the same
        return io.NodeOutput(ui=ui)


def editor_verdict(send_to_chat: str, prompt) -> tuple[Any, str | None]:
    """(what the running Courier's editor gate approved for this node of the running prompt (an
    ``Approval``), or None; why not)."""
    try:
        from comfy_execution.utils import get_executing_context

        courier, _ = running_courier()
    except ImportError:  # outside ComfyUI nothing can have approved it
        context = courier = None
    else:
        context = get_executing_context()
    gate = courier.editor_gate if courier is not None else None
    if context is None or gate is None:
        return None, "Courier's editor check is not loaded" if send_to_chat.strip() else None
    return gate.take(context.prompt_id, context.node_id, send_to_chat, prompt or {})


def workflow_metadata(prompt, extra_pnginfo) -> dict[str, Any]:
    """What ComfyUI's save nodes embed: the prompt and the editor's extra_pnginfo (the workflow)."""
    found = {"prompt": prompt} if prompt is not None else {}
    found.update(extra_pnginfo or {})
    return found


def output_target(filename_prefix: str, width: int, height: int) -> Target:
    """The next free numbered files for ``filename_prefix`` in ComfyUI's output directory."""
    import folder_paths

    folder, name, counter, subfolder, _ = folder_paths.get_save_image_path(
        filename_prefix, folder_paths.get_output_directory(), width, height)
    return Target(folder, name, counter, subfolder)


def save_images(images, target: Target, metadata: dict[str, Any] | None) -> list[Saved]:
    """Each image of the batch as a lossless PNG, with only ``metadata`` as (JSON) text chunks."""
    chunks = {key: json.dumps(value) for key, value in metadata.items()} if metadata else None
    saved = []
    for index, tensor in enumerate(images):
        file = target.file(index, ".png")
        data = imaging.encode_png(imaging.array_to_image(tensor.cpu().numpy()), chunks)
        with open(file.path, "wb") as fh:
            fh.write(data)
        saved.append(file._replace(data=data))
    return saved


def frames_to_video(images, fps: float):
    """The batch of images as the frames of one ComfyUI VIDEO."""
    from fractions import Fraction

    from comfy_api.v0_0_2 import InputImpl, Types

    return InputImpl.VideoFromComponents(Types.VideoComponents(images=images, frame_rate=Fraction(fps)))


def save_video(video, target: Target, metadata: dict[str, Any] | None) -> Saved:
    """An MP4 as ComfyUI's SaveVideo writes it; without ``metadata`` none is left in the file."""
    file = target.file(0, ".mp4")
    video.save_to(file.path, format="auto", codec="auto", metadata=metadata or None)
    if not metadata:
        strip_video_metadata(file.path)  # a video loaded from a file keeps that file's tags otherwise
    return file


def strip_video_metadata(path: str) -> None:
    """Rewrite the container without its metadata tags (streams copied, not re-encoded)."""
    import av

    root, suffix = os.path.splitext(path)
    partial = f"{root}.partial{suffix}"  # the muxer is chosen by the suffix, as for the original
    with av.open(path) as source, av.open(partial, mode="w") as target:
        streams = {stream.index: target.add_stream_from_template(stream) for stream in source.streams
                   if stream.type in ("video", "audio")}
        for packet in source.demux(*(s for s in source.streams if s.index in streams)):
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                target.mux(packet)
    os.replace(partial, path)


def hand_back(saved: list[Saved]) -> None:
    """Give the bot job that queued the running prompt its files, sparing it the ``/view`` round trip.

    When the bot runs in this ComfyUI and follows the prompt, the bytes go to its job in memory
    (``jobs.handoff``). Otherwise images go to the queuing client's websocket as PNG
    ``PREVIEW_IMAGE`` frames, as ComfyUI's own SaveImageWebsocket sends them, through the
    server's message queue: after this node's ``executing`` frame, before its ``executed``.
    A video, or images over ``PUSH_MAX_BYTES``, the bot fetches with ``/view``.
    """
    from comfy_execution.utils import get_executing_context
    from protocol import BinaryEventTypes
    from server import PromptServer

    context = get_executing_context()
    if context is None:
        return
    courier, _ = running_courier()
    if courier is not None and courier.takes_files_of(context.prompt_id):
        files = [s.data if s.data is not None else Path(s.path).read_bytes() for s in saved]
        if courier.hand_over(context.prompt_id, context.node_id, files):
            return
    server = PromptServer.instance
    images = [s.data for s in saved]
    if server.client_id is None or None in images or sum(map(len, images)) > PUSH_MAX_BYTES:
        return
    for data in images:
        server.send_sync(BinaryEventTypes.PREVIEW_IMAGE, png_preview_payload(data), server.client_id)


async def send_from_editor(courier, loop: asyncio.AbstractEventLoop, approval, saved: list[Saved]) -> str | None:
    """Send what the editor gate approved (``approval``) through ``courier``'s bot on ``loop`` (the
    server's, where the bot and the database live); None when sent, or why nothing was."""
    reason = courier.bot_reason() if courier is not None else "Courier is not loaded"
    if reason is not None:
        raise RuntimeError(f"cannot send to Telegram chat {approval.chat}: the bot is not running ({reason}); "
                           f"the render is saved as {relative_name(saved[0])}")
    future = asyncio.run_coroutine_threadsafe(courier.send_from_editor(approval, [s.path for s in saved]), loop)
    return await asyncio.wait_for(asyncio.wrap_future(future), SEND_TIMEOUT_S)


def relative_name(saved: Saved) -> str:
    """Where ``saved`` is, as ComfyUI's folders name it (``output/courier/x_00001_.png``): no server path."""
    return "/".join(part for part in (saved.ref["type"], saved.ref["subfolder"], saved.ref["filename"]) if part)


def running_courier():
    """(the Courier this ComfyUI runs, or None; the server's event loop, where its bot lives).

    Nodes execute on ComfyUI's worker thread; the Courier sits on ComfyUI's aiohttp app under
    the ``COURIER`` AppKey (host.attach), like every service of the pack.
    """
    from server import PromptServer

    from ..runtime import COURIER

    server = PromptServer.instance
    return server.app.get(COURIER), server.loop
