"""Device Assign's placement on the tiny checkpoint, in ComfyUI's own process model (not a test_ file).

    <ComfyUI's python> probe_device_assign.py COMFYUI_DIR MODELS_DIR DEVICE [--cpu]

Loads the checkpoint with ComfyUI's CheckpointLoaderSimple, places MODEL, CLIP and VAE with
``gpu/devices.py`` (what the node calls), loads each clone as a sampler would, samples two steps
and decodes; prints one JSON line: the devices of the originals and clones, where the weights
went, and whether the picture is finite.
"""

import importlib.util
import json
import sys
from pathlib import Path

PACK_ROOT = Path(__file__).resolve().parents[2]


def pack_devices():
    """The pack's gpu/devices.py, imported as a submodule without running the pack's __init__."""
    spec = importlib.util.spec_from_file_location("courier_probe", PACK_ROOT / "__init__.py",
                                                  submodule_search_locations=[str(PACK_ROOT)])
    sys.modules["courier_probe"] = importlib.util.module_from_spec(spec)
    return importlib.import_module("courier_probe.gpu.devices")


def weights_device(module) -> str:
    return str({str(p.device) for p in module.parameters()})


def main() -> int:
    comfyui_dir, models, device, *flags = sys.argv[1:]
    here = Path(__file__).resolve().parent  # its http.py would shadow the standard library's
    sys.path[:] = [comfyui_dir] + [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.argv = [sys.argv[0], *flags]
    import comfy.options

    comfy.options.enable_args_parsing()
    # isort: off
    import utils.extra_config  # noqa: F401 - first, as in main.py: later imports shadow `utils`
    # isort: on
    import comfy.model_management as mm
    import folder_paths
    import torch

    import nodes

    folder_paths.add_model_folder_path("checkpoints", str(Path(models) / "checkpoints"), is_default=True)
    devices = pack_devices()
    model, clip, vae = nodes.CheckpointLoaderSimple().load_checkpoint("tiny-sd15.safetensors")
    target = torch.device(device)
    placed_model = devices.place_model(model, target)
    placed_clip = devices.place_clip(clip, target)
    placed_vae = devices.place_vae(vae, target)
    cond = nodes.CLIPTextEncode().encode(placed_clip, "a cat")[0]
    latent = nodes.EmptyLatentImage().generate(64, 64)[0]
    sampled = nodes.common_ksampler(placed_model, 1, 2, 7.0, "euler", "normal", cond, cond, latent)[0]
    mm.load_models_gpu([placed_model])  # as the sampler left it: loaded for computing
    unet_on = weights_device(placed_model.model.diffusion_model)
    image = nodes.VAEDecode().decode(placed_vae, sampled)[0]
    print(json.dumps({
        "original": {"model": str(model.load_device), "clip": str(clip.patcher.load_device),
                     "vae": str(vae.patcher.load_device)},
        "placed": {"model": str(placed_model.load_device), "clip": str(placed_clip.patcher.load_device),
                   "vae": str(placed_vae.patcher.load_device), "vae_device": str(placed_vae.device),
                   "offload": str(placed_model.offload_device)},
        "weights": {"unet": unet_on, "vae": weights_device(placed_vae.first_stage_model)},
        "model_class": type(model.model.model_config).__name__,
        "image": {"shape": list(image.shape), "finite": bool(torch.isfinite(image).all()),
                  "std": float(image.float().std())},
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
