"""Telegram Output: marks the images the bot delivers; saves them losslessly."""

from __future__ import annotations

import json
import os

from .. import imaging


class TelegramOutput:
    NODE_ID = "CourierTelegramOutput"
    DISPLAY_NAME = "Telegram Output (Courier)"
    CATEGORY = "Courier/Telegram"
    DESCRIPTION = ("Images connected here are sent back to the Telegram chat as lossless files. "
                   "Workflow metadata is stripped unless keep_metadata is on.")
    RETURN_TYPES = ()
    FUNCTION = "deliver"
    OUTPUT_NODE = True

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "images": ("IMAGE",),
                "filename_prefix": ("STRING", {"default": "courier/result"}),
            },
            "optional": {
                "keep_metadata": ("BOOLEAN", {"default": False,
                                              "tooltip": "Embed the workflow in the PNG (others can read it)"}),
            },
            "hidden": {"prompt": "PROMPT", "extra_pnginfo": "EXTRA_PNGINFO"},
        }

    def deliver(self, images, filename_prefix="courier/result", keep_metadata=False,
                prompt=None, extra_pnginfo=None):
        import folder_paths

        output_dir = folder_paths.get_output_directory()
        folder, name, counter, subfolder, _ = folder_paths.get_save_image_path(
            filename_prefix, output_dir, images[0].shape[1], images[0].shape[0])
        metadata = workflow_metadata(prompt, extra_pnginfo) if keep_metadata else None
        results = []
        for index, tensor in enumerate(images):
            filename = f"{name}_{counter + index:05}_.png"
            png = imaging.encode_png(imaging.array_to_image(tensor.cpu().numpy()), metadata)
            with open(os.path.join(folder, filename), "wb") as fh:
                fh.write(png)
            results.append({"filename": filename, "subfolder": subfolder, "type": "output"})
        return {"ui": {"images": results}}


def workflow_metadata(prompt, extra_pnginfo) -> dict[str, str]:
    """The PNG text chunks ComfyUI's SaveImage writes, for users who opt in."""
    chunks = {"prompt": json.dumps(prompt)} if prompt is not None else {}
    for key, value in (extra_pnginfo or {}).items():
        chunks[key] = json.dumps(value)
    return chunks
