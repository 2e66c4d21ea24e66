"""Packaging for ComfyUI-Manager and the Comfy Registry: pyproject.toml, requirements.txt,
and ``comfy node validate`` (comfy-cli), the check the Registry runs before publishing."""

import ast
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import comfyui_courier

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

PACK_ROOT = Path(comfyui_courier.__file__).resolve().parent
GPU_WHEELS = {"torch", "torchvision", "torchaudio"}  # ComfyUI's own; a pack must never pull them
NOT_SHIPPED = ("tests/", "benchmarks/", ".ci/", ".github/", ".gitignore")
"""What the Registry's archive leaves out (``.comfyignore``): the Registry's scanner reads every file in it."""
USER_RUNS = ("__init__.py", "__main__.py", "cli.py", "tools/tryout.py", "tools/tiny_models.py",
             "emulator/botapi/server.py", "emulator/botapi/web/index.html", "miniapp/index.html",
             "nodes/extension.py", "js/icon.svg",
             "workflows/api/img.json",
             "locales/en/LC_MESSAGES/courier.po", "store/sql/schema.sql", "babel.cfg", "LICENSE", "README.md",
             "pyproject.toml", "requirements.txt")
VALIDATE_TIMEOUT_S = 120


def pyproject() -> dict:
    return tomllib.loads((PACK_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def requirement_lines() -> list[str]:
    lines = (PACK_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [line.split(" #")[0].strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def normalized(requirements) -> list[str]:
    return sorted(str(Requirement(text)) for text in requirements)


def test_project_table_has_what_the_registry_needs():
    project = pyproject()["project"]
    assert project["name"] == "comfyui-courier"
    assert project["version"] == comfyui_courier.__version__
    assert project["description"].strip()
    license_ = project["license"]
    assert isinstance(license_, str) or {"file", "text"} & set(license_), license_
    if isinstance(license_, dict) and "file" in license_:
        assert (PACK_ROOT / license_["file"]).is_file()
    assert project["dependencies"]
    assert project["urls"]["Repository"].startswith("https://")


def test_tool_comfy_table_has_what_the_registry_needs():
    comfy = pyproject()["tool"]["comfy"]
    assert comfy["PublisherId"].strip()
    assert comfy["DisplayName"] == "ComfyUI Courier"
    assert comfy["Icon"].startswith("https://")
    # The registry shows the file at that URL: the path after the branch must exist in the pack.
    repository = pyproject()["project"]["urls"]["Repository"].removeprefix("https://github.com/")
    prefix = f"https://raw.githubusercontent.com/{repository}/main/"
    assert comfy["Icon"].startswith(prefix), comfy["Icon"]
    assert (PACK_ROOT / comfy["Icon"].removeprefix(prefix)).is_file(), comfy["Icon"]
    assert comfy["requires-comfyui"].strip()


def test_requirements_txt_lists_exactly_the_project_dependencies():
    assert normalized(requirement_lines()) == normalized(pyproject()["project"]["dependencies"])


def test_python_telegram_bot_asks_only_for_the_extra_the_pack_uses():
    """socks: httpx's SOCKS transport, for the Bot API through Anyone; not rate-limiter (AIORateLimiter):
    the bot's limiter is its own (bot/limiter.py)."""
    (ptb,) = [Requirement(text) for text in requirement_lines() if Requirement(text).name == "python-telegram-bot"]
    assert ptb.extras == {"socks"}


def test_nodes_import_a_numbered_comfy_api_version():
    """``comfy_api.latest`` "may change without warning"; a numbered version stays as it was."""
    imported = {}
    for path in sorted((PACK_ROOT / "nodes").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            imported.update({name: path.name for name in names if name.split(".")[0] == "comfy_api"})
    assert imported and all(re.fullmatch(r"comfy_api\.v\d+_\d+_\d+", name) for name in imported), imported


def test_no_torch_family_dependency():
    for requirements in (requirement_lines(), pyproject()["project"]["dependencies"]):
        names = {Requirement(text).name.lower().replace("_", "-") for text in requirements}
        assert not names & GPU_WHEELS


def test_frontend_is_registered_once():
    # ComfyUI serves WEB_DIRECTORY under the folder name and [tool.comfy].web under the
    # project name: with both, the graph editor loads the extension twice.
    assert comfyui_courier.WEB_DIRECTORY
    assert (PACK_ROOT / comfyui_courier.WEB_DIRECTORY).is_dir()
    assert "web" not in pyproject()["tool"]["comfy"]


def test_the_registry_archive_holds_what_a_user_runs_and_no_tests(tmp_path, monkeypatch):
    """The archive ``comfy node pack`` and ``comfy node publish`` upload, built by comfy-cli's own
    ``zip_files``: git's tracked files less ``.comfyignore``'s, plus ``[tool.comfy] includes``."""
    from comfy_cli.file_utils import list_git_tracked_files, zip_files

    monkeypatch.chdir(PACK_ROOT)
    archive = tmp_path / "node.zip"
    zip_files(archive, includes=pyproject()["tool"]["comfy"].get("includes", []))
    with zipfile.ZipFile(archive) as packed:
        names = set(packed.namelist())
    assert set(USER_RUNS) <= names, sorted(set(USER_RUNS) - names)
    assert [name for name in names if name.startswith(NOT_SHIPPED)] == []
    tracked = {name for name in list_git_tracked_files(".") if (PACK_ROOT / name).is_file()}
    assert names == {name for name in tracked if not name.startswith(NOT_SHIPPED)}  # nothing else left out


def test_comfy_node_validate_passes_without_errors_or_warnings(tmp_path):
    """Offline and non-interactive: parses pyproject.toml, then ruff S102/S307/E702 over the tree."""
    try:
        import comfy_cli  # noqa: F401
    except ImportError:
        pytest.fail("comfy-cli is missing: pip install -r tests/requirements.txt")
    env = dict(os.environ, HOME=str(tmp_path),  # comfy-cli keeps its config under ~/.config
               DO_NOT_TRACK="1", COMFY_NO_TELEMETRY="1", NO_COLOR="1", COLUMNS="200")
    result = subprocess.run(
        [sys.executable, "-m", "comfy_cli", "--skip-prompt", "node", "validate"],
        cwd=PACK_ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=VALIDATE_TIMEOUT_S, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "All validation checks passed" in output, output
    assert "warning" not in output.lower(), output
    assert "error" not in output.lower(), output
