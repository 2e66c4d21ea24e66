"""Telegram Input: where a bot job's text, image and seed enter a workflow."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import torch
from comfy_api.v0_0_2 import io

from ..core import imaging
from ..jobs.file_inputs import NOT_A_COURIER_PICTURE, courier_picture_name
from ..jobs.options import (
    DEFAULT_DECLARATION,
    DEFAULT_SIZE,
    DEFAULT_STEPS,
    MAX_SEED,
    SIZE_LIMITS,
    STEPS_LIMITS,
    declared,
)
from ..store.privacy import INPUT_SUBFOLDER

MAX_BATCH = 64
MAX_INPUT_BYTES = 512 * 2**20  # the most of an input picture that is read


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
                                tooltip="The job's uploaded picture, courier/<name> in ComfyUI's input folder; "
                                        "set by the bot (nothing else is read)"),
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
        if image and courier_picture(image) is None:
            return NOT_A_COURIER_PICTURE
        try:
            declared(options)
        except ValueError as exc:
            return str(exc)
        return True


def load_input_image(name: str):
    return imaging.decode_image(read_input(name), max_bytes=MAX_INPUT_BYTES)


def file_digest(name: str) -> str:
    import hashlib

    return hashlib.sha256(read_input(name)).hexdigest()


def courier_picture(name: str) -> Path | None:
    """The regular file ``courier/<plain name>`` names in ComfyUI's input folder, at most
    ``MAX_INPUT_BYTES`` and not a link out of ``courier/``; None for anything else (nothing is read)."""
    import folder_paths

    plain = courier_picture_name(name)
    if plain is None:
        return None
    folder = Path(folder_paths.get_input_directory(), INPUT_SUBFOLDER)
    try:
        path = (folder / plain).resolve(strict=True)
        inside = path.parent == folder.resolve(strict=True)
        info = path.stat()
    except (OSError, RuntimeError):  # missing, or a loop of links
        return None
    return path if inside and stat.S_ISREG(info.st_mode) and info.st_size <= MAX_INPUT_BYTES else None


def read_input(name: str) -> bytes:
    """The bytes of the Courier input picture ``name``, checked again as it is opened (a file swapped
    for a link, a FIFO or a larger file since validation is refused, never read past the bound).

    :raises ValueError: ``NOT_A_COURIER_PICTURE``, whatever the reason
    """
    path = courier_picture(name)
    data = None if path is None else _read_regular(path, MAX_INPUT_BYTES + 1)
    if data is None or len(data) > MAX_INPUT_BYTES:
        raise ValueError(NOT_A_COURIER_PICTURE)
    return data


def _read_regular(path: Path, most: int) -> bytes | None:
    """At most ``most`` bytes of ``path`` if it is a regular file, not a link, as it is opened; else None.
    (``O_NONBLOCK``: opening a FIFO does not wait for a writer.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        try:
            return file.read(most) if stat.S_ISREG(os.fstat(file.fileno()).st_mode) else None
        except OSError:
            return None
