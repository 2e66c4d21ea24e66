import inspect
import os
import subprocess
import sys
from pathlib import Path

import comfyui_courier
from comfyui_courier.tests.support.requires import require_comfy_api

PACK_ROOT = Path(comfyui_courier.__file__).resolve().parent
NODE_IDS = ["CourierTelegramInput", "CourierTelegramOutput", "CourierDeviceAssign", "CourierBenchmark",
            "CourierNativeSize"]


def test_pack_exports_comfyui_entry_points():
    assert comfyui_courier.WEB_DIRECTORY == "./js"
    assert inspect.iscoroutinefunction(comfyui_courier.comfy_entrypoint)
    assert not hasattr(comfyui_courier, "NODE_CLASS_MAPPINGS")  # ComfyUI 0.3.64 would ignore comfy_entrypoint


async def test_comfy_entrypoint_gives_the_five_nodes_under_their_ids():
    api = require_comfy_api()
    extension = await comfyui_courier.comfy_entrypoint()
    assert isinstance(extension, api.ComfyExtension)
    nodes = await extension.get_node_list()
    assert all(issubclass(node, api.io.ComfyNode) for node in nodes)
    assert [node.GET_SCHEMA().node_id for node in nodes] == NODE_IDS


def test_importing_the_pack_imports_neither_comfy_api_nor_torch():
    """Outside ComfyUI (``python <pack> run``) neither is there: only comfy_entrypoint imports the nodes."""
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('pack', sys.argv[1], "
            "submodule_search_locations=[sys.argv[2]]); pack = importlib.util.module_from_spec(spec); "
            "sys.modules['pack'] = pack; spec.loader.exec_module(pack); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('comfy_api', 'comfy', 'torch')))")
    done = subprocess.run([sys.executable, "-c", code, str(PACK_ROOT / "__init__.py"), str(PACK_ROOT)],
                          check=False, cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_python_telegram_bot_is_not_shadowed_with_the_pack_root_on_sys_path():
    """pytest's rootdir insertion or a user's PYTHONPATH can put the pack's root first on sys.path."""
    code = "import sys, telegram; print(sys.path[0]); print(telegram.__file__); print(hasattr(telegram, 'Bot'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=PACK_ROOT, env={**os.environ, "PYTHONPATH": str(PACK_ROOT)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    first, location, has_bot = done.stdout.splitlines()
    assert Path(first or ".").resolve() == PACK_ROOT  # the risk is real in this run
    # the installed package (the venv may itself live in the clone, as CI's does), not a pack folder
    assert Path(location).resolve().parents[1].name in ("site-packages", "dist-packages"), location
    assert Path(location).parent.name == "telegram" and has_bot == "True"
