"""Install the ``anon`` and ``anon-gencert`` binaries from the npm package tarball.

The npm package's postinstall script downloads from the internet (and fails
offline), so we never run it: ``npm pack`` fetches the tarball (integrity-checked
by npm) and we copy ``bin/<os>/<arch>/`` out of it. Stdlib only, so it also runs
as a plain script: ``python anyone/install.py --dir DIR``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

NPM_PACKAGE = "@anyone-protocol/anyone-client"
NPM_VERSION = "1.1.3"  # ships anon 0.4.9.11, which serves `.anon` addresses
ANON_VERSION = "0.4.9.11"
BINARIES = ("anon", "anon-gencert")
VERSION_FILE = ".anyone-client-version"


class InstallError(RuntimeError):
    """The binaries could not be installed; the message says what to do."""


def platform_dir() -> str:
    """The tarball folder for this machine, e.g. ``linux/x64``."""
    system = platform.system().lower()
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{system}/{arch}"


def installed_version(target: Path) -> str | None:
    """The npm package version installed in ``target``, or None if incomplete."""
    if not all((target / name).is_file() for name in BINARIES):
        return None
    try:
        return (target / VERSION_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def anon_version(anon: Path) -> str:
    """``anon --version``'s number, e.g. ``0.4.9.11``."""
    out = subprocess.run([str(anon), "--version"], capture_output=True, text=True, timeout=30,
                         check=False).stdout
    first = out.split("\n", 1)[0]  # "Anon version 0.4.9.11-live."
    return first.removeprefix("Anon version ").split("-", 1)[0].rstrip(".")


def npm_pack(workdir: Path, version: str = NPM_VERSION) -> Path:
    """Download the package tarball into ``workdir`` with ``npm pack`` (no scripts run)."""
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm not found: install Node.js, or download the tarball of "
                           f"{NPM_PACKAGE}@{version} yourself and pass --tarball")
    proc = subprocess.run([npm, "pack", f"{NPM_PACKAGE}@{version}", "--ignore-scripts",
                           "--pack-destination", str(workdir)],
                          capture_output=True, text=True, timeout=600, cwd=workdir, check=False)
    tarballs = sorted(workdir.glob("*.tgz"))
    if proc.returncode != 0 or not tarballs:
        raise InstallError(f"npm pack {NPM_PACKAGE}@{version} failed: {proc.stderr.strip()[-2000:]}")
    return tarballs[0]


def extract_binaries(tarball: Path, target: Path) -> None:
    """Copy ``bin/<os>/<arch>/{anon,anon-gencert}`` from the tarball into ``target``."""
    folder = platform_dir()
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "r:gz") as tar:
        for name in BINARIES:
            try:
                member = tar.getmember(f"package/bin/{folder}/{name}")
            except KeyError:
                raise InstallError(f"{tarball.name} has no {name} for {folder}") from None
            source = tar.extractfile(member)
            partial = target / f".{name}.partial"
            with open(partial, "wb") as out:
                shutil.copyfileobj(source, out)
            partial.chmod(0o755)
            os.replace(partial, target / name)


def install(target: Path, *, tarball: Path | None = None, force: bool = False) -> Path:
    """Install anon into ``target`` unless this version is already there; return anon's path."""
    target = Path(target).expanduser().resolve()
    anon = target / "anon"
    if not force and installed_version(target) == NPM_VERSION:
        return anon
    with tempfile.TemporaryDirectory(prefix="courier-anon-") as tmp:
        extract_binaries(Path(tarball) if tarball else npm_pack(Path(tmp)), target)
    found = anon_version(anon)
    if found != ANON_VERSION:
        raise InstallError(f"{anon} reports version {found!r}, expected {ANON_VERSION}")
    (target / VERSION_FILE).write_text(NPM_VERSION + "\n", encoding="utf-8")
    return anon


def find_anon(configured: str = "", data_dir: str | os.PathLike | None = None) -> Path | None:
    """The anon to run: the ``anon_binary`` setting, else an installed one, else PATH."""
    if configured:
        return Path(configured).expanduser()
    for folder in ([Path(data_dir) / "bin"] if data_dir else []) + [default_dir()]:
        if (folder / "anon").is_file():
            return folder / "anon"
    found = shutil.which("anon")
    return Path(found) if found else None


def default_dir() -> Path:
    """Where ``install-anon`` puts the binaries when no --dir is given: ``<data dir>/bin``.

    The data dir is ``$COURIER_DATA_DIR``, else ComfyUI's ``user/courier`` when the pack
    sits in ``custom_nodes``, else the standalone bot's default ``~/.comfyui-courier``.
    """
    if os.environ.get("COURIER_DATA_DIR"):
        return Path(os.environ["COURIER_DATA_DIR"]) / "bin"
    pack = Path(__file__).resolve().parent.parent
    if pack.parent.name == "custom_nodes":
        return pack.parent.parent / "user" / "courier" / "bin"
    return Path.home() / ".comfyui-courier" / "bin"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="install-anon",
        description=f"Install anon {ANON_VERSION} from the npm package {NPM_PACKAGE}@{NPM_VERSION}.")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to put anon and anon-gencert (default: <data dir>/bin)")
    parser.add_argument("--tarball", type=Path, default=None,
                        help="use this downloaded package tarball instead of running npm pack")
    parser.add_argument("--force", action="store_true", help="reinstall even if this version is present")
    args = parser.parse_args(argv)
    try:
        anon = install(args.dir or default_dir(), tarball=args.tarball, force=args.force)
    except (InstallError, OSError, subprocess.SubprocessError) as exc:
        print(f"install-anon: {exc}", file=sys.stderr)
        return 1
    print(anon)
    return 0


if __name__ == "__main__":
    sys.exit(main())
