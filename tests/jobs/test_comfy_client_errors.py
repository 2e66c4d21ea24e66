"""Error summaries from canned ComfyUI 0.3.64 replies (no server)."""

import json
from pathlib import Path

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.jobs.errors import (
    MESSAGES,
    BackendUnavailable,
    ExecutionFailed,
    Interrupted,
    Problem,
    PromptRejected,
    describe_error,
    model_folder,
    render_problems,
    summarize_execution_error,
    summarize_rejection,
)
from comfyui_courier.jobs.model_sources import model_url, model_urls
from comfyui_courier.jobs.seed import seed_manifest

TRANSCRIPT = json.loads((Path(__file__).parents[1] / "fake_comfyui" / "comfyui-0.3.64-api-transcript.json").read_text())

# An execution_error frame from ComfyUI 0.3.64 (LoadImage of a corrupt upload), traceback shortened.
LOADIMAGE_ERROR = {
    "prompt_id": "0d77bca6-7367-401d-a752-1e3621e76955", "node_id": "1", "node_type": "LoadImage", "executed": [],
    "exception_message": "cannot identify image file '/tmp/cprobe/in/courier/bad.png'\n",
    "exception_type": "PIL.UnidentifiedImageError",
    "traceback": ['  File "/work/comfyui/execution.py", line 496, in execute\n'],
    "current_inputs": {"image": ["courier/bad.png"]}, "current_outputs": [], "timestamp": 1795969075600,
}


FLUX_URLS = {model["name"]: model["url"] for model in seed_manifest()["f"]["models"]}


def test_missing_models_name_file_folder_loader_and_download():
    """A shipped command's file: one line each, with the URL commands.json gives for it."""
    problems = summarize_rejection(TRANSCRIPT["missing_model_prompt"]["json"])
    assert sorted(p.render() for p in problems) == [
        f"Missing model file ae.safetensors (folder: vae) needed by VAELoader; download: {FLUX_URLS['ae.safetensors']}",
        "Missing model file clip_l.safetensors (folder: text_encoders) needed by DualCLIPLoader; "
        f"download: {FLUX_URLS['clip_l.safetensors']}",
        "Missing model file flux1-schnell.safetensors (folder: diffusion_models) needed by UNETLoader; "
        "download: https://huggingface.co/Comfy-Org/flux1-schnell/resolve/main/flux1-schnell.safetensors",
        "Missing model file t5xxl_fp16.safetensors (folder: text_encoders) needed by DualCLIPLoader; "
        f"download: {FLUX_URLS['t5xxl_fp16.safetensors']}",
    ]
    unet = next(p for p in problems if p.params["node_type"] == "UNETLoader")
    assert unet == Problem("missing_model_from", {
        "filename": "flux1-schnell.safetensors", "folder": "diffusion_models", "node_type": "UNETLoader",
        "node_id": "1", "input_name": "unet_name", "url": FLUX_URLS["flux1-schnell.safetensors"]})
    for language in i18n.LANGUAGES:  # every catalog keeps the link, each file on a line of its own
        lines = render_problems(problems, i18n.catalog(language)).splitlines()
        assert len(lines) == 4 and all(any(url in line for url in FLUX_URLS.values()) for line in lines), language


def test_every_shipped_model_file_has_one_download_url():
    names = {}
    for entry in seed_manifest().values():
        for model in entry["models"]:
            assert model["url"].startswith("https://"), model
            assert names.setdefault(model["name"], model["url"]) == model["url"], model["name"]
    assert model_urls() == names and model_url("not-shipped.safetensors") is None


@pytest.mark.parametrize("node_type, input_name, folder", [
    ("UNETLoader", "unet_name", "diffusion_models"), ("DualCLIPLoader", "clip_name2", "text_encoders"),
    ("CLIPLoader", "clip_name", "text_encoders"), ("VAELoader", "vae_name", "vae"),
    ("CheckpointLoaderSimple", "ckpt_name", "checkpoints"), ("LoraLoader", "lora_name", "loras"),
    ("LoraLoaderModelOnly", "lora_name", "loras"), ("KSampler", "sampler_name", None),
])
def test_model_folders(node_type, input_name, folder):
    assert model_folder(node_type, input_name) == folder


def test_unknown_loader_with_a_model_file_falls_back_to_models_folder():
    reply = {"error": {"type": "prompt_outputs_failed_validation"}, "node_errors": {"5": {
        "class_type": "SomePackLoader", "dependent_outputs": ["9"], "errors": [{
            "type": "value_not_in_list", "message": "Value not in list", "details": "model: 'x.gguf' not in []",
            "extra_info": {"input_name": "model", "received_value": "x.gguf"}}]}}}
    assert [p.render() for p in summarize_rejection(reply)] == [
        "Missing model file x.gguf (folder: models) needed by SomePackLoader"]


