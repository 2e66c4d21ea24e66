import mmap
import sys

import pytest
import torch

from comfyui_courier.gpu import machine


def test_cpu_has_a_readable_name():
    assert machine.device_name("cpu") == machine.cpu_name() != ""


def test_versions_outside_comfyui():
    found = machine.versions()
    assert found["torch"] == torch.__version__ and found["python"].count(".") == 2
    assert found["comfyui"] == "unknown" or "comfyui_version" in sys.modules


def fresh_pages(size: int) -> mmap.mmap:
    """``size`` bytes of new pages, each touched: resident whatever the allocator holds freed already (a
    long-lived test worker's heap may serve a tensor from pages that are resident before the window)."""
    block = mmap.mmap(-1, size)
    for offset in range(0, size, mmap.PAGESIZE):
        block[offset] = 1
    return block


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS reset is Linux-only")
def test_peak_rss_covers_the_window_only():
    block = bytearray(64 * 2**20)  # raises the lifetime peak before the window
    del block
    memory = machine.PeakMemory()
    memory.start()
    quiet = memory.stop()
    memory.start()
    block = fresh_pages(96 * 2**20)
    busy = memory.stop()
    block.close()
    assert quiet["rss_since"] == busy["rss_since"] == "window"
    assert busy["rss"] - quiet["rss"] > 64 * 2**20
    assert busy["cuda"] == {} or torch.cuda.is_initialized()
