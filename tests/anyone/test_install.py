"""install-anon: copies the platform's binaries out of the package tarball, once per version."""

import io
import tarfile
from pathlib import Path

import pytest

from comfyui_courier.anyone import install

FAKE_ANON = "#!/bin/sh\necho 'Anon version {version}-live.'\n"


def make_tarball(path: Path, folder: str, version: str = install.ANON_VERSION) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in (("anon", FAKE_ANON.format(version=version)), ("anon-gencert", "#!/bin/sh\n")):
            data = text.encode()
            info = tarfile.TarInfo(f"package/bin/{folder}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_installs_executables_and_is_idempotent(tmp_path, monkeypatch):
    tarball = make_tarball(tmp_path / "pkg.tgz", install.platform_dir())
    target = tmp_path / "bin"
    anon = install.install(target, tarball=tarball)
    assert anon == target.resolve() / "anon"
    assert all((target / name).stat().st_mode & 0o111 for name in install.BINARIES)
    assert install.installed_version(target) == install.NPM_VERSION

    def no_download(*args, **kwargs):
        raise AssertionError("already installed: nothing to fetch")

    monkeypatch.setattr(install, "npm_pack", no_download)
    assert install.install(target) == anon


def test_missing_platform_is_a_clear_error(tmp_path):
    tarball = make_tarball(tmp_path / "pkg.tgz", "plan9/mips")
    with pytest.raises(install.InstallError, match=f"no anon for {install.platform_dir()}"):
        install.install(tmp_path / "bin", tarball=tarball)


def test_wrong_version_is_refused(tmp_path):
    tarball = make_tarball(tmp_path / "pkg.tgz", install.platform_dir(), version="0.4.10.1")
    with pytest.raises(install.InstallError, match="0.4.10.1"):
        install.install(tmp_path / "bin", tarball=tarball)
    assert install.installed_version(tmp_path / "bin") is None


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    assert install.main(["--dir", str(tmp_path / "bin"), "--tarball", str(tmp_path / "missing.tgz")]) == 1
    assert "install-anon:" in capsys.readouterr().err


def test_find_anon_prefers_setting_then_installed_then_path(tmp_path, monkeypatch):
    monkeypatch.setenv("COURIER_DATA_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    (tmp_path / "path").mkdir()
    on_path = tmp_path / "path" / "anon"
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    assert install.find_anon("", tmp_path / "data") == on_path
    installed = tmp_path / "data" / "bin" / "anon"
    installed.parent.mkdir(parents=True)
    installed.write_text("")
    assert install.find_anon("", tmp_path / "data") == installed
    assert install.find_anon("/opt/anon", tmp_path / "data") == Path("/opt/anon")
