"""Install the ``anon`` and ``anon-gencert`` binaries from the npm package tarball.

The npm package's postinstall script downloads from the internet (and fails
offline), so we never run it: ``npm pack`` fetches the tarball of the pinned
version and we copy ``bin/<os>/<arch>/`` out of it. npm checks the tarball only
against what the registry says, and ``--tarball`` takes any file, so each binary
must have the sha256 pinned here for that version and folder (``SHA256``): one
that differs is refused and nothing is installed; an installed one that differs
is installed again. Stdlib only, so it also runs as a plain script:
``python anyone/install.py --dir DIR``.
"""

from __future__ import annotations

import argparse
import hashlib
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
# sha256 of the binaries in NPM_PACKAGE@NPM_VERSION, per folder of its bin/ that holds both: `sha256sum
# package/bin/<folder>/<name>` in the tarball `npm pack` fetched. A new NPM_VERSION needs new values.
SHA256 = {
    "linux/x64": {"anon": "ec00c60c185530465fa270c05d7b0ebf507fec9ac970f5a58c3be75247101e1c",
                  "anon-gencert": "ce09a13c86fa7e604eaf66e06795dea9287bd2a93b19caffb96c64f0a6cebb77"},
    "darwin/arm64": {"anon": "b2962e919d3ce4a87a35091b0cd2e721e396cf5292d1652fbe996cdab7e9a145",
                     "anon-gencert": "97a539f4bfaadecc2900eea2d3aa455e0a777e77683b93126ad0d93a183c108a"},
    "android/arm64": {"anon": "e17a6041b3172d8794e720dda08b56cb95340f170a94452b4f91bb552257a0d3",
                      "anon-gencert": "8c931f7aa434528caffc344179bf8f23740cfc2b8045c456ae732e2264ec928b"},
}
CHUNK_BYTES = 2**20


class InstallError(RuntimeError):
    """The binaries could not be installed; the message says what to do."""


def platform_dir() -> str:
    """The tarball folder for this machine, e.g. ``linux/x64``."""
    system = platform.system().lower()
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{system}/{arch}"


def installed_version(target: Path) -> str | None:
    """The npm package version installed in ``target``, or None if incomplete or not the pinned binaries."""
    pins = SHA256.get(platform_dir(), {})
    try:
        if not all(_sha256_of(target / name) == pins.get(name) for name in BINARIES):
            return None
        return (target / VERSION_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


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
    """Copy ``bin/<os>/<arch>/{anon,anon-gencert}`` from the tarball into ``target``, all or none: each
    must have its pinned sha256, checked before any is put in place."""
    folder = platform_dir()
    pins = SHA256.get(folder)
    if pins is None:
        raise InstallError(f"{NPM_PACKAGE}@{NPM_VERSION} ships no anon for {folder}")
    target.mkdir(parents=True, exist_ok=True)
    partials = {name: target / f".{name}.partial" for name in BINARIES}
    try:
        with tarfile.open(tarball, "r:gz") as tar:
            for name, partial in partials.items():
                try:
                    member = tar.getmember(f"package/bin/{folder}/{name}")
                except KeyError:
                    raise InstallError(f"{tarball.name} has no {name} for {folder}") from None
                source = tar.extractfile(member) if member.isfile() else None
                if source is None:
                    raise InstallError(f"{name} for {folder} in {tarball.name} is not a regular file")
                digest = _copy(source, partial)
                if digest != pins[name]:
                    raise InstallError(
                        f"{name} in {tarball.name} is not the one {NPM_PACKAGE}@{NPM_VERSION} ships for {folder} "
                        f"(sha256 {digest}, pinned {pins[name]}); nothing was installed: fetch the package "
                        "again, or check where the tarball came from")
        for name, partial in partials.items():
            partial.chmod(0o755)
            os.replace(partial, target / name)
    finally:
        for partial in partials.values():
            partial.unlink(missing_ok=True)


def _copy(source, out_path: Path) -> str:
    """Write the file object ``source`` to ``out_path``; the sha256 of what was written."""
    digest = hashlib.sha256()
    with open(out_path, "wb") as out:
        while chunk := source.read(CHUNK_BYTES):
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


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
    """The anon to run: the ``anon_binary`` setting, else an installed one, else PATH. The one lookup of
    every part (ComfyUI's Courier, the standalone bot, ``try``): installed means in ``<data_dir>/bin``,
    ``default_dir()`` or the standalone default ``~/.comfyui-courier/bin``, wherever ``install-anon``
    was run from (a clone outside ComfyUI puts it in the last)."""
    if configured:
        return Path(configured).expanduser()
    folders = [Path(data_dir) / "bin"] if data_dir else []
    for folder in [*folders, default_dir(), Path.home() / ".comfyui-courier" / "bin"]:
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
                        help=f"use this downloaded tarball of {NPM_PACKAGE}@{NPM_VERSION} instead of running "
                             "npm pack (its binaries must have the sha256 pinned in anyone/install.py)")
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
