"""Telegram Input without ComfyUI running: the editor defaults render a card, the job's values pass through,
and its picture is only ever the job's upload under ``input/courier/`` (issue 27, item 1)."""

import hashlib
import io
import os

import pytest
from PIL import Image

from comfyui_courier.tests.support.requires import require_comfy_api, require_module

torch = require_module("torch", "ComfyUI's requirements bring it")
require_comfy_api()
from comfyui_courier.nodes import telegram_input  # noqa: E402 - needs comfy_api importable
from comfyui_courier.nodes.telegram_input import NOT_A_COURIER_PICTURE, TelegramInput  # noqa: E402


def receive(**values):
    """The node's outputs, as ComfyUI runs it."""
    return TelegramInput.execute(**values).args


def defaults():
    spec = TelegramInput.INPUT_TYPES()
    return {name: options[1]["default"] for part in ("required", "optional")
            for name, options in spec[part].items()}


def test_the_editor_defaults_run_without_a_bot():
    values = defaults()
    prompt, image, mask, seed, width, height, chat_id, user_id, *_ = receive(**values)
    assert prompt == values["prompt"] and seed == values["seed"]
    assert image.shape == (1, values["height"], values["width"], 3) and image.dtype == torch.float32
    assert mask.shape == (1, values["height"], values["width"]) and float(mask.abs().max()) == 0.0
    assert (width, height) == (values["width"], values["height"])
    assert (chat_id, user_id) == ("", "")
    assert float(image.min()) >= 0.0 and float(image.max()) <= 1.0


def test_a_job_s_values_come_out_as_given():
    values = {**defaults(), "prompt": "hi", "seed": 7, "width": 320, "height": 200, "chat_id": "-100",
              "user_id": "42", "steps": 9, "negative": "blurry", "batch": 3}
    prompt, image, _, seed, width, height, chat_id, user_id, steps, negative, batch = receive(**values)
    assert (prompt, seed, width, height, chat_id, user_id) == ("hi", 7, 320, 200, "-100", "42")
    assert (steps, negative, batch) == (9, "blurry", 3)
    assert image.shape[1:3] == (200, 320)


def test_the_card_depends_on_prompt_and_seed():
    base = defaults()
    first = receive(**base)[1]
    assert torch.equal(first, receive(**base)[1])
    assert not torch.equal(first, receive(**{**base, "prompt": "other"})[1])


def test_outputs_and_widgets_are_what_the_issue_lists():
    # the first eight keep their places: published graphs link to outputs by index
    assert TelegramInput.RETURN_NAMES == ["prompt", "image", "mask", "seed", "width", "height", "chat_id", "user_id",
                                          "steps", "negative", "batch"]
    assert TelegramInput.RETURN_TYPES == ["STRING", "IMAGE", "MASK", "INT", "INT", "INT", "STRING", "STRING",
                                          "INT", "STRING", "INT"]
    assert {"command", "prompt", "seed", "width", "height", "image", "require_image", "steps", "negative", "batch",
            "options"} <= set(defaults())
    assert set(TelegramInput.INPUT_TYPES()["required"]) == {"command", "prompt", "seed", "width", "height"}
    assert TelegramInput.fingerprint_inputs(image="") == ""


def test_an_old_graph_s_input_without_the_new_widgets_still_runs():
    """Graphs published before steps, negative, batch and options existed leave them out."""
    old = {name: value for name, value in defaults().items() if name not in ("steps", "negative", "batch", "options")}
    outputs = receive(**old)
    assert outputs[8:] == (20, "", 1)


def test_a_malformed_options_declaration_fails_validation_in_the_editor():
    assert TelegramInput.validate_inputs(options="size steps=1-50 n=4 neg") is True
    message = TelegramInput.validate_inputs(options="steps=50-1")
    assert isinstance(message, str) and "steps" in message
    assert "colour" in TelegramInput.validate_inputs(options="colour")


# --- the picture: only the job's upload, courier/<name> in ComfyUI's input folder -------------------

