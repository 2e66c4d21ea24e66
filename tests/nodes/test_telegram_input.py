"""Telegram Input without ComfyUI running: the editor defaults render a card, the job's values pass through."""

from comfyui_courier.tests.support.requires import require_comfy_api, require_module

torch = require_module("torch", "ComfyUI's requirements bring it")
require_comfy_api()
from comfyui_courier.nodes.telegram_input import TelegramInput  # noqa: E402 - needs comfy_api importable


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
