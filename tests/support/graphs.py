"""Workflows shared by the tests."""

FLUX = {  # the graph behind the recorded transcript's missing_model_prompt: FLUX schnell, no weights
    "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-schnell.safetensors", "weight_dtype": "default"}},
    "2": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "clip_l.safetensors",
                                                     "clip_name2": "t5xxl_fp16.safetensors", "type": "flux"}},
    "3": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["2", 0]}},
    "4": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 1024, "height": 1024, "batch_size": 1}},
    "5": {"class_type": "KSampler", "inputs": {"model": ["1", 0], "seed": 1, "steps": 4, "cfg": 1.0,
                                               "sampler_name": "euler", "scheduler": "simple", "positive": ["3", 0],
                                               "negative": ["3", 0], "latent_image": ["4", 0], "denoise": 1.0}},
    "6": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},
    "7": {"class_type": "VAEDecode", "inputs": {"samples": ["5", 0], "vae": ["6", 0]}},
    "8": {"class_type": "SaveImage", "inputs": {"images": ["7", 0], "filename_prefix": "flux"}},
}


def cpu_bound(size: int, radius: int) -> dict:
    """A weight-free command workflow whose run is CPU-bound: ``ImageSharpen`` of a size x size card,
    its time growing with both, scaled down to 256 px so saving and sending it stay cheap."""
    return {
        "1": {"class_type": "CourierTelegramInput", "inputs": {
            "command": "busy", "prompt": "", "seed": 0, "width": size, "height": size, "image": "",
            "chat_id": "", "user_id": ""}},
        "2": {"class_type": "ImageSharpen", "inputs": {"image": ["1", 1], "sharpen_radius": radius, "sigma": 1.0,
                                                       "alpha": 1.0}},
        "3": {"class_type": "ImageScale", "inputs": {"image": ["2", 0], "upscale_method": "bilinear", "width": 256,
                                                     "height": 256, "crop": "disabled"}},
        "4": {"class_type": "CourierTelegramOutput", "inputs": {"images": ["3", 0], "filename_prefix": "courier/busy",
                                                                "keep_metadata": False}},
    }


def tiny_sd(checkpoint: str, *, steps: int = 2, size: int = 64) -> dict:
    """A command workflow that samples on ``checkpoint`` (one of tools/tiny_models.py's): the loader,
    the prompt and seed of the job, ``steps`` of KSampler at ``size`` px, the picture to the chat."""
    return {
        "1": {"class_type": "CourierTelegramInput", "inputs": {
            "command": "tiny", "prompt": "", "seed": 0, "width": size, "height": size, "image": "",
            "chat_id": "", "user_id": ""}},
        "2": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": checkpoint}},
        "3": {"class_type": "CLIPTextEncode", "inputs": {"text": ["1", 0], "clip": ["2", 1]}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": size, "height": size, "batch_size": 1}},
        "6": {"class_type": "KSampler", "inputs": {
            "model": ["2", 0], "seed": ["1", 3], "steps": steps, "cfg": 1.0, "sampler_name": "euler",
            "scheduler": "normal", "positive": ["3", 0], "negative": ["3", 0], "latent_image": ["5", 0],
            "denoise": 1.0}},
        "7": {"class_type": "VAEDecode", "inputs": {"samples": ["6", 0], "vae": ["2", 2]}},
        "4": {"class_type": "CourierTelegramOutput", "inputs": {"images": ["7", 0], "filename_prefix": "courier/tiny",
                                                                "keep_metadata": False}},
    }
