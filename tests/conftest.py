"""Load the pack the way ComfyUI does: by path, as a package, root off sys.path.

The pack is registered as ``comfyui_courier`` so tests import
``comfyui_courier.<module>``; python-telegram-bot's ``telegram`` stays unshadowed.
"""

import importlib.util
import sys
from pathlib import Path

PACK_ROOT = Path(__file__).resolve().parent.parent
PACK_NAME = "comfyui_courier"


def _load_pack():
    if PACK_NAME in sys.modules:
        return sys.modules[PACK_NAME]
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != PACK_ROOT]
    spec = importlib.util.spec_from_file_location(
        PACK_NAME, PACK_ROOT / "__init__.py", submodule_search_locations=[str(PACK_ROOT)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[PACK_NAME] = module
    spec.loader.exec_module(module)
    return module


_load_pack()

pytest_plugins = [f"{PACK_NAME}.tests.fixtures.{name}" for name in ("comfyui", "postgres", "botapi", "anyone")]
