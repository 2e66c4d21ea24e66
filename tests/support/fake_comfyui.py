"""A small fake ComfyUI API server for tests and CI where no real ComfyUI can run.

Faithful to ComfyUI v0.3.64 (commit a125cd8): the shapes recorded in
``comfyui-0.3.64-api-transcript.json`` (a copy lives in tests/fake_comfyui/: route
replies, websocket frame order, validation errors) and the logic of that
version's ``server.py`` and ``execution.py`` (validation, queue, per-client
frames, caching of unchanged nodes, history). Every route is also served under
``/api``.

It really runs a few weight-free image nodes with Pillow (LoadImage, EmptyImage,
ImageInvert, ImageBlur, ImageSharpen, ImageScale, ImageScaleBy, SaveImage, PreviewImage) and
the pack's CourierTelegramInput/Output (their schemas come from the pack's node
classes; given a ``bot_job``, Output pushes its PNGs as binary frames, as the real
node does for a bot in another process). Model loaders, the usual sampling nodes
and every other node of the shipped command workflows (workflows/api/) exist but
the server has no model files, so loaders fail validation with ``value_not_in_list``
like a bare ComfyUI does. Files live in memory.

Knobs: ``steps``/``step_delay``/``progress_class`` (progress frames),
``previews`` (binary preview frames), ``fail_next()``, ``pause()``/``resume()``
(hold the queue), ``drop_websockets()``, ``refuse_websockets``, ``restart()``
(forget queue and history). ``requests`` records what it received.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import heapq
import io
import json
import mimetypes
import posixpath
import random
import string
import struct
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web
from PIL import Image, ImageFilter, ImageOps

from comfyui_courier.core import imaging
from comfyui_courier.jobs.comfy.records import PUSH_MAX_BYTES, png_preview_payload
from comfyui_courier.jobs.file_inputs import NOT_A_COURIER_PICTURE, courier_picture_name
from comfyui_courier.nodes.prefix import courier_prefix

COMFYUI_VERSION = "0.3.64"
# /object_info of the pack's Telegram nodes, as that ComfyUI answers it (tests/integration/test_comfyui.py checks)
PACK_OBJECT_INFO = json.loads((Path(__file__).with_name("pack_object_info.json")).read_text(encoding="utf-8"))
FEATURE_FLAGS = {"supports_preview_metadata": True, "max_upload_size": 104857600}
_PREVIEW_IMAGE = 1  # the binary event type
_JPEG = 1  # its image format: a sampler's previews are JPEG (latent_preview.py)


@dataclasses.dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    json: Any  # parsed JSON body, None for other bodies


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """A node class as ``/object_info`` shows it, plus how the fake runs it (None: needs weights)."""

    required: dict[str, list]
    optional: dict[str, list] = dataclasses.field(default_factory=dict)
    hidden: dict[str, Any] = dataclasses.field(default_factory=dict)  # v1: "PROMPT", v3: ["PROMPT"]
    outputs: tuple[str, ...] = ()
    output_names: tuple[str, ...] | None = None
    category: str = "image"
    output_node: bool = False
    display_name: str | None = None
    description: str = ""
    python_module: str = "nodes"
    run: Callable[..., tuple[tuple, dict | None]] | None = None
    check: tuple[str, Callable[[FakeComfyUI, str], str | None]] | None = None  # VALIDATE_INPUTS for one input

    def info(self, name: str) -> dict:
        inputs = {"required": self.required}
        if self.optional:
            inputs["optional"] = self.optional
        if self.hidden:
            inputs["hidden"] = self.hidden
        return _jsonable({"input": inputs, "input_order": {key: list(value) for key, value in inputs.items()},
                "output": list(self.outputs), "output_is_list": [False] * len(self.outputs),
                "output_name": list(self.output_names or self.outputs), "name": name,
                "display_name": self.display_name or name, "description": self.description,
                "python_module": self.python_module, "category": self.category, "output_node": self.output_node})


class _Interrupted(Exception):
    pass


class _Failure(Exception):
    def __init__(self, message: str, exception_type: str):
        super().__init__(message)
        self.exception_type = exception_type


# --- node implementations: (fake, **inputs) -> (output values, ui or None); IMAGE = list of PIL images ----

def _empty_image(fake, width, height, batch_size=1, color=0):
    rgb = ((color >> 16) & 255, (color >> 8) & 255, color & 255)
    return ([Image.new("RGB", (width, height), rgb) for _ in range(batch_size)],), None


def _split_alpha(picture: Image.Image) -> tuple[Image.Image, Image.Image]:
    alpha = picture.getchannel("A") if "A" in picture.getbands() else Image.new("L", picture.size, 255)
    return picture.convert("RGB"), ImageOps.invert(alpha)


def _load_image(fake, image):
    rgb, mask = _split_alpha(Image.open(io.BytesIO(fake.input_file(image))))
    return ([rgb], [mask]), None


def _invert(fake, image):
    return ([ImageOps.invert(picture) for picture in image],), None


def _blur(fake, image, blur_radius=1, sigma=1.0):
    return ([picture.filter(ImageFilter.GaussianBlur(sigma)) for picture in image],), None


def _sharpen(fake, image, sharpen_radius=1, sigma=1.0, alpha=1.0):
    sharpen = ImageFilter.UnsharpMask(radius=sharpen_radius, percent=int(alpha * 100), threshold=0)
    return ([picture.filter(sharpen) for picture in image],), None


def _scale_by(fake, image, upscale_method, scale_by):
    return ([_scale(fake, [picture], upscale_method, round(picture.width * scale_by),
                    round(picture.height * scale_by))[0][0][0] for picture in image],), None


def _scale(fake, image, upscale_method, width, height, crop="disabled"):
    def size(picture):
        if width == 0 and height == 0:
            return picture.size
        if width == 0:
            return max(1, round(picture.width * height / picture.height)), height
        if height == 0:
            return width, max(1, round(picture.height * width / picture.width))
        return width, height

    resample = Image.Resampling.NEAREST if upscale_method == "nearest-exact" else Image.Resampling.LANCZOS
    if crop == "center":
        return ([ImageOps.fit(p, size(p), resample) for p in image],), None
    return ([p.resize(size(p), resample) for p in image],), None


def _save_image(fake, images, filename_prefix="ComfyUI"):
    return (), {"images": fake.save_images(images, filename_prefix, "output")}


def _preview_image(fake, images):
    prefix = "ComfyUI_temp_" + "".join(random.choice(string.ascii_lowercase) for _ in range(5))
    return (), {"images": fake.save_images(images, prefix, "temp")}


def _telegram_input(fake, command, prompt, seed, width, height, image="", require_image=False, chat_id="",
                    user_id="", steps=20, negative="", batch=1, options=""):
    if image:
        picture = imaging.decode_image(fake.input_file(image), max_bytes=512 * 2**20)
    else:
        picture = imaging.text_card(prompt, width, height, seed)
    rgb, mask = _split_alpha(picture)
    return (prompt, [rgb], [mask], seed, picture.width, picture.height, chat_id, user_id, steps, negative,
            batch), None


def _telegram_output(fake, filename_prefix="courier/result", images=None, video=None, images_as="images", fps=8.0,
                     keep_metadata=False, send_to_chat="", bot_job=""):
    if images is None or video is not None or images_as != "images":
        raise _Failure("the fake ComfyUI delivers still images only", "NotImplementedError")
    try:
        filename_prefix = courier_prefix(filename_prefix)  # under output/courier/, as the node's
    except ValueError as exc:
        raise _Failure(str(exc), "ValueError") from None
    refs = fake.save_images(images, filename_prefix, "output")
    pngs = [fake.files[("output", ref["subfolder"], ref["filename"])] for ref in refs]
    if bot_job and sum(map(len, pngs)) <= PUSH_MAX_BYTES:  # pushed to the queuing client, as the node's hand_back
        fake.frames_to_push += [struct.pack(">I", _PREVIEW_IMAGE) + png_preview_payload(png) for png in pngs]
    return (), {"images": refs}


def _courier_picture(fake: FakeComfyUI, name: str) -> str | None:
    """Telegram Input's check (nodes/telegram_input.py): only an uploaded ``courier/<name>``, one message."""
    return None if not name or (courier_picture_name(name) and fake.has_input_file(name)) else NOT_A_COURIER_PICTURE