def test_same_missing_file_on_two_nodes_is_one_problem():
    error = {"type": "value_not_in_list", "message": "Value not in list", "details": "",
             "extra_info": {"input_name": "lora_name", "received_value": "a.safetensors"}}
    reply = {"error": {}, "node_errors": {"1": {"class_type": "LoraLoader", "errors": [error]},
                                          "2": {"class_type": "LoraLoader", "errors": [error]}}}
    assert [p.render() for p in summarize_rejection(reply)] == [
        "Missing model file a.safetensors (folder: loras) needed by LoraLoader"]


def test_unknown_node_type():
    problems = summarize_rejection(TRANSCRIPT["unknown_node_prompt"]["json"])
    assert problems == [Problem("missing_node", {"node_type": "NoSuchNode"})]
    assert problems[0].render() == "This workflow needs a node that is not installed: NoSuchNode"


def test_other_validation_errors_name_node_input_and_message():
    problems = summarize_rejection(TRANSCRIPT["invalid_prompt"]["json"])
    assert [p.render() for p in problems] == ["SaveImage (node 1), input images: Required input is missing"]
    assert problems[0].params["details"] == "images"


def test_value_errors_keep_comfyui_details():
    reply = {"error": {}, "node_errors": {"4": {"class_type": "EmptyImage", "errors": [
        {"type": "invalid_input_type", "message": "Failed to convert an input value to a INT value",
         "details": "height, abc, invalid literal for int() with base 10: 'abc'",
         "extra_info": {"input_name": "height", "received_value": "abc"}},
        {"type": "value_smaller_than_min", "message": "Value 0 smaller than min of 1", "details": "width",
         "extra_info": {"input_name": "width", "received_value": 0}}]}}}
    assert [p.render() for p in summarize_rejection(reply)] == [
        ("EmptyImage (node 4), input height: Failed to convert an input value to a INT value: "
         "height, abc, invalid literal for int() with base 10: 'abc'"),
        "EmptyImage (node 4), input width: Value 0 smaller than min of 1"]


def test_rejection_without_node_errors():
    reply = {"error": {"type": "prompt_no_outputs", "message": "Prompt has no outputs", "details": "",
                       "extra_info": {}}, "node_errors": {}}
    assert [p.render() for p in summarize_rejection(reply)] == ["The workflow was rejected: Prompt has no outputs"]


def test_execution_error_has_node_type_and_message_but_no_traceback():
    problem = summarize_execution_error(LOADIMAGE_ERROR)
    assert problem.key == "execution_failed"
    assert problem.render() == ("LoadImage (node 1) failed: cannot identify image file "
                                "'/tmp/cprobe/in/courier/bad.png'")
    assert "traceback" not in problem.params and "File" not in problem.render()


def test_out_of_memory_gets_its_own_message():
    data = {**LOADIMAGE_ERROR, "node_type": "KSampler", "exception_type": "torch.OutOfMemoryError",
            "exception_message": "CUDA out of memory. Tried to allocate 2 GiB\nThis error means you ran out of ..."}
    assert summarize_execution_error(data).render() == (
        "Not enough memory to run KSampler (node 1); try a smaller size")


def test_long_exception_messages_are_cut():
    problem = summarize_execution_error({**LOADIMAGE_ERROR, "exception_message": "x" * 5000})
    assert len(problem.params["exception_message"]) < 600


def test_exceptions_describe_themselves():
    rejected = PromptRejected(TRANSCRIPT["missing_model_prompt"]["json"])
    assert rejected.node_errors.keys() == {"1", "2", "6"}
    assert "flux1-schnell.safetensors (folder: diffusion_models)" in str(rejected)
    failed = ExecutionFailed(LOADIMAGE_ERROR)
    assert (failed.node_id, failed.node_type, failed.exception_type) == ("1", "LoadImage",
                                                                          "PIL.UnidentifiedImageError")
    assert failed.exception_message == "cannot identify image file '/tmp/cprobe/in/courier/bad.png'"
    assert describe_error(Interrupted({"node_id": "3", "node_type": "ImageBlur"})) == (
        "The run was stopped before it finished")
    assert describe_error(BackendUnavailable("down")) == MESSAGES["backend_unavailable"]


def test_callers_localize_with_their_own_messages():
    german = {"missing_node": "Diesem Workflow fehlt ein Node: {node_type}"}
    problems = [Problem("missing_node", {"node_type": "X"}), Problem("interrupted", {})]
    assert render_problems(problems, german) == (
        "Diesem Workflow fehlt ein Node: X\nThe run was stopped before it finished")
