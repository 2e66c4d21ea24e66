"""The embedded server: restart on the same data, reuse across processes, stop, run as whom."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from comfyui_courier.store import EmbeddedError, embedded

PACK_ROOT = Path(__file__).resolve().parents[2]

# A second process: loads the pack as ComfyUI does, starts the server, reports, waits for a line
# on stdin, then releases it.
OTHER_PROCESS = f"""
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location(
    "comfyui_courier", {str(PACK_ROOT / "__init__.py")!r}, submodule_search_locations=[{str(PACK_ROOT)!r}])
pack = importlib.util.module_from_spec(spec)
sys.modules["comfyui_courier"] = pack
spec.loader.exec_module(pack)
from comfyui_courier.store import embedded
server = embedded.start_sync(Path(sys.argv[1]))
print(server.pid, server.started, flush=True)
sys.stdin.readline()
server.stop_sync()
"""


def other_process(pgdata: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(pgdata)], cwd="/",
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def report(process: subprocess.Popen) -> tuple[int, bool]:
    pid, started = process.stdout.readline().split()
    return int(pid), started == "True"


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


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="only root must drop privileges")
def test_as_root_postgres_runs_unprivileged(pg_server, _pg_embedded):
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{_pg_embedded.pid}/status").read_text().splitlines())
    uids, gids, groups = status["Uid"].split(), status["Gid"].split(), status["Groups"].split()
    assert "0" not in uids + gids + groups
    assert _pg_embedded.pgdata.stat().st_mode & 0o077 == 0
    assert _pg_embedded.pgdata.parent.stat().st_mode & 0o777 == 0o711  # untouched by start


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


def test_refuses_a_path_too_long_for_the_socket(pg_data_dir):
    with pytest.raises(EmbeddedError, match="too long"):
        embedded.start_sync(pg_data_dir / ("x" * 100) / "postgres")
