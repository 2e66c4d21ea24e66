"""The pack's ComfyUI extension: its nodes, which ComfyUI registers under their schemas' node ids."""

from __future__ import annotations

from comfy_api.v0_0_2 import ComfyExtension, io
from typing_extensions import override

from .benchmark import Benchmark
from .device_assign import DeviceAssign
from .native_size import NativeSize
from .telegram_input import TelegramInput
from .telegram_output import TelegramOutput

NODES: list[type[io.ComfyNode]] = [TelegramInput, TelegramOutput, DeviceAssign, Benchmark, NativeSize]


class CourierExtension(ComfyExtension):
    @override
    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        return list(NODES)