def _input_exists(message: str) -> Callable[[FakeComfyUI, str], str | None]:
    return lambda fake, name: None if (not name or fake.has_input_file(name)) else message.format(name)


_IMAGE = ["IMAGE"]
_HIDDEN = {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"}
_SAMPLERS = ["euler", "euler_cfg_pp", "euler_ancestral", "euler_ancestral_cfg_pp", "heun", "heunpp2", "dpm_2",
             "dpm_2_ancestral", "lms", "dpm_fast", "dpm_adaptive", "dpmpp_2s_ancestral", "dpmpp_2s_ancestral_cfg_pp",
             "dpmpp_sde", "dpmpp_sde_gpu", "dpmpp_2m", "dpmpp_2m_cfg_pp", "dpmpp_2m_sde", "dpmpp_2m_sde_gpu",
             "dpmpp_2m_sde_heun", "dpmpp_2m_sde_heun_gpu", "dpmpp_3m_sde", "dpmpp_3m_sde_gpu", "ddpm", "lcm",
             "ipndm", "ipndm_v", "deis", "res_multistep", "res_multistep_cfg_pp", "res_multistep_ancestral",
             "res_multistep_ancestral_cfg_pp", "gradient_estimation", "gradient_estimation_cfg_pp", "er_sde",
             "seeds_2", "seeds_3", "sa_solver", "sa_solver_pece", "ddim", "uni_pc", "uni_pc_bh2"]
_SCHEDULERS = ["simple", "sgm_uniform", "karras", "exponential", "ddim_uniform", "beta", "normal",
               "linear_quadratic", "kl_optimal"]
_DEVICE = {"device": [["default", "cpu"], {"advanced": True}]}
_STRENGTH = ["FLOAT", {"default": 1.0, "min": -100.0, "max": 100.0, "step": 0.01}]
_LATENT_SIZE = {"default": 1024, "min": 16, "max": 16384, "step": 16}
_BATCH = ["INT", {"default": 1, "min": 1, "max": 4096}]
_POST = "comfy_extras.nodes_post_processing"
_MODEL_ADVANCED = "comfy_extras.nodes_model_advanced"
_VIDEO = "comfy_extras.nodes_video"
_TEXT = {"multiline": True, "dynamicPrompts": True}
_SHIFT = {"min": 0.0, "max": 100.0, "step": 0.01}
_PREFIX_TIP = ("The prefix for the file to save. This may include formatting information such as "
               "%date:yyyy-MM-dd% or %Empty Latent Image.width% to include values from nodes.")


def _combo(options: list[str], tooltip: str | None = None) -> list:
    """A combo of a v3 node: /object_info types it "COMBO", and 0.3.64 does not check the value against the
    options at validation (only v1 combos, typed by their list, are checked)."""
    extra = {"tooltip": tooltip, "default": options[0]} if tooltip else {}
    return ["COMBO", {**extra, "multiselect": False, "options": options}]


# Core nodes as ComfyUI 0.3.64's /object_info shows them (tooltips only where errors quote them often).
CORE_NODES: dict[str, NodeSpec] = {
    "LoadImage": NodeSpec({"image": [[], {"image_upload": True}]}, outputs=("IMAGE", "MASK"),
                          display_name="Load Image", run=_load_image,
                          check=("image", _input_exists("Invalid image file: {}"))),
    "EmptyImage": NodeSpec({"width": ["INT", {"default": 512, "min": 1, "max": 16384, "step": 1}],
                            "height": ["INT", {"default": 512, "min": 1, "max": 16384, "step": 1}],
                            "batch_size": _BATCH,
                            "color": ["INT", {"default": 0, "min": 0, "max": 16777215, "step": 1,
                                              "display": "color"}]},
                           outputs=("IMAGE",), run=_empty_image),
    "ImageInvert": NodeSpec({"image": _IMAGE}, outputs=("IMAGE",), display_name="Invert Image", run=_invert),
    "ImageBlur": NodeSpec({"image": ["IMAGE", {}],
                           "blur_radius": ["INT", {"default": 1, "min": 1, "max": 31, "step": 1}],
                           "sigma": ["FLOAT", {"default": 1.0, "min": 0.1, "max": 10.0, "step": 0.1}]},
                          outputs=("IMAGE",), category="image/postprocessing", python_module=_POST, run=_blur),
    "ImageSharpen": NodeSpec({"image": ["IMAGE", {}],
                              "sharpen_radius": ["INT", {"default": 1, "min": 1, "max": 31, "step": 1}],
                              "sigma": ["FLOAT", {"default": 1.0, "min": 0.1, "max": 10.0, "step": 0.01}],
                              "alpha": ["FLOAT", {"default": 1.0, "min": 0.0, "max": 5.0, "step": 0.01}]},
                             outputs=("IMAGE",), category="image/postprocessing", python_module=_POST,
                             run=_sharpen),
    "ImageScale": NodeSpec({"image": _IMAGE,
                            "upscale_method": [["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]],
                            "width": ["INT", {"default": 512, "min": 0, "max": 16384, "step": 1}],
                            "height": ["INT", {"default": 512, "min": 0, "max": 16384, "step": 1}],
                            "crop": [["disabled", "center"]]},
                           outputs=("IMAGE",), category="image/upscaling", display_name="Upscale Image",
                           run=_scale),
    "ImageScaleBy": NodeSpec({"image": _IMAGE,
                              "upscale_method": [["nearest-exact", "bilinear", "area", "bicubic", "lanczos"]],
                              "scale_by": ["FLOAT", {"default": 1.0, "min": 0.01, "max": 8.0, "step": 0.01}]},
                             outputs=("IMAGE",), category="image/upscaling", display_name="Upscale Image By",
                             run=_scale_by),
    "SaveImage": NodeSpec({"images": ["IMAGE", {"tooltip": "The images to save."}],
                           "filename_prefix": ["STRING", {"default": "ComfyUI", "tooltip": _PREFIX_TIP}]},
                          hidden=_HIDDEN, output_node=True, display_name="Save Image", run=_save_image),
    "PreviewImage": NodeSpec({"images": _IMAGE}, hidden=_HIDDEN, output_node=True, display_name="Preview Image",
                             run=_preview_image),
    "UNETLoader": NodeSpec({"unet_name": [[]],
                            "weight_dtype": [["default", "fp8_e4m3fn", "fp8_e4m3fn_fast", "fp8_e5m2"]]},
                           outputs=("MODEL",), category="advanced/loaders", display_name="Load Diffusion Model"),
    "DualCLIPLoader": NodeSpec({"clip_name1": [[]], "clip_name2": [[]],
                                "type": [["sdxl", "sd3", "flux", "hunyuan_video", "hidream", "hunyuan_image"]]},
                               optional=_DEVICE, outputs=("CLIP",), category="advanced/loaders"),
    "CLIPLoader": NodeSpec({"clip_name": [[]],
                            "type": [["stable_diffusion", "stable_cascade", "sd3", "stable_audio", "mochi", "ltxv",
                                      "pixart", "cosmos", "lumina2", "wan", "hidream", "chroma", "ace", "omnigen2",
                                      "qwen_image", "hunyuan_image"]]},
                           optional=_DEVICE, outputs=("CLIP",), category="advanced/loaders",
                           display_name="Load CLIP"),
    "VAELoader": NodeSpec({"vae_name": [["pixel_space"]]}, outputs=("VAE",), category="loaders",
                          display_name="Load VAE"),
    "CheckpointLoaderSimple": NodeSpec({"ckpt_name": [[], {"tooltip": "The name of the checkpoint (model) to load."}]},
                                       outputs=("MODEL", "CLIP", "VAE"), category="loaders",
                                       display_name="Load Checkpoint"),
    "LoraLoader": NodeSpec({"model": ["MODEL", {"tooltip": "The diffusion model the LoRA will be applied to."}],
                            "clip": ["CLIP", {"tooltip": "The CLIP model the LoRA will be applied to."}],
                            "lora_name": [[], {"tooltip": "The name of the LoRA."}],
                            "strength_model": [_STRENGTH[0], {**_STRENGTH[1], "tooltip": "How strongly to modify "
                                               "the diffusion model. This value can be negative."}],
                            "strength_clip": [_STRENGTH[0], {**_STRENGTH[1], "tooltip": "How strongly to modify "
                                              "the CLIP model. This value can be negative."}]},
                           outputs=("MODEL", "CLIP"), category="loaders", display_name="Load LoRA"),
    "LoraLoaderModelOnly": NodeSpec({"model": ["MODEL"], "lora_name": [[]], "strength_model": _STRENGTH},
                                    outputs=("MODEL",), category="loaders"),
    "CLIPTextEncode": NodeSpec({"text": ["STRING", {"multiline": True, "dynamicPrompts": True}], "clip": ["CLIP"]},
                               outputs=("CONDITIONING",), category="conditioning",
                               display_name="CLIP Text Encode (Prompt)"),
    "FluxGuidance": NodeSpec({"conditioning": ["CONDITIONING", {}],
                              "guidance": ["FLOAT", {"default": 3.5, "min": 0.0, "max": 100.0, "step": 0.1}]},
                             outputs=("CONDITIONING",), category="advanced/conditioning/flux",
                             python_module="comfy_extras.nodes_flux"),
    "EmptyLatentImage": NodeSpec({"width": ["INT", {"default": 512, "min": 16, "max": 16384, "step": 8}],
                                  "height": ["INT", {"default": 512, "min": 16, "max": 16384, "step": 8}],
                                  "batch_size": _BATCH},
                                 outputs=("LATENT",), category="latent", display_name="Empty Latent Image"),
    "EmptySD3LatentImage": NodeSpec({"width": ["INT", _LATENT_SIZE], "height": ["INT", _LATENT_SIZE],
                                     "batch_size": _BATCH},
                                    outputs=("LATENT",), category="latent/sd3", python_module="comfy_extras.nodes_sd3"),
    "KSampler": NodeSpec({"model": ["MODEL"],
                          "seed": ["INT", {"default": 0, "min": 0, "max": 18446744073709551615,
                                           "control_after_generate": True}],
                          "steps": ["INT", {"default": 20, "min": 1, "max": 10000}],
                          "cfg": ["FLOAT", {"default": 8.0, "min": 0.0, "max": 100.0, "step": 0.1, "round": 0.01}],
                          "sampler_name": [_SAMPLERS], "scheduler": [_SCHEDULERS],
                          "positive": ["CONDITIONING"], "negative": ["CONDITIONING"], "latent_image": ["LATENT"],
                          "denoise": ["FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01}]},
                         outputs=("LATENT",), category="sampling"),
    "VAEDecode": NodeSpec({"samples": ["LATENT"], "vae": ["VAE"]}, outputs=("IMAGE",), category="latent",
                          display_name="VAE Decode"),
    "VAEEncode": NodeSpec({"pixels": ["IMAGE"], "vae": ["VAE"]}, outputs=("LATENT",), category="latent",
                          display_name="VAE Encode"),
    # The rest of what the shipped command workflows (workflows/api/) use.
    "KSamplerAdvanced": NodeSpec({"model": ["MODEL"], "add_noise": [["enable", "disable"]],
                                  "noise_seed": ["INT", {"default": 0, "min": 0, "max": 18446744073709551615,
                                                         "control_after_generate": True}],
                                  "steps": ["INT", {"default": 20, "min": 1, "max": 10000}],
                                  "cfg": ["FLOAT", {"default": 8.0, "min": 0.0, "max": 100.0, "step": 0.1,
                                                    "round": 0.01}],
                                  "sampler_name": [_SAMPLERS], "scheduler": [_SCHEDULERS],
                                  "positive": ["CONDITIONING"], "negative": ["CONDITIONING"],
                                  "latent_image": ["LATENT"],
                                  "start_at_step": ["INT", {"default": 0, "min": 0, "max": 10000}],
                                  "end_at_step": ["INT", {"default": 10000, "min": 0, "max": 10000}],
                                  "return_with_leftover_noise": [["disable", "enable"]]},
                                 outputs=("LATENT",), category="sampling", display_name="KSampler (Advanced)"),
    "ConditioningZeroOut": NodeSpec({"conditioning": ["CONDITIONING"]}, outputs=("CONDITIONING",),
                                    category="advanced/conditioning"),
    "CLIPTextEncodeFlux": NodeSpec({"clip": ["CLIP", {}], "clip_l": ["STRING", _TEXT], "t5xxl": ["STRING", _TEXT],
                                    "guidance": ["FLOAT", {"default": 3.5, "min": 0.0, "max": 100.0, "step": 0.1}]},
                                   outputs=("CONDITIONING",), category="advanced/conditioning/flux",
                                   python_module="comfy_extras.nodes_flux"),
    "TextEncodeQwenImageEditPlus": NodeSpec({"clip": ["CLIP", {}], "prompt": ["STRING", _TEXT]},
                                            optional={"vae": ["VAE", {}], "image1": ["IMAGE", {}],
                                                      "image2": ["IMAGE", {}], "image3": ["IMAGE", {}]},
                                            outputs=("CONDITIONING",), category="advanced/conditioning",
                                            python_module="comfy_extras.nodes_qwen"),
    "ModelSamplingSD3": NodeSpec({"model": ["MODEL"], "shift": ["FLOAT", {"default": 3.0, **_SHIFT}]},
                                 outputs=("MODEL",), category="advanced/model", python_module=_MODEL_ADVANCED),
    "ModelSamplingAuraFlow": NodeSpec({"model": ["MODEL"], "shift": ["FLOAT", {"default": 1.73, **_SHIFT}]},
                                      outputs=("MODEL",), category="advanced/model", python_module=_MODEL_ADVANCED),
    "CFGNorm": NodeSpec({"model": ["MODEL", {}],
                         "strength": ["FLOAT", {"default": 1.0, "min": 0.0, "max": 100.0, "step": 0.01}]},
                        outputs=("MODEL",), output_names=("patched_model",), category="advanced/guidance",
                        python_module="comfy_extras.nodes_cfg"),
    "ImageScaleToTotalPixels": NodeSpec({"image": ["IMAGE", {}],
                                         "upscale_method": _combo(["nearest-exact", "bilinear", "area", "bicubic",
                                                                   "lanczos"]),
                                         "megapixels": ["FLOAT", {"default": 1.0, "min": 0.01, "max": 16.0,
                                                                  "step": 0.01}]},
                                        outputs=("IMAGE",), category="image/upscaling", python_module=_POST),
    "EmptyHunyuanLatentVideo": NodeSpec({"width": ["INT", {**_LATENT_SIZE, "default": 848}],
                                         "height": ["INT", {**_LATENT_SIZE, "default": 480}],
                                         "length": ["INT", {"default": 25, "min": 1, "max": 16384, "step": 4}],
                                         "batch_size": _BATCH},
                                        outputs=("LATENT",), category="latent/video",
                                        python_module="comfy_extras.nodes_hunyuan"),
    "CreateVideo": NodeSpec({"images": ["IMAGE", {"tooltip": "The images to create a video from."}],
                             "fps": ["FLOAT", {"default": 30.0, "min": 1.0, "max": 120.0, "step": 1.0}]},
                            optional={"audio": ["AUDIO", {"tooltip": "The audio to add to the video."}]},
                            outputs=("VIDEO",), category="image/video", display_name="Create Video",
                            description="Create a video from images.", python_module=_VIDEO),
    "SaveVideo": NodeSpec({"video": ["VIDEO", {"tooltip": "The video to save."}],
                           "filename_prefix": ["STRING", {"tooltip": _PREFIX_TIP, "default": "video/ComfyUI",
                                                          "multiline": False}],
                           "format": _combo(["auto", "mp4"], tooltip="The format to save the video as."),
                           "codec": _combo(["auto", "h264"], tooltip="The codec to use for the video.")},
                          hidden={"prompt": ["PROMPT"], "extra_pnginfo": ["EXTRA_PNGINFO"]}, output_node=True,
                          category="image/video", display_name="Save Video", python_module=_VIDEO,
                          description="Saves the input images to your ComfyUI output directory."),
}

_PACK_RUNNERS = {
    "CourierTelegramInput": (_telegram_input, ("image", _courier_picture)),
    "CourierTelegramOutput": (_telegram_output, None),
    "CourierNativeSize": (None, None),  # it reads a loaded model: runs only where weights do
}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def pack_nodes() -> dict[str, NodeSpec]:
    """The pack's Telegram nodes as a real ComfyUI shows them (``PACK_OBJECT_INFO``; the node classes need
    ComfyUI's comfy_api, which the fake's users may not have)."""
    specs = {}
    for name, (run, check) in _PACK_RUNNERS.items():
        info = PACK_OBJECT_INFO[name]
        inputs = info["input"]
        specs[name] = NodeSpec(inputs.get("required", {}), inputs.get("optional", {}), inputs.get("hidden", {}),
                               tuple(info["output"]), tuple(info["output_name"]), info["category"],
                               info["output_node"], info["display_name"], info["description"],
                               info["python_module"], run, check)
    return specs


def _error(kind: str, message: str, details: str) -> dict:
    return {"type": kind, "message": message, "details": details, "extra_info": {}}


def _is_link(value: Any) -> bool:
    return isinstance(value, list)


def _types_match(received: Any, wanted: Any) -> bool:
    if isinstance(wanted, list) or "*" in (received, wanted):
        return True
    return bool(set(str(received).split(",")) & set(str(wanted).split(",")))


def _norm_subfolder(subfolder: str) -> str:
    normal = posixpath.normpath(subfolder) if subfolder else ""
    return "" if normal == "." else normal


def _format_value(value: Any) -> Any:
    return value if value is None or isinstance(value, (int, float, bool, str)) else str(value)


class FakeComfyUI:
    """The fake server; ``await start()`` returns its base URL, ``await stop()`` ends it."""

    def __init__(self, *, steps: int = 3, step_delay: float = 0.0, progress_class: str | None = None,
                 previews: bool = False):
        self.steps = steps  # progress frames sent while the progress node runs
        self.step_delay = step_delay  # seconds per step
        self.progress_class = progress_class  # nodes of this class report steps; None = the first node that runs
        self.previews = previews  # send a binary JPEG preview frame per step, as a sampler with --preview-method
        self.refuse_websockets = False  # answer /ws with 503
        self.requests: list[RecordedRequest] = []
        self.files: dict[tuple[str, str, str], bytes] = {}  # (type, subfolder, filename) -> bytes
        self.nodes: dict[str, NodeSpec] = {**CORE_NODES, **pack_nodes()}
        self.url = ""
        self._sockets: dict[str, web.WebSocketResponse] = {}
        self._runner: web.AppRunner | None = None
        self._worker: asyncio.Task | None = None
        self._fail: _Failure | None = None
        self._fail_node_type: str | None = None
        self._reset_memory()

    def _reset_memory(self) -> None:
        self._queue: list[tuple] = []  # heap of (number, prompt_id, prompt, extra_data, outputs)
        self._running: tuple | None = None
        self._history: dict[str, dict] = {}
        self._cache: dict[str, tuple[tuple, dict | None]] = {}
        self.frames_to_push: list[bytes] = []  # binary frames the running node sends before its `executed`
        self._number = 0
        self.client_id: str | None = None
        self.last_node_id: str | None = None

    # --- lifecycle and knobs --------------------------------------------------------

    async def start(self) -> str:
        self._wakeup = asyncio.Event()
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._interrupt = asyncio.Event()
        app = web.Application(middlewares=[self._record], client_max_size=FEATURE_FLAGS["max_upload_size"])
        for prefix in ("", "/api"):
            app.router.add_routes([
                web.get(prefix + "/ws", self._ws),
                web.get(prefix + "/system_stats", self._system_stats),
                web.get(prefix + "/object_info", self._object_info),
                web.get(prefix + "/object_info/{node_class}", self._object_info),
                web.get(prefix + "/prompt", self._get_prompt),
                web.post(prefix + "/prompt", self._post_prompt),
                web.get(prefix + "/queue", self._get_queue),
                web.post(prefix + "/queue", self._post_queue),
                web.post(prefix + "/interrupt", self._post_interrupt),
                web.post(prefix + "/free", self._post_free),
                web.get(prefix + "/history", self._get_history),
                web.get(prefix + "/history/{prompt_id}", self._get_history),
                web.post(prefix + "/history", self._post_history),
                web.get(prefix + "/view", self._view),
                web.post(prefix + "/upload/image", self._upload_image),
            ])
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        self._worker = asyncio.create_task(self._work(), name="fake-comfyui-worker")
        return self.url

    async def stop(self) -> None:
        """Stop serving; safe to call twice."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        await self.drop_websockets()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeComfyUI:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def offer(self, node: str, name: str, files: list[str]) -> None:
        """Have ``node``'s combo input ``name`` list ``files`` (a backend's model files) in /object_info."""
        spec = self.nodes[node]
        self.nodes[node] = dataclasses.replace(spec, required={**spec.required, name: [files, {}]})

    def fail_next(self, exception_message: str = "fake failure", exception_type: str = "RuntimeError",
                  node_type: str | None = None) -> None:
        """Make the next prompt raise in its first running node (or its first node of ``node_type``)."""
        self._fail = _Failure(exception_message, exception_type)
        self._fail_node_type = node_type

    def pause(self) -> None:
        """Hold queued prompts: none starts until ``resume()``."""
        self._resumed.clear()

    def resume(self) -> None:
        self._resumed.set()

    async def drop_websockets(self) -> None:
        """Close every open websocket from the server side."""
        for ws in list(self._sockets.values()):
            await ws.close()

    async def restart(self) -> None:
        """Act like a ComfyUI restart: the running prompt, the queue and the history are forgotten."""
        self._worker.cancel()
        await asyncio.gather(self._worker, return_exceptions=True)
        self._reset_memory()
        self._worker = asyncio.create_task(self._work(), name="fake-comfyui-worker")
        await self.drop_websockets()

    @property
    def prompts(self) -> list[dict]:
        """Bodies of the ``POST /prompt`` requests received."""
        return [r.json for r in self.requests if r.method == "POST" and r.path.endswith("/prompt")]

    # --- files -------------------------------------------------------------------------

    @staticmethod
    def _split_name(name: str, default_type: str) -> tuple[str, str, str]:
        folder_type = default_type
        for annotation in ("input", "output", "temp"):
            if name.endswith(f" [{annotation}]"):
                name, folder_type = name[: -len(annotation) - 3], annotation
        subfolder, filename = posixpath.split(name)
        return folder_type, _norm_subfolder(subfolder), filename

    def has_input_file(self, name: str) -> bool:
        return self._split_name(name, "input") in self.files

    def input_file(self, name: str) -> bytes:
        """A LoadImage-style name ("sub/name.png") resolved in the input folder."""
        key = self._split_name(name, "input")
        if key not in self.files:
            raise FileNotFoundError(f"[Errno 2] No such file or directory: '{name}'")
        return self.files[key]

    def save_images(self, images: list[Image.Image], filename_prefix: str, folder_type: str) -> list[dict]:
        """Write PNGs as SaveImage names them (``prefix_00001_.png``, counting on); returns their refs."""
        subfolder, name = posixpath.split(posixpath.normpath(filename_prefix))
        subfolder = "" if subfolder == "." else subfolder
        taken = [int(f[len(name) + 1:-5]) for (t, s, f) in self.files
                 if t == folder_type and s == subfolder and f.startswith(name + "_") and f.endswith("_.png")
                 and f[len(name) + 1:-5].isdigit()]
        counter = max(taken, default=0) + 1
        refs = []
        for index, picture in enumerate(images):
            filename = f"{name}_{counter + index:05}_.png"
            self.files[(folder_type, subfolder, filename)] = imaging.encode_png(picture)
            refs.append({"filename": filename, "subfolder": subfolder, "type": folder_type})
        return refs

    # --- HTTP routes ---------------------------------------------------------------------

    @web.middleware
    async def _record(self, request: web.Request, handler):
        body = None
        if request.content_type == "application/json" and request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                body = None
        self.requests.append(RecordedRequest(request.method, request.path, dict(request.query), body))
        return await handler(request)

    def _queue_info(self) -> dict:
        return {"exec_info": {"queue_remaining": len(self._queue) + (self._running is not None)}}

    async def _system_stats(self, request: web.Request) -> web.Response:
        memory = 16 * 2**30
        return web.json_response({
            "system": {"os": "posix", "ram_total": memory, "ram_free": memory, "comfyui_version": COMFYUI_VERSION,
                       "required_frontend_version": "1.27.10", "installed_templates_version": "0.1.95",
                       "required_templates_version": "0.1.95", "python_version": sys.version,
                       "pytorch_version": "none (fake ComfyUI)", "embedded_python": False,
                       "argv": ["main.py", "--cpu"]},
            "devices": [{"name": "cpu", "type": "cpu", "index": None, "vram_total": memory, "vram_free": memory,
                         "torch_vram_total": memory, "torch_vram_free": memory}]})

    def _node_info(self, name: str) -> dict:
        info = self.nodes[name].info(name)
        if name == "LoadImage":
            names = sorted(f"{s}/{f}" if s else f for (t, s, f) in self.files if t == "input")
            info["input"]["required"]["image"] = [names, {"image_upload": True}]
        return info

    async def _object_info(self, request: web.Request) -> web.Response:
        wanted = request.match_info.get("node_class")
        names = [wanted] if wanted else list(self.nodes)
        return web.json_response({name: self._node_info(name) for name in names if name in self.nodes})

    async def _get_prompt(self, request: web.Request) -> web.Response:
        return web.json_response(self._queue_info())

    async def _post_prompt(self, request: web.Request) -> web.Response:
        body = await request.json()
        if "number" in body:
            number = float(body["number"])
        else:
            number = -self._number if body.get("front") else self._number
            self._number += 1
        if "prompt" not in body:
            return web.json_response({"error": _error("no_prompt", "No prompt provided", "No prompt provided"),
                                      "node_errors": {}}, status=400)
        prompt = body["prompt"]
        prompt_id = str(body.get("prompt_id", uuid.uuid4()))
        valid, error, outputs, node_errors = self.validate(prompt)
        extra_data = dict(body.get("extra_data") or {})
        if "client_id" in body:
            extra_data["client_id"] = body["client_id"]
        if not valid:
            return web.json_response({"error": error, "node_errors": node_errors}, status=400)
        heapq.heappush(self._queue, (number, prompt_id, prompt, extra_data, outputs))
        await self._queue_updated()
        self._wakeup.set()
        return web.json_response({"prompt_id": prompt_id, "number": number, "node_errors": node_errors})

    def _queue_items(self) -> tuple[list, list]:
        return ([list(self._running)] if self._running else []), [list(item) for item in self._queue]

    async def _get_queue(self, request: web.Request) -> web.Response:
        running, pending = self._queue_items()
        return web.json_response({"queue_running": running, "queue_pending": pending})

    async def _post_queue(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("clear"):
            self._queue = []
        for prompt_id in body.get("delete", []):
            self._queue = [item for item in self._queue if item[1] != prompt_id]
            heapq.heapify(self._queue)
        await self._queue_updated()
        return web.Response()

    async def _post_interrupt(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        prompt_id = body.get("prompt_id")
        if not prompt_id or (self._running is not None and self._running[1] == prompt_id):
            self._interrupt.set()
        return web.Response()

    async def _post_free(self, request: web.Request) -> web.Response:
        return web.Response()

    async def _get_history(self, request: web.Request) -> web.Response:
        prompt_id = request.match_info.get("prompt_id")
        if prompt_id is not None:
            entry = self._history.get(prompt_id)
            return web.json_response({prompt_id: entry} if entry else {})
        items = list(self._history.items())
        if "max_items" in request.query:
            items = items[-int(request.query["max_items"]):]
        return web.json_response(dict(items))

    async def _post_history(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("clear"):
            self._history.clear()
        for prompt_id in body.get("delete", []):
            self._history.pop(prompt_id, None)
        return web.Response()

    async def _view(self, request: web.Request) -> web.Response:
        filename = request.query.get("filename", "")
        if not filename or filename[0] == "/" or ".." in filename:
            return web.Response(status=400)
        folder_type, _, filename = self._split_name(filename, request.query.get("type", "output"))
        subfolder = _norm_subfolder(request.query.get("subfolder", ""))
        if subfolder.startswith(("/", "..")):
            return web.Response(status=403)
        data = self.files.get((folder_type, subfolder, filename))
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type=mimetypes.guess_type(filename)[0] or "application/octet-stream",
                            headers={"Content-Disposition": f'filename="{filename}"'})

    async def _upload_image(self, request: web.Request) -> web.Response:
        post = await request.post()
        image = post.get("image")
        if not isinstance(image, web.FileField) or not image.filename:
            return web.Response(status=400)
        folder_type = post.get("type") or "input"
        subfolder = _norm_subfolder(post.get("subfolder", ""))
        if subfolder.startswith(("/", "..")) or "/" in image.filename:
            return web.Response(status=400)
        filename, data = image.filename, image.file.read()
        if post.get("overwrite") not in ("true", "1"):
            stem, ext = posixpath.splitext(filename)
            index = 1
            while (folder_type, subfolder, filename) in self.files:
                if self.files[(folder_type, subfolder, filename)] == data:
                    break
                filename = f"{stem} ({index}){ext}"
                index += 1
        self.files[(folder_type, subfolder, filename)] = data
        return web.json_response({"name": filename, "subfolder": post.get("subfolder", ""), "type": folder_type})

    # --- websocket -------------------------------------------------------------------------

    async def _ws(self, request: web.Request) -> web.StreamResponse:
        if self.refuse_websockets:
            return web.Response(status=503)
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        sid = request.query.get("clientId") or uuid.uuid4().hex
        self._sockets[sid] = ws
        try:
            await self._send("status", {"status": self._queue_info(), "sid": sid}, sid)
            if self.client_id == sid and self.last_node_id is not None:
                await self._send("executing", {"node": self.last_node_id}, sid)
            first = True
            async for msg in ws:
                if first and msg.type == WSMsgType.TEXT and json.loads(msg.data).get("type") == "feature_flags":
                    await self._send("feature_flags", FEATURE_FLAGS, sid)
                first = False
        finally:
            if self._sockets.get(sid) is ws:
                del self._sockets[sid]
        return ws

    async def _send(self, event: str, data: Any, sid: str | None) -> None:
        """Send one frame to ``sid``, or to everyone when ``sid`` is None (ComfyUI's send_json/send_bytes)."""
        targets = list(self._sockets.values()) if sid is None else [self._sockets[sid]] if sid in self._sockets else []
        for ws in targets:
            try:
                if isinstance(data, bytes):
                    await ws.send_bytes(data)
                else:
                    await ws.send_json({"type": event, "data": data})
            except (ConnectionError, RuntimeError):
                pass  # a client that went away; ComfyUI ignores these too

    async def _queue_updated(self) -> None:
        await self._send("status", {"status": self._queue_info()}, None)

    # --- validation (execution.py validate_prompt/validate_inputs) ----------------------------

    def validate(self, prompt: dict) -> tuple[bool, dict | None, list[str], dict]:
        """(valid, error, good outputs, node_errors) exactly as ComfyUI's validate_prompt returns them."""
        outputs = []
        for node_id, node in prompt.items():
            if "class_type" not in node:
                return False, _error("invalid_prompt", "Cannot execute because a node is missing the class_type "
                                     "property.", f"Node ID '#{node_id}'"), [], {}
            spec = self.nodes.get(node["class_type"])
            if spec is None:
                return False, _error("invalid_prompt", f"Cannot execute because node {node['class_type']} does "
                                     "not exist.", f"Node ID '#{node_id}'"), [], {}
            if spec.output_node:
                outputs.append(node_id)
        if not outputs:
            return False, _error("prompt_no_outputs", "Prompt has no outputs", ""), [], {}
        good, failed, node_errors, validated = [], [], {}, {}
        for output in outputs:
            try:
                valid, reasons = self._validate_node(prompt, output, validated)
            except (KeyError, IndexError, TypeError) as ex:
                valid, reasons = False, [{"type": "exception_during_validation",
                                          "message": "Exception when validating node", "details": str(ex),
                                          "extra_info": {"exception_type": type(ex).__name__, "traceback": []}}]
                validated[output] = (False, reasons)
            if valid:
                good.append(output)
                continue
            failed.append(reasons)
            for node_id, (node_valid, node_reasons) in validated.items():
                if not node_valid and node_reasons:
                    entry = node_errors.setdefault(node_id, {"errors": node_reasons, "dependent_outputs": [],
                                                             "class_type": prompt[node_id]["class_type"]})
                    entry["dependent_outputs"].append(output)
        if not good:
            details = "\n".join(f"{e['message']}: {e['details']}" for reasons in failed for e in reasons)
            return False, _error("prompt_outputs_failed_validation", "Prompt outputs failed validation",
                                 details), [], node_errors
        return True, None, good, node_errors

    def _validate_node(self, prompt: dict, node_id: str, validated: dict) -> tuple[bool, list]:
        if node_id in validated:
            return validated[node_id]
        node = prompt[node_id]
        spec = self.nodes[node["class_type"]]
        inputs = node.get("inputs", {})
        errors, valid = [], True
        specs = [(name, config, True) for name, config in spec.required.items()]
        specs += [(name, config, False) for name, config in spec.optional.items()]
        checked = spec.check[0] if spec.check else None
        for name, config, required in specs:
            input_type, extra = config[0], (config[1] if len(config) > 1 else {})
            info = [input_type, extra]
            if name not in inputs:
                if required:
                    errors.append({"type": "required_input_missing", "message": "Required input is missing",
                                   "details": name, "extra_info": {"input_name": name}})
                continue
            value = inputs[name]
            if _is_link(value):
                if len(value) != 2:
                    errors.append({"type": "bad_linked_input", "message": "Bad linked input, must be a length-2 "
                                   "list of [node_id, slot_index]", "details": name,
                                   "extra_info": {"input_name": name, "input_config": info, "received_value": value}})
                    continue
                received = self.nodes[prompt[value[0]]["class_type"]].outputs[value[1]]
                if not _types_match(received, input_type):
                    errors.append({"type": "return_type_mismatch", "message": "Return type mismatch between linked "
                                   "nodes", "details": f"{name}, received_type({received}) mismatch "
                                   f"input_type({input_type})",
                                   "extra_info": {"input_name": name, "input_config": info,
                                                  "received_type": received, "linked_node": value}})
                    continue
                if not self._validate_node(prompt, value[0], validated)[0]:
                    valid = False
                continue
            converters = {"INT": int, "FLOAT": float, "STRING": str, "BOOLEAN": bool}
            if isinstance(input_type, str) and input_type in converters:
                try:
                    value = inputs[name] = converters[input_type](value)
                except (TypeError, ValueError) as ex:
                    errors.append({"type": "invalid_input_type",
                                   "message": f"Failed to convert an input value to a {input_type} value",
                                   "details": f"{name}, {value}, {ex}",
                                   "extra_info": {"input_name": name, "input_config": info, "received_value": value,
                                                  "exception_message": str(ex)}})
                    continue
            if name == checked:
                continue
            if "min" in extra and value < extra["min"]:
                errors.append({"type": "value_smaller_than_min",
                               "message": f"Value {value} smaller than min of {extra['min']}", "details": name,
                               "extra_info": {"input_name": name, "input_config": info, "received_value": value}})
            elif "max" in extra and value > extra["max"]:
                errors.append({"type": "value_bigger_than_max",
                               "message": f"Value {value} bigger than max of {extra['max']}", "details": name,
                               "extra_info": {"input_name": name, "input_config": info, "received_value": value}})
            elif isinstance(input_type, list) and value not in input_type:
                too_long = len(input_type) > 20
                listed = f"(list of length {len(input_type)})" if too_long else str(input_type)
                errors.append({"type": "value_not_in_list", "message": "Value not in list",
                               "details": f"{name}: '{value}' not in {listed}",
                               "extra_info": {"input_name": name, "input_config": None if too_long else info,
                                              "received_value": value}})
        if spec.check:
            name, check = spec.check
            problem = check(self, inputs.get(name, ""))
            if problem:
                errors.append({"type": "custom_validation_failed", "message": "Custom validation failed for node",
                               "details": f"{name} - {problem}", "extra_info": {"input_name": name}})
        result = (not errors and valid, errors)
        validated[node_id] = result
        return result

    # --- execution (main.py prompt_worker, execution.py PromptExecutor) -------------------------

    async def _work(self) -> None:
        while True:
            await self._resumed.wait()
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            self._running = heapq.heappop(self._queue)
            await self._queue_updated()
            _, prompt_id, prompt, extra_data, outputs = self._running
            status, ui, meta = await self._execute(prompt_id, prompt, extra_data, outputs)
            self._history[prompt_id] = {"prompt": list(self._running), "outputs": ui, "status": status, "meta": meta}
            self._running = None
            await self._queue_updated()
            if self.client_id is not None:
                await self._send("executing", {"node": None, "prompt_id": prompt_id}, self.client_id)

    def _order(self, prompt: dict, outputs: list[str]) -> list[str]:
        order: list[str] = []

        def visit(node_id: str) -> None:
            if node_id in order:
                return
            for value in prompt[node_id].get("inputs", {}).values():
                if _is_link(value):
                    visit(str(value[0]))
            order.append(node_id)

        for output in outputs:
            visit(output)
        return order

    def _signatures(self, prompt: dict, order: list[str]) -> dict[str, str]:
        """Cache keys: class and inputs, upstream signatures for links, LoadImage's file hash (IS_CHANGED)."""
        signatures: dict[str, str] = {}
        for node_id in order:
            node = prompt[node_id]
            inputs = {name: [signatures[str(value[0])], value[1]] if _is_link(value) else value
                      for name, value in sorted(node.get("inputs", {}).items())}
            parts = [node["class_type"], inputs]
            if node["class_type"] == "LoadImage" and self.has_input_file(inputs.get("image", "")):
                parts.append(hashlib.sha256(self.input_file(inputs["image"])).hexdigest())
            signatures[node_id] = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
        return signatures

    async def _execute(self, prompt_id: str, prompt: dict, extra_data: dict, outputs: list[str]):
        """Run one prompt, sending ComfyUI's frames; returns (history status, ui outputs, meta)."""
        cid = self.client_id = extra_data.get("client_id")
        self._interrupt.clear()
        fail, fail_node_type, self._fail = self._fail, self._fail_node_type, None
        messages: list[list] = []

        async def message(event: str, data: dict, broadcast: bool = False) -> None:
            data = {**data, "timestamp": int(time.time() * 1000)}
            messages.append([event, data])
            if cid is not None or broadcast:
                await self._send(event, data, cid)

        nodes_state: dict[str, dict] = {}

        async def progress_state(node_id: str, value: float, maximum: float, state: str) -> None:
            nodes_state[node_id] = {"value": value, "max": maximum, "state": state, "node_id": node_id,
                                    "prompt_id": prompt_id, "display_node_id": node_id, "parent_node_id": None,
                                    "real_node_id": node_id}
            await self._send("progress_state", {"prompt_id": prompt_id, "nodes": dict(nodes_state)}, cid)

        await message("execution_start", {"prompt_id": prompt_id})
        order = self._order(prompt, outputs)
        signatures = self._signatures(prompt, order)
        self._cache = {key: value for key, value in self._cache.items() if key in signatures.values()}
        current_outputs = [node_id for node_id in order if signatures[node_id] in self._cache]
        await message("execution_cached", {"nodes": current_outputs, "prompt_id": prompt_id})
        values: dict[str, tuple] = {}
        ui: dict[str, dict] = {}
        executed: list[str] = []
        progress_sent = False
        node_id = order[0]
        try:
            for node_id in order:
                node, spec = prompt[node_id], self.nodes[prompt[node_id]["class_type"]]
                if signatures[node_id] in self._cache:
                    values[node_id], node_ui = self._cache[signatures[node_id]]
                    if node_ui is not None and node_id in outputs:
                        ui[node_id] = node_ui
                        if cid is not None:
                            await self._send("executed", {"node": node_id, "display_node": node_id,
                                                          "output": node_ui, "prompt_id": prompt_id}, cid)
                        await progress_state(node_id, 1, 1, "finished")
                    continue
                await progress_state(node_id, 0.0, 1.0, "running")
                if cid is not None:
                    self.last_node_id = node_id
                    await self._send("executing", {"node": node_id, "display_node": node_id,
                                                   "prompt_id": prompt_id}, cid)
                if self._interrupt.is_set():
                    raise _Interrupted()
                kwargs = {name: values[str(value[0])][value[1]] if _is_link(value) else value
                          for name, value in node.get("inputs", {}).items()
                          if name in spec.required or name in spec.optional}
                wants_steps = (node["class_type"] == self.progress_class if self.progress_class
                               else not progress_sent)
                if wants_steps and self.steps:
                    progress_sent = True
                    await self._steps(prompt_id, node_id, cid, progress_state)
                if fail is not None and (fail_node_type is None or node["class_type"] == fail_node_type):
                    raise fail
                if spec.run is None:
                    raise RuntimeError(f"the fake ComfyUI cannot run {node['class_type']}: it needs model weights")
                values[node_id], node_ui = spec.run(self, **kwargs)
                pushed, self.frames_to_push = self.frames_to_push, []
                for frame in pushed if cid is not None else ():
                    await self._send("preview", frame, cid)
                self._cache[signatures[node_id]] = (values[node_id], node_ui)
                if node_ui is not None:
                    ui[node_id] = node_ui
                    if cid is not None:
                        await self._send("executed", {"node": node_id, "display_node": node_id, "output": node_ui,
                                                      "prompt_id": prompt_id}, cid)
                state = nodes_state[node_id]
                await progress_state(node_id, state["max"], state["max"], "finished")
                executed.append(node_id)
        except _Interrupted:
            await message("execution_interrupted", {"prompt_id": prompt_id, "node_id": node_id,
                                                    "node_type": prompt[node_id]["class_type"],
                                                    "executed": executed}, broadcast=True)
        except Exception as ex:  # noqa: BLE001 - like ComfyUI, any exception of a node is an execution_error
            exception_type = getattr(ex, "exception_type", None) or (
                type(ex).__qualname__ if type(ex).__module__ == "builtins"
                else f"{type(ex).__module__}.{type(ex).__qualname__}")
            await message("execution_error", {
                "prompt_id": prompt_id, "node_id": node_id, "node_type": prompt[node_id]["class_type"],
                "executed": executed, "exception_message": f"{ex}\n", "exception_type": exception_type,
                "traceback": [f'  File "fake_comfyui.py", in {prompt[node_id]["class_type"]}\n'],
                "current_inputs": {name: [_format_value(value)] for name, value in
                                   prompt[node_id].get("inputs", {}).items() if not _is_link(value)},
                "current_outputs": current_outputs})
        else:
            await message("execution_success", {"prompt_id": prompt_id})
        success = messages[-1][0] == "execution_success"
        status = {"status_str": "success" if success else "error", "completed": success, "messages": messages}
        meta = {node: {"node_id": node, "display_node": node, "parent_node": None, "real_node_id": node}
                for node in ui}
        return status, ui, meta

    async def _steps(self, prompt_id: str, node_id: str, cid: str | None, progress_state) -> None:
        """Progress frames (and previews) of a sampler-like node; an interrupt stops it between steps."""
        for step in range(1, self.steps + 1):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._interrupt.wait(), self.step_delay)
            if self._interrupt.is_set():
                raise _Interrupted()
            await progress_state(node_id, step, self.steps, "running")
            await self._send("progress", {"value": step, "max": self.steps, "prompt_id": prompt_id,
                                          "node": node_id}, cid)
            if self.previews and cid is not None:
                buffer = io.BytesIO()
                Image.new("RGB", (64, 64), (step * 40 % 256, 0, 0)).save(buffer, "JPEG")
                frame = struct.pack(">II", _PREVIEW_IMAGE, _JPEG) + buffer.getvalue()
                await self._send("preview", frame, cid)
