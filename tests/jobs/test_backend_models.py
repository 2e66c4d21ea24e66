"""What a backend offers, read from its /object_info: model files among the combo choices."""

from comfyui_courier.jobs.backends import models_offered, shown_error, shown_url

OBJECT_INFO = {  # the shapes of ComfyUI 0.3.64's /object_info: V1 combos, V3 COMBO, other inputs
    "CheckpointLoaderSimple": {"input": {"required": {"ckpt_name": [["sd_xl_base_1.0.safetensors", "old.ckpt"],
                                                                    {"tooltip": "The checkpoint"}]}}},
    "KSampler": {"input": {"required": {"sampler_name": [["euler", "dpmpp_2m"]], "steps": ["INT", {"default": 20}]}}},
    "LoraLoader": {"input": {"required": {"lora_name": ["COMBO", {"options": ["detail.safetensors"]}]},
                             "optional": {}, "hidden": {"prompt": "PROMPT"}}},
    "LoadImage": {"input": {"required": {"image": [["cat.png", "weights.bin.png"], {"image_upload": True}]}}},
    "Broken": {"input": None},
}


def test_model_files_are_the_combo_choices_with_a_model_extension():
    assert models_offered(OBJECT_INFO) == ["detail.safetensors", "old.ckpt", "sd_xl_base_1.0.safetensors"]
    assert models_offered({}) == []


def test_backend_urls_are_shown_without_credentials():
    url = "http://user:s3cret@gpu-box:8188"
    assert shown_url(url) == "http://gpu-box:8188"
    assert shown_url("http://[::1]:8188/") == "http://[::1]:8188/"
    assert shown_error(url, f"ComfyUI at {url} is not reachable") == "ComfyUI at http://gpu-box:8188 is not reachable"
    assert shown_error(url, None) is None
