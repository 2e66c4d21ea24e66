"""jobs/file_inputs.py: which inputs name a file, and what a graph may let them name (issue 27, item 1)."""

import pytest

from comfyui_courier.jobs import model_graph, upscale
from comfyui_courier.jobs.file_inputs import graph_file_problem, refusal
from comfyui_courier.jobs.seed import SEED_DIR, seed_manifest, shipped_workflow
from comfyui_courier.jobs.workflow import fill_job


def one(class_type: str, **inputs) -> dict:
    return {"7": {"class_type": class_type, "inputs": inputs}}


@pytest.mark.parametrize("name", sorted(seed_manifest()))
def test_every_shipped_graph_passes_as_a_job_fills_it(name):
    workflow = shipped_workflow(seed_manifest()[name], SEED_DIR)
    assert graph_file_problem(workflow) is None
    filled = fill_job(workflow, prompt="../../etc/passwd [output]", seed=1, image="courier/job-12.png", job="x")
    assert graph_file_problem(filled) is None  # a prompt's words are no file name
    applied = model_graph.apply(filled, checkpoint="sd15/tiny.safetensors", loras=[("a/b.safetensors", 0.5)],
                                strength=0.5)
    assert graph_file_problem(upscale.with_model(applied, "4x.pth", 4)) is None


@pytest.mark.parametrize("graph", [
    one("CourierTelegramInput", image=""), one("CourierTelegramInput", image="courier/job-1 (1).png"),
    one("LoadImage", image="courier/job-3.png"), one("LoadImageMask", image="courier/a.webp", channel="alpha"),
    one("CourierTelegramOutput", filename_prefix="leak"), one("CourierTelegramOutput", filename_prefix="courier/x"),
    one("SaveImage", filename_prefix="courier/x"), one("SaveVideo", filename_prefix="courier/video/x"),
    one("CheckpointLoaderSimple", ckpt_name="sd15/tiny.safetensors"),
    one("DualCLIPLoader", clip_name1="a.safetensors", clip_name2="sub\\b.safetensors"),
    one("CLIPTextEncode", text="/etc/passwd ../x [output]"), one("SomeoneElsesNode", image="/etc/passwd"),
])
def test_what_a_job_may_use_passes(graph):
    assert graph_file_problem(graph) is None and refusal(graph) is None


@pytest.mark.parametrize("graph", [
    one("CourierTelegramInput", image="/etc/hostname"), one("CourierTelegramInput", image="../x.png"),
    one("CourierTelegramInput", image="x.png [output]"), one("CourierTelegramInput", image="courier/x.png [output]"),
    one("CourierTelegramInput", image="courier/../x.png"), one("CourierTelegramInput", image="courier/a/b.png"),
    one("CourierTelegramInput", image="x.png"), one("CourierTelegramInput", image=["9", 0]),
    one("CourierTelegramInput", image=7), one("CourierTelegramInput", image="courier/.hidden"),
    one("LoadImage", image=""), one("LoadImage", image="/srv/private.png"), one("LoadImage", image="example.png"),
    one("LoadImageMask", image="../../x.png", channel="alpha"), one("LoadImageOutput", image="a.png [output]"),
    one("LoadLatent", latent="/tmp/x.latent"), one("LoadAudio", audio="../a.flac"),
    one("LoadVideo", file="/v.mp4"),
    one("SaveImage", filename_prefix="ComfyUI"), one("SaveVideo", filename_prefix="../courier/x"),
    one("CourierTelegramOutput", filename_prefix="/abs"), one("CourierTelegramOutput", filename_prefix="courier/../x"),
    one("CheckpointLoaderSimple", ckpt_name="/etc/hostname"), one("LoraLoader", lora_name="../../x.safetensors"),
    one("UNETLoader", unet_name="C:\\models\\x.safetensors"), one("VAELoader", vae_name=["3", 0]),
])
def test_a_file_outside_courier_s_folders_is_refused_by_node_and_input(graph):
    problem = graph_file_problem(graph)
    assert problem is not None and problem.key == "file_input_refused"
    (node_id, node), = graph.items()
    (name, value), = ((k, v) for k, v in node["inputs"].items() if k != "channel")
    assert problem.params == {"node_id": node_id, "node_type": node["class_type"], "input_name": name}
    reason = refusal(graph)
    assert name in reason and "Courier" in reason
    shown = value.strip("/.") if isinstance(value, str) else ""
    assert not shown or shown not in reason  # never the value it was given


def test_a_graph_of_anything_else_has_no_file_problem():
    assert graph_file_problem({}) is None
    assert graph_file_problem({"1": "not a node", "2": {"class_type": "LoadImage"},
                               "3": {"class_type": ["LoadImage"], "inputs": {"image": "/x"}}}) is None
