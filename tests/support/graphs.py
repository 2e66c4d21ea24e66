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
