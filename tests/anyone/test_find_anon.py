"""One lookup of the anon binary for every part (``anyone.install.find_anon``): ``install-anon``'s
folders, whichever it used, are where ComfyUI's Courier, the standalone bot and ``try`` look."""

from pathlib import Path

from comfyui_courier.anyone import install


def installed(path: Path) -> Path:
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_anon_installed_in_the_home_folder_is_found_by_a_comfyui_with_its_own_data_dir(tmp_path, monkeypatch):
    """``install-anon`` run from a clone outside ComfyUI puts it in ``~/.comfyui-courier/bin``; a ComfyUI
    whose Courier keeps its data elsewhere (``user/courier``, or COURIER_DATA_DIR) must find it there."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COURIER_DATA_DIR", str(tmp_path / "ComfyUI" / "user" / "courier"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    anon = installed(tmp_path / "home" / ".comfyui-courier" / "bin" / "anon")
    assert install.find_anon("", tmp_path / "ComfyUI" / "user" / "courier") == anon


def test_the_data_dirs_own_binary_comes_first_and_nothing_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("COURIER_DATA_DIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert install.find_anon("", tmp_path / "data") is None
    installed(tmp_path / "home" / ".comfyui-courier" / "bin" / "anon")
    own = installed(tmp_path / "data" / "bin" / "anon")
    assert install.find_anon("", tmp_path / "data") == own
