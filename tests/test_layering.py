"""The import order (docs/architecture.md): a lower package never imports a higher one, and the root
holds only entry files.

Read from the source with ``ast`` (nothing is imported), so an import inside a function counts
as much as one at the top, relative or absolute.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import comfyui_courier

PACK_ROOT = Path(comfyui_courier.__file__).resolve().parent
PACK_NAMES = ("comfyui_courier", PACK_ROOT.name)  # how tests and ComfyUI name the pack

ENTRY_FILES = {"__init__.py", "__main__.py", "cli.py", "host.py", "runtime.py"}
"""The root's only modules: the pack's entry points and the composition of its packages."""

MAY_IMPORT = {  # package -> the pack's packages its modules may import (besides its own); the root's
    "core": set(),  # entry files may import any
    "emulator": set(),  # a stand-in for Telegram: nothing of the product
    "store": {"core"},
    "anyone": {"core"},
    "gpu": {"core", "store"},
    "jobs": {"core", "store", "anyone", "gpu"},
    "bot": {"core", "store", "jobs", "gpu"},
    "server_routes": {"core", "store", "anyone", "gpu", "jobs", "bot", "runtime"},
    "nodes": {"core", "store", "gpu", "jobs", "runtime"},  # the running Courier offers what they need
    "tools": {"core", "store", "anyone", "jobs", "emulator"},
}
ONLY_BOT_SPEAKS_TELEGRAM = "telegram"
"""python-telegram-bot is the bot's adapter: no other package imports it."""


def imported(path: Path, root: Path = PACK_ROOT) -> list[tuple[int, str]]:
    """(line, module) for every import in ``path``, relative ones resolved against the pack root.

    A module of the pack is named from the root (``bot.handlers``); any other module as written
    (``telegram.error``). ``from .. import bot`` names ``bot``.
    """
    package = path.parent.relative_to(root).parts
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, _from_root(alias.name)) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                assert node.level - 1 <= len(package), f"{path}:{node.lineno} imports from above the pack"
                base = list(package[:len(package) - node.level + 1])
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = _from_root(node.module)
            found += [(node.lineno, f"{module}.{alias.name}".lstrip(".")) for alias in node.names]
    return found


def _from_root(module: str) -> str:
    first, _, rest = module.partition(".")
    return rest if first in PACK_NAMES else module


def violations(package: str, root: Path = PACK_ROOT) -> list[str]:
    """``path:line imports module`` for each import of ``package`` that ``MAY_IMPORT`` does not allow."""
    allowed = MAY_IMPORT[package] | {package}
    pack = set(MAY_IMPORT) | {name.removesuffix(".py") for name in ENTRY_FILES}
    bad = []
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported(path, root):
            first = module.split(".")[0]
            if (first in pack and first not in allowed) or (first == ONLY_BOT_SPEAKS_TELEGRAM and package != "bot"):
                bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_each_package_imports_only_the_ones_below_it(package):
    assert list((PACK_ROOT / package).rglob("*.py")), f"no modules under {package}/"
    assert violations(package) == []


def test_every_package_has_its_place_and_the_root_holds_only_entry_files():
    packages = {path.parent.name for path in PACK_ROOT.glob("*/__init__.py")} - {"tests"}
    assert packages == set(MAY_IMPORT)
    assert {path.name for path in PACK_ROOT.glob("*.py")} == ENTRY_FILES


def test_the_check_sees_every_kind_of_import(tmp_path):
    """Each way of writing a forbidden import is caught, and allowed ones are not."""
    jobs = tmp_path / "jobs"
    (jobs / "sub").mkdir(parents=True)
    (jobs / "sub" / "deep.py").write_text(
        "from ... import bot\n"                   # 1: the bot package, relative
        "from ...bot.handlers import run_command\n"  # 2
        "from ..ports import ChatSink\n"          # allowed: jobs.ports
        "def later():\n"
        "    import telegram.error\n"             # 5: inside a function
        "    from telegram import Bot\n"          # 6
        "    from comfyui_courier.bot import i18n\n"  # 7: absolute, under the tests' name
        "    from ...core import i18n\n"          # allowed: the base
        "    from ...runtime import COURIER\n")    # 9: the composition
    found = violations("jobs", tmp_path)
    assert [v.split(":")[1].split()[0] for v in found] == ["1", "2", "5", "6", "7", "9"], found
