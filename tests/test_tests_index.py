"""Each tests/<package>/ opens with an index (its README.md) saying which file covers which module."""

import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PACKAGES = sorted(path for path in TESTS.iterdir() if path.is_dir() and any(path.glob("test_*.py")))
ROW = re.compile(r"^- `(test_\w+\.py)`:", re.MULTILINE)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda path: path.name)
def test_the_index_names_each_test_file_of_its_package_once(package):
    index = package / "README.md"
    assert index.is_file(), f"tests/{package.name}/README.md is missing: say which file covers which module"
    named = ROW.findall(index.read_text(encoding="utf-8"))
    assert sorted(named) == sorted(path.name for path in package.glob("test_*.py"))
