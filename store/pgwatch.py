"""Stops the embedded PostgreSQL once every process that uses it is gone.

Each process that uses the server lists its pid in the flock'd ``<pgdata>.clients`` file and
starts this module as a script beside it (standard library only, in a session of its own), so
the server stops even when its users die without running any cleanup: SIGTERM (which ComfyUI
does not handle), SIGKILL, a crash. The watcher exits when the server is gone, however it went.
``embedded.py`` shares the clients file and the postmaster.pid reading from here.

    python -I -S pgwatch.py <pgdata> <pg_ctl> <uid> <gid>   (uid and gid "-" to stay ourselves)
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

if os.name == "posix":
    import fcntl

STOP_TIMEOUT_S = 60
SOCKET_PARENT = Path("/tmp")  # short whatever the data directory's depth, on Linux and macOS
SOCKET_PREFIX = "courier-pgsock-"
_HAVE_PROC = Path("/proc/self/cmdline").exists()


@contextlib.contextmanager
def clients(pgdata: Path, save: bool = True) -> Iterator[list[int]]:
    """Lock ``<pgdata>.clients`` and yield the live pids it lists; the list is saved on success
    (unless not ``save``: a watcher only reads it, so terminating one never loses the list)."""
    with open(pgdata.with_name(pgdata.name + ".clients"), "a+", encoding="utf-8") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        pids = [pid for pid in json.loads(file.read() or "[]") if alive(pid)]
        yield pids
        if not save:
            return
        file.seek(0)
        file.truncate()
        file.write(json.dumps(pids))


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has exited: it only waits for its parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, but another user's
        pass
    if _HAVE_PROC:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
        except OSError:
            return False
    return True


def pid_file(pgdata: Path) -> tuple[int, Path, int] | None:
    """(pid, socket directory, port) as postmaster.pid in ``pgdata`` says, or None."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), Path(lines[4]), int(lines[3])
    except (OSError, IndexError, ValueError):
        return None


def postmaster(pgdata: Path) -> tuple[int, Path, int] | None:
    """(pid, socket directory, port) of the postmaster running on ``pgdata``, or None.

    After a crash, postmaster.pid may name a pid that now belongs to another process (likely in
    containers, whose pids restart from 1); on Linux the command line tells them apart.
    """
    found = pid_file(pgdata)
    if found is None or not alive(found[0]):
        return None
    if _HAVE_PROC:
        try:
            if os.fsencode(pgdata) not in Path(f"/proc/{found[0]}/cmdline").read_bytes().split(b"\0"):
                return None
        except OSError:
            return None
    return found


def wait_for_an_exit(pids: list[int]) -> None:
    """Return once any of ``pids`` has exited (at once if one already has)."""
    if not hasattr(os, "pidfd_open"):  # macOS
        while all(map(alive, pids)):
            time.sleep(1)
        return
    fds = []
    try:
        for pid in pids:
            fds.append(os.pidfd_open(pid))
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN)
        poller.poll()
    except ProcessLookupError:
        return
    finally:
        for fd in fds:
            os.close(fd)


def watch(pgdata: Path, pg_ctl: str, account: tuple[int, int] | None) -> None:
    """Wait until no client is left, then stop the server; return early if it stops otherwise."""
    while True:
        with clients(pgdata, save=False) as pids:  # held while stopping: no client joins a server going away
            server = postmaster(pgdata)
            if server is None:
                return
            if not pids:
                as_account = {} if account is None else {
                    "user": account[0], "group": account[1], "extra_groups": []}
                subprocess.run([pg_ctl, "stop", "-w", "-t", str(STOP_TIMEOUT_S), "-m", "fast",
                                "-D", str(pgdata)], cwd="/", stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, check=True, timeout=STOP_TIMEOUT_S + 5,
                               **as_account)
                remove_socket_directory(server[1])
                return
        wait_for_an_exit([*pids, server[0]])


def remove_socket_directory(path: Path) -> None:
    """Remove a socket directory the embedded server was given (and nothing else)."""
    if path.parent == SOCKET_PARENT and path.name.startswith(SOCKET_PREFIX):
        for entry in path.glob(".s.PGSQL.*"):
            entry.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.rmdir()


if __name__ == "__main__":
    data, program, uid, gid = sys.argv[1:]
    try:
        watch(Path(data), program, None if uid == "-" else (int(uid), int(gid)))
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"[Courier] ERROR the watcher of the embedded PostgreSQL in {data} failed: {exc}",
              file=sys.stderr)
        sys.exit(1)
