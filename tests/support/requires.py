"""Optional real parts: a test that needs one skips without it, saying which part and how to get it.

``COURIER_REQUIRE_ALL=1`` (CI, where every part is installed) turns these skips into failures,
except in tests marked ``gpu``; tests/conftest.py applies that policy to every skip whose
reason starts with ``PREFIX``, so skip for a missing part only through ``missing()``.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from ..browser.cdp import find_chromium

REQUIRE_ALL = "COURIER_REQUIRE_ALL"
PREFIX = "missing part: "


def required() -> bool:
    """Whether a missing part fails the test instead of skipping it."""
    return os.environ.get(REQUIRE_ALL) == "1"


def missing(reason: str) -> NoReturn:
    """Skip the test (or the module) because an optional part is absent."""
    pytest.skip(PREFIX + reason, allow_module_level=True)


def require_comfyui() -> Path:
    """The real ComfyUI folder named by ``COMFYUI_DIR``."""
    if not (value := os.environ.get("COMFYUI_DIR")):
        missing("COMFYUI_DIR is not set: no real ComfyUI to test against")
    return Path(value)


def require_comfy_api() -> ModuleType:
    """ComfyUI's node API (``comfy_api.v0_0_2``, which our node modules import), from ``COMFYUI_DIR``.

    The folder goes last on sys.path, after the pack is loaded: ComfyUI's top-level modules
    (``server``, ``utils``) then shadow nothing, and import only when a test reaches them.
    """
    folder = str(require_comfyui())
    if folder not in sys.path:
        sys.path.append(folder)
    return importlib.import_module("comfy_api.v0_0_2")


def require_chromium() -> str:
    if binary := find_chromium():
        return binary
    missing("Chromium is not installed (apt-get install chromium)")


def require_module(name: str, hint: str) -> ModuleType:
    """``importlib.import_module(name)``; ``hint`` says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(f"{name} is not installed ({hint})")


def require_debian_postgres() -> Path:
    """The bin directory of Debian's ``postgresql`` package (the newest major installed)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if not found:
        missing("Debian's PostgreSQL server is not installed (apt-get install postgresql)")
    return found[-1].parent
