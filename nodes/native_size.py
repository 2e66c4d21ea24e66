"""Native Size: the picture size a loaded model was trained at, for a graph that lets the bot choose it."""

from __future__ import annotations

import math

from comfy_api.v0_0_2 import io

from ..jobs.options import SIZE_LIMITS

NATIVE_SIDES = {"SD15": 512, "SDXL": 1024, "SDXLRefiner": 1024}
"""ComfyUI's model configs (``comfy/supported_models.py``, a subclass counts as its base) -> side."""
OTHER_SIDE = 1024  # newer families (SD3, Flux, ...) are trained at about a megapixel
STEP = 8  # a latent pixel


class NativeSize(io.ComfyNode):
    NODE_ID = "CourierNativeSize"

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id=cls.NODE_ID,
            display_name="Native Size (Courier)",
            category="Courier/Telegram",
            description=("With 'native' on, width and height become as many pixels as the connected model "
                         "was trained at (512×512 for SD 1.x, 1024×1024 for SDXL), keeping their aspect "
                         "ratio; off, they pass unchanged. The bot turns it off when the user chooses a size."),
            inputs=[
                io.Model.Input("model"),
                io.Int.Input("width", default=1024, min=SIZE_LIMITS[0], max=SIZE_LIMITS[1], step=STEP),
                io.Int.Input("height", default=1024, min=SIZE_LIMITS[0], max=SIZE_LIMITS[1], step=STEP),
                io.Boolean.Input("native", default=True, tooltip="Use the model's own size"),
            ],
            outputs=[io.Int.Output(display_name="width"), io.Int.Output(display_name="height")],
        )

    @classmethod
    def execute(cls, model, width, height, native=True) -> io.NodeOutput:
        if not native:
            return io.NodeOutput(width, height)
        return io.NodeOutput(*native_size(native_side(model.model.model_config), width, height))


def native_side(model_config) -> int:
    """The side of the square picture the model of ``model_config`` was trained at."""
    names = [kind.__name__ for kind in type(model_config).__mro__]
    return next((NATIVE_SIDES[name] for name in names if name in NATIVE_SIDES), OTHER_SIDE)


def native_size(side: int, width: int, height: int) -> tuple[int, int]:
    """``width`` × ``height`` scaled to ``side``² pixels, each a multiple of ``STEP``."""
    scale = math.sqrt(side * side / (width * height))
    return tuple(max(STEP, STEP * round(length * scale / STEP)) for length in (width, height))
