import os
import subprocess
import sys
from pathlib import Path

import comfyui_courier

PACK_ROOT = Path(comfyui_courier.__file__).resolve().parent


def test_pack_exports_comfyui_entry_points():
    assert comfyui_courier.WEB_DIRECTORY == "./js"
    assert isinstance(comfyui_courier.NODE_CLASS_MAPPINGS, dict)
    assert set(comfyui_courier.NODE_DISPLAY_NAME_MAPPINGS) == set(comfyui_courier.NODE_CLASS_MAPPINGS)


def test_python_telegram_bot_is_not_shadowed_with_the_pack_root_on_sys_path():
    """pytest's rootdir insertion or a user's PYTHONPATH can put the pack's root first on sys.path."""
    code = "import sys, telegram; print(sys.path[0]); print(telegram.__file__); print(hasattr(telegram, 'Bot'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=PACK_ROOT, env={**os.environ, "PYTHONPATH": str(PACK_ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    first, location, has_bot = done.stdout.splitlines()
    assert Path(first or ".").resolve() == PACK_ROOT  # the risk is real in this run
    # the installed package (the venv may itself live in the clone, as CI's does), not a pack folder
    assert Path(location).resolve().parents[1].name in ("site-packages", "dist-packages"), location
    assert Path(location).parent.name == "telegram" and has_bot == "True"
