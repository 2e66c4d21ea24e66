"""install-anon: copies the platform's binaries out of the package tarball, once per version, and only
the bytes the pinned package ships (their sha256 is in the code).

The pinned check runs on the real binaries (the ones install-anon put on this machine, packed as the
npm package lays them out): they install; one changed byte in either is refused, and nothing is
installed -- ``anon --version`` alone would have passed it. The other tests use small scripts in
place of anon, pinned for the test.
"""

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from comfyui_courier.anyone import install

FAKE_ANON = "#!/bin/sh\necho 'Anon version {version}-live.'\n"
FAKE_GENCERT = "#!/bin/sh\n"


def make_tarball(path: Path, folder: str, files: dict[str, bytes]) -> Path:
    """A tarball laid out as the npm package: ``package/bin/<folder>/<name>``."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/bin/{folder}/{name}")
            info.size = len(data)
            info.mode = 0o755
            tar.addfile(info, io.BytesIO(data))
    return path


def fake_binaries(version: str = install.ANON_VERSION) -> dict[str, bytes]:
    return {"anon": FAKE_ANON.format(version=version).encode(), "anon-gencert": FAKE_GENCERT.encode()}


@pytest.fixture
def pin(monkeypatch):
    """``pin(files)``: pins these binaries for this machine's folder, as the code pins the package's."""
    def pin_files(files: dict[str, bytes]) -> dict[str, bytes]:
        monkeypatch.setitem(install.SHA256, install.platform_dir(),
                            {name: hashlib.sha256(data).hexdigest() for name, data in files.items()})
        return files
    return pin_files


@pytest.fixture
def real_binaries(anon_binary) -> dict[str, bytes]:
    """The real anon and anon-gencert of the pinned package (install-anon put them on this machine)."""
    return {name: anon_binary.with_name(name).read_bytes() for name in install.BINARIES}


def test_the_pinned_packages_binaries_install(tmp_path, real_binaries):
    tarball = make_tarball(tmp_path / "pkg.tgz", install.platform_dir(), real_binaries)
    anon = install.install(tmp_path / "bin", tarball=tarball)
    assert install.anon_version(anon) == install.ANON_VERSION
    assert {name: (tmp_path / "bin" / name).read_bytes() for name in install.BINARIES} == real_binaries
    assert install.installed_version(tmp_path / "bin") == install.NPM_VERSION


@pytest.mark.parametrize("tampered", install.BINARIES)
def test_a_tampered_binary_is_refused_and_nothing_is_installed(tmp_path, real_binaries, tampered):
    """One byte more still runs and says its version; its sha256 gives it away."""
    files = {**real_binaries, tampered: real_binaries[tampered] + b"\0"}
    tarball = make_tarball(tmp_path / "pkg.tgz", install.platform_dir(), files)
    target = tmp_path / "bin"
    with pytest.raises(install.InstallError) as refused:
        install.install(target, tarball=tarball)
    message = str(refused.value)
    assert f"{tampered} in pkg.tgz is not the one {install.NPM_PACKAGE}@{install.NPM_VERSION} ships" in message
    assert hashlib.sha256(files[tampered]).hexdigest() in message and "nothing was installed" in message
    assert not target.exists() or list(target.iterdir()) == []  # no binary, no partial file, no version file


def test_a_tampered_install_is_not_taken_for_installed(tmp_path, real_binaries):
    """Binaries changed after they were installed are installed again, not run."""
    tarball = make_tarball(tmp_path / "pkg.tgz", install.platform_dir(), real_binaries)
    target = tmp_path / "bin"
    install.install(target, tarball=tarball)
    with open(target / "anon", "ab") as anon:
        anon.write(b"\0")
    assert install.installed_version(target) is None
    install.install(target, tarball=tarball)
    assert (target / "anon").read_bytes() == real_binaries["anon"]


def test_the_pins_cover_each_platform_folder_with_both_binaries():
    assert {"linux/x64", "darwin/arm64"} <= set(install.SHA256)
    for folder, pins in install.SHA256.items():
        assert set(pins) == set(install.BINARIES), folder
        assert all(len(value) == 64 and int(value, 16) >= 0 for value in pins.values()), folder


def test_installs_executables_and_is_idempotent(tmp_path, monkeypatch, pin):
    tarball = make_tarball(tmp_path / "pkg.tgz", install.platform_dir(), pin(fake_binaries()))
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
    tarball = make_tarball(tmp_path / "pkg.tgz", "plan9/mips", fake_binaries())
    with pytest.raises(install.InstallError, match=f"no anon for {install.platform_dir()}"):
        install.install(tmp_path / "bin", tarball=tarball)


def test_a_platform_the_package_does_not_ship_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(install, "platform_dir", lambda: "plan9/mips")
    tarball = make_tarball(tmp_path / "pkg.tgz", "plan9/mips", fake_binaries())
    with pytest.raises(install.InstallError, match=f"{install.NPM_PACKAGE}@{install.NPM_VERSION} ships no anon "
                                                   "for plan9/mips"):
        install.install(tmp_path / "bin", tarball=tarball)


def test_wrong_version_is_refused(tmp_path, pin):
    tarball = make_tarball(tmp_path / "pkg.tgz", install.platform_dir(), pin(fake_binaries("0.4.10.1")))
    with pytest.raises(install.InstallError, match="0.4.10.1"):
        install.install(tmp_path / "bin", tarball=tarball)
    assert install.installed_version(tmp_path / "bin") is None


def test_cli_reports_errors_without_traceback(tmp_path, capsys):
    assert install.main(["--dir", str(tmp_path / "bin"), "--tarball", str(tmp_path / "missing.tgz")]) == 1
    assert "install-anon:" in capsys.readouterr().err


def test_find_anon_prefers_setting_then_installed_then_path(tmp_path, monkeypatch):
    monkeypatch.setenv("COURIER_DATA_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.comfyui-courier/bin/anon
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
