"""What a benchmark ran on: device names, software versions and peak memory."""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def cpu_name() -> str:
    """The CPU model ("AMD EPYC 7763 64-Core Processor"), else what platform knows."""
    try:
        match = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        match = None
    return match.group(1).strip() if match else (platform.processor() or platform.machine() or "cpu")


def device_name(device) -> str:
    """A readable name of a torch device: the GPU's marketing name, or the CPU model."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        return cpu_name()
    return device.type.upper() if device.type == "mps" else str(device)


def versions() -> dict[str, str]:
    """ComfyUI, torch and Python versions of this process."""
    import torch

    try:
        from comfyui_version import __version__ as comfyui  # in ComfyUI's root folder
    except ImportError:
        comfyui = "unknown"
    return {"comfyui": comfyui, "torch": torch.__version__, "python": platform.python_version()}


class PeakMemory:
    """Peak memory over a window: the CUDA allocator's peak on each CUDA device in use,
    and the process's peak resident set size.

    Linux lets a process reset its own peak RSS (``echo 5 > /proc/self/clear_refs``);
    elsewhere ``rss_since`` says the figure covers the whole process lifetime.
    """

    def __init__(self):
        self.cuda_devices: list[int] = []
        self.rss_since = "window"

    def start(self) -> None:
        import torch

        # Only a CUDA context ComfyUI already made: creating one would cost VRAM.
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            self.cuda_devices = list(range(torch.cuda.device_count()))
        for index in self.cuda_devices:
            torch.cuda.reset_peak_memory_stats(index)
        try:
            _CLEAR_REFS.write_text("5")
        except OSError:
            self.rss_since = "process start"

    def stop(self) -> dict:
        """{"cuda": {index: bytes}, "rss": bytes or None, "rss_since": ...}."""
        import torch

        cuda = {index: torch.cuda.max_memory_allocated(index) for index in self.cuda_devices}
        return {"cuda": cuda, "rss": peak_rss_bytes(), "rss_since": self.rss_since}


def peak_rss_bytes() -> int | None:
    """Peak resident set size (Linux: since the last reset); None where unknown (Windows)."""
    try:
        match = re.search(r"^VmHWM:\s+(\d+) kB", _STATUS.read_text(), re.M)
    except OSError:
        match = None
    if match:
        return int(match.group(1)) * 1024
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere
