"""The README stays a user's page, and the docs stay true to the code they describe."""

import re
from pathlib import Path

import pytest

from comfyui_courier.core.config import configuration_markdown

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_short_enough_to_read():
    assert (ROOT / "README.md").stat().st_size <= 15_000


def test_the_configuration_doc_lists_every_setting_as_config_py_defines_it():
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert configuration_markdown() in doc, "run `python <pack> settings` and paste its table into the doc"


@pytest.mark.parametrize("page", [ROOT / "README.md", *DOCS], ids=lambda page: page.name)
def test_relative_links_point_at_files_that_exist(page):
    targets = [t for t in LINK.findall(page.read_text(encoding="utf-8")) if "://" not in t]
    assert targets or page.name != "README.md"
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert missing == []


NAMED_FILE = re.compile(r"`([\w./-]+(?:\.(?:py|sql|md|json|js|html|toml|cfg)|/))`")


def named_files(text: str) -> set[str]:
    """The files and folders a page names in code spans (``jobs/dispatcher.py``, ``store/``)."""
    return {name for name in NAMED_FILE.findall(text) if not name.startswith(("../", "/", "http"))}


OTHER_TREES = {"ComfyUI/custom_nodes/", "comfy/supported_models.py", "user/courier.toml", "telegram/"}
"""What the page names in ComfyUI's tree, or as a name never to use (a ``telegram/`` package)."""


def test_every_file_the_architecture_page_names_exists():
    """A path (``bot/queueing.py``) from the pack's root; a bare name (``access.py``) somewhere in it."""
    names = named_files((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")) - OTHER_TREES
    assert len(names) > 30
    everything = {path.relative_to(ROOT).as_posix() for path in ROOT.rglob("*") if ".venv" not in path.parts}
    bare = {posix.rsplit("/", 1)[-1] for posix in everything} | {f"{posix.rsplit('/', 1)[-1]}/" for posix in everything}
    missing = sorted(name for name in names if (name.rstrip("/") not in everything if "/" in name.rstrip("/")
                                                 else name not in bare))
    assert missing == []
