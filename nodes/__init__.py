"""ComfyUI nodes of the pack: one node per module, mappings derived from one table."""

from .benchmark import Benchmark
from .device_assign import DeviceAssign
from .telegram_input import TelegramInput
from .telegram_output import TelegramOutput

NODE_CLASSES = (TelegramInput, TelegramOutput, DeviceAssign, Benchmark)

NODE_CLASS_MAPPINGS = {cls.NODE_ID: cls for cls in NODE_CLASSES}
NODE_DISPLAY_NAME_MAPPINGS = {cls.NODE_ID: cls.DISPLAY_NAME for cls in NODE_CLASSES}