@pytest.fixture
def input_folder(tmp_path):
    """ComfyUI's input folder set to a fresh ``tmp_path/input`` with ``courier/`` in it; a picture
    outside it (``tmp_path/private.png``) and one inside (``courier/job-1.png``)."""
    import folder_paths

    before = folder_paths.get_input_directory()
    folder = tmp_path / "input"
    (folder / "courier").mkdir(parents=True)
    picture = png_bytes()
    (folder / "courier" / "job-1.png").write_bytes(picture)
    (tmp_path / "private.png").write_bytes(picture)
    (folder / "outside.png").write_bytes(picture)
    folder_paths.set_input_directory(str(folder))
    yield folder
    folder_paths.set_input_directory(before)


def png_bytes(size=(8, 6)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 80, 40)).save(buffer, "PNG")
    return buffer.getvalue()


def refused(name: str) -> bool:
    """Refused at validation, with the one message; and refused where it would be read."""
    message = TelegramInput.validate_inputs(image=name)
    with pytest.raises(ValueError) as raised:
        telegram_input.read_input(name)
    return message == NOT_A_COURIER_PICTURE == str(raised.value)


def test_the_job_s_upload_is_read(input_folder):
    assert TelegramInput.validate_inputs(image="courier/job-1.png") is True
    image = receive(**{**defaults(), "image": "courier/job-1.png"})[1]
    assert image.shape == (1, 6, 8, 3)
    assert TelegramInput.fingerprint_inputs(image="courier/job-1.png") == hashlib.sha256(
        (input_folder / "courier" / "job-1.png").read_bytes()).hexdigest()


def test_a_path_an_annotation_or_another_folder_is_refused_with_one_message(input_folder, tmp_path):
    output = tmp_path / "output"
    output.mkdir()
    (output / "secret.png").write_bytes(png_bytes())
    for name in (str(tmp_path / "private.png"), "/etc/hostname", "/etc/nope.png", "../private.png",
                 "courier/../outside.png", "courier/../../private.png", "outside.png", "outside.png [input]",
                 "courier/job-1.png [input]", "secret.png [output]", "courier/job-1.png[output]",
                 "courier/missing.png", "courier/", "courier/.", "courier\\job-1.png", "courier/sub/job-1.png",
                 "/dev/zero", "courier//job-1.png"):
        assert refused(name), name
    assert str(tmp_path) not in NOT_A_COURIER_PICTURE and "telegram_input" not in NOT_A_COURIER_PICTURE


def test_a_link_out_of_courier_is_refused_and_one_inside_is_read(input_folder, tmp_path):
    (input_folder / "courier" / "out.png").symlink_to(tmp_path / "private.png")
    (input_folder / "courier" / "dir").symlink_to(tmp_path)
    (input_folder / "courier" / "same.png").symlink_to(input_folder / "courier" / "job-1.png")
    assert refused("courier/out.png") and refused("courier/dir")
    assert telegram_input.read_input("courier/same.png") == (input_folder / "courier" / "job-1.png").read_bytes()


def test_a_fifo_a_device_a_folder_or_an_oversized_file_is_refused_unread(input_folder, monkeypatch):
    courier = input_folder / "courier"
    os.mkfifo(courier / "fifo.png")  # opened for reading it would block until a writer came
    (courier / "zero.png").symlink_to("/dev/zero")
    (courier / "folder.png").mkdir()
    monkeypatch.setattr(telegram_input, "MAX_INPUT_BYTES", 1000)
    with open(courier / "big.png", "wb") as big:
        big.truncate(1001)
    for name in ("courier/fifo.png", "courier/zero.png", "courier/folder.png", "courier/big.png"):
        assert refused(name), name


def test_a_file_grown_past_the_bound_after_validation_is_read_no_further(input_folder, monkeypatch):
    monkeypatch.setattr(telegram_input, "MAX_INPUT_BYTES", 1000)
    grown = input_folder / "courier" / "grown.png"
    grown.write_bytes(b"x" * 1000)
    assert TelegramInput.validate_inputs(image="courier/grown.png") is True
    monkeypatch.setattr(telegram_input, "courier_picture", lambda name: grown)  # as it was at validation
    grown.write_bytes(b"x" * 5000)
    with pytest.raises(ValueError, match="not a Courier input picture"):
        telegram_input.read_input("courier/grown.png")
