"""/upscale's graph per backend: the shipped model-free graph, or an upscale model where the backend has one."""

import json
from pathlib import Path

from comfyui_courier.jobs.upscale import upscale_model, with_model

UPSCALE = json.loads((Path(__file__).resolve().parents[2] / "workflows" / "api" / "upscale.json").read_text())


def test_the_model_is_picked_by_its_scale_x2_first():
    assert upscale_model(["flux1-schnell.safetensors", "ae.safetensors"]) is None
    assert upscale_model(["RealESRGAN_x4plus.pth", "flux1-dev.safetensors"]) == ("RealESRGAN_x4plus.pth", 4)
    assert upscale_model(["4x-UltraSharp.pth", "RealESRGAN_x2plus.pth"]) == ("RealESRGAN_x2plus.pth", 2)
    assert upscale_model(["sd3.5_large_fp8_scaled.safetensors", "t5xxl_fp16.safetensors"]) is None
    assert upscale_model(["RealESRGAN_x4plus.txt"]) is None


def test_a_x4_model_replaces_the_lanczos_step_and_the_sharpen():
    graph = with_model(UPSCALE, "4x-UltraSharp.pth", 4)
    classes = {node_id: node["class_type"] for node_id, node in graph.items()}
    assert sorted(classes.values()) == sorted(["CourierTelegramInput", "UpscaleModelLoader", "ImageUpscaleWithModel",
                                               "ImageScaleBy", "CourierTelegramOutput"])
    by_class = {cls: graph[node_id] for node_id, cls in classes.items()}
    loader = next(i for i, c in classes.items() if c == "UpscaleModelLoader")
    model_step = next(i for i, c in classes.items() if c == "ImageUpscaleWithModel")
    scale = next(i for i, c in classes.items() if c == "ImageScaleBy")
    assert by_class["UpscaleModelLoader"]["inputs"] == {"model_name": "4x-UltraSharp.pth"}
    assert by_class["ImageUpscaleWithModel"]["inputs"] == {"upscale_model": [loader, 0], "image": ["1", 1]}
    assert by_class["ImageScaleBy"]["inputs"]["image"] == [model_step, 0]
    assert by_class["ImageScaleBy"]["inputs"]["scale_by"] == 0.5  # x4, then to x2 overall
    assert by_class["CourierTelegramOutput"]["inputs"]["images"] == [scale, 0]
    assert UPSCALE["2"]["inputs"]["scale_by"] == 2.0 and "3" in UPSCALE  # the shipped graph is untouched


def test_a_graph_without_the_marked_node_stays_as_it_is():
    published = json.loads(json.dumps(UPSCALE))
    del published["2"]["_meta"]["courier"]
    assert with_model(published, "RealESRGAN_x2plus.pth", 2) == published
