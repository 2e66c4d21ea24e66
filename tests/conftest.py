"""Load the pack the way ComfyUI does: by path, as a package, root off sys.path.

The pack is registered as ``comfyui_courier`` so tests import
``comfyui_courier.<module>``; python-telegram-bot's ``telegram`` stays unshadowed.
"""

import importlib.util
import sys
from pathlib import Path

import pytest

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
from comfyui_courier.tests.support import requires  # noqa: E402 - the pack is importable only now

pytest_plugins = [f"{PACK_NAME}.tests.fixtures.{name}"
                  for name in ("comfyui", "postgres", "debian_postgres", "botapi", "anyone", "tiny_models")]


def _fail_a_missing_part(report, gpu: bool) -> None:
    """Under COURIER_REQUIRE_ALL=1 a skip for a missing part (support/requires.py) is a failure."""
    if not (report.skipped and isinstance(report.longrepr, tuple) and requires.required() and not gpu):
        return
    reason = report.longrepr[2].removeprefix("Skipped: ")
    if reason.startswith(requires.PREFIX):
        report.outcome = "failed"
        report.longrepr = f"{reason} ({requires.REQUIRE_ALL}=1: this run must have every part but GPUs)"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _fail_a_missing_part(report, gpu=item.get_closest_marker("gpu") is not None)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _fail_a_missing_part(report, gpu=False)  # a whole module skipped: no marker to exempt it
    return report
