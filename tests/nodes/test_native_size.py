"""Native Size without ComfyUI running: the side by the model config's family, the aspect kept, off when told.

The real SD 1.x checkpoint gives 512×512 in tests/integration/test_img_real.py; here the configs are
stand-ins named as ``comfy/supported_models.py`` names them (a subclass counts as its family)."""

from types import SimpleNamespace

import pytest

from comfyui_courier.tests.support.requires import require_comfy_api

require_comfy_api()
from comfyui_courier.nodes.native_size import NativeSize, native_side, native_size  # noqa: E402

SD15 = type("SD15", (), {})
SDXL = type("SDXL", (), {})
SSD1B = type("SSD1B", (SDXL,), {})  # a distilled SDXL
FLUX = type("Flux", (), {})


def model(config_class) -> SimpleNamespace:
    """A MODEL as the node sees it: a patcher whose model has a ``model_config``."""
    return SimpleNamespace(model=SimpleNamespace(model_config=config_class()))


@pytest.mark.parametrize(("config", "side"), [(SD15, 512), (SDXL, 1024), (SSD1B, 1024), (FLUX, 1024)])
def test_the_side_is_the_model_family_s(config, side):
    assert native_side(config()) == side


def test_the_size_keeps_the_aspect_ratio_at_the_native_pixel_count():
    assert native_size(512, 1024, 1024) == (512, 512)
    assert native_size(1024, 1344, 768) == (1352, 776)  # 16:9-ish, about 1024² pixels, multiples of 8
    assert NativeSize.execute(model(SDXL), 512, 512, native=True).args == (1024, 1024)


def test_off_it_passes_the_size_unchanged():
    assert NativeSize.execute(model(SD15), 1216, 832, native=False).args == (1216, 832)
