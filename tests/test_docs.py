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
