"""/img where no backend has a checkpoint (issue 29): it says so and how to add one, naming
``tiny-models`` for a trial, instead of queueing a job that fails on the shipped graph's stand-in
file name (``v1-5-pruned-emaonly.safetensors``, a name the user never chose)."""

import pytest

from comfyui_courier.bot.options import option_message
from comfyui_courier.core import i18n
from comfyui_courier.jobs import model_graph
from comfyui_courier.jobs.model_names import job_graph
from comfyui_courier.jobs.options import OptionError, command_options
from comfyui_courier.jobs.seed import seed_manifest, shipped_workflow

IMG = shipped_workflow(seed_manifest()["img"])


def say(key: str, **params) -> str:
    return i18n.text("en", key, **params)


def test_img_with_no_checkpoint_on_any_backend_says_so_and_names_tiny_models():
    with pytest.raises(OptionError) as raised:
        job_graph(IMG, {}, {"checkpoints": set(), "loras": set()}, picture=False)
    text = option_message(raised.value, say, "img", command_options(IMG))
    assert "tiny-models" in text and "checkpoints" in text and "/img" in text, text
    assert model_graph.checkpoint_of(IMG) not in text


def test_before_any_backend_listed_its_models_the_graph_is_left_as_it_is():
    assert job_graph(IMG, {}, {}, picture=False) == IMG  # the claim waits for a backend that has the file
