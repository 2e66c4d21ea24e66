"""Telegram Input: where a bot job's text, image and seed enter a workflow."""

from __future__ import annotations

import torch
from comfy_api.latest import io

from .. import imaging
from ..jobs.options import (
    DEFAULT_DECLARATION,
    DEFAULT_SIZE,
    DEFAULT_STEPS,
    MAX_SEED,
    SIZE_LIMITS,
    STEPS_LIMITS,
    declared,
)

MAX_BATCH = 64


class TelegramInput(io.ComfyNode):
    NODE_ID = "CourierTelegramInput"

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id=cls.NODE_ID,
            display_name="Telegram Input (Courier)",
            category="Courier/Telegram",
            description=("Receives the prompt, image, seed and options of a Telegram command. In the editor the "
                         "defaults below are used; without an image it outputs a card showing the prompt."),
            inputs=[  # names and order are fixed: saved editor graphs store widget values by position
                io.String.Input("command", default="mycmd", tooltip="Bot command name (without /)"),
                io.String.Input("prompt", default="an astronaut riding a horse", multiline=True),
                io.Int.Input("seed", default=0, min=0, max=MAX_SEED, control_after_generate=True),
                io.Int.Input("width", default=DEFAULT_SIZE, min=SIZE_LIMITS[0], max=SIZE_LIMITS[1], step=8),
                io.Int.Input("height", default=DEFAULT_SIZE, min=SIZE_LIMITS[0], max=SIZE_LIMITS[1], step=8),
                io.String.Input("image", optional=True, default="",
                                tooltip="Uploaded input image name; set by the bot"),
                io.Boolean.Input("require_image", optional=True, default=False,
                                 tooltip="The command edits the user's picture (reply, caption or last result)"),
                io.String.Input("chat_id", optional=True, default=""),
                io.String.Input("user_id", optional=True, default=""),
                io.Int.Input("steps", optional=True, default=DEFAULT_STEPS, min=STEPS_LIMITS[0],
                             max=STEPS_LIMITS[1], tooltip="Sampling steps; the bot's --steps sets it"),
                io.String.Input("negative", optional=True, default="", multiline=True,
                                tooltip="Negative prompt; the bot's --neg sets it"),
                io.Int.Input("batch", optional=True, default=1, min=1, max=MAX_BATCH,
                             tooltip="Batch size; the bot's --n sets it where the graph takes it"),
                io.String.Input("options", optional=True, default=DEFAULT_DECLARATION,
                                tooltip="Options users may type, with their ranges, e.g. "
                                        "'size=256-2048 steps=1-50 n=4 neg'. One is offered only "
                                        "where its output (width/height, steps, negative) is wired"),
            ],
            outputs=[  # new outputs go last: published graphs link by index
                io.String.Output(display_name="prompt"),
                io.Image.Output(display_name="image"),
                io.Mask.Output(display_name="mask"),
                io.Int.Output(display_name="seed"),
                io.Int.Output(display_name="width"),
                io.Int.Output(display_name="height"),
                io.String.Output(display_name="chat_id"),
                io.String.Output(display_name="user_id"),
                io.Int.Output(display_name="steps"),
                io.String.Output(display_name="negative"),
                io.Int.Output(display_name="batch"),
            ],
        )

    @classmethod
    def execute(cls, command, prompt, seed, width, height, image="", require_image=False, chat_id="", user_id="",
                steps=DEFAULT_STEPS, negative="", batch=1, options=DEFAULT_DECLARATION) -> io.NodeOutput:
        picture = load_input_image(image) if image else imaging.text_card(prompt, width, height, seed)
        rgb, mask = imaging.image_to_arrays(picture)
        return io.NodeOutput(prompt, torch.from_numpy(rgb)[None], torch.from_numpy(mask)[None], seed,
                             picture.width, picture.height, chat_id, user_id, steps, negative, batch)

    @classmethod
    def fingerprint_inputs(cls, image="", **_):
        """Re-run when the uploaded file's bytes change, even under the same name (as LoadImage)."""
        return file_digest(image) if image else ""

    @classmethod
    def validate_inputs(cls, image="", options=DEFAULT_DECLARATION):
        if image and not input_image_exists(image):
            return f"Input image not found: {image}"
        try:
            declared(options)
        except ValueError as exc:
            return str(exc)
        return True


def load_input_image(name: str):
    return imaging.decode_image(read_input(name), max_bytes=512 * 2**20)


def file_digest(name: str) -> str:
    import hashlib

    return hashlib.sha256(read_input(name)).hexdigest()


def read_input(name: str) -> bytes:
    """The bytes of input file ``name``; an error names it as given, not by its server path (``/history``)."""
    import folder_paths

    try:
        with open(folder_paths.get_annotated_filepath(name), "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise FileNotFoundError(f"cannot read the input image {name!r}: {exc.strerror or type(exc).__name__}") from None


def input_image_exists(name: str) -> bool:
    import folder_paths

    return folder_paths.exists_annotated_filepath(name)
