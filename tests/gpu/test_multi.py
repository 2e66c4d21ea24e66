"""``python <pack> multi-gpu``: one ComfyUI per GPU, each a backend of one bot.

The generated script is run for real: with a stub interpreter that records what each instance
was started with, and (with ``COMFYUI_DIR``) with a real ComfyUI per "GPU" (``--cpu``) sharing
one PostgreSQL.
"""

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from comfyui_courier.gpu import multi
from comfyui_courier.tests.fixtures.comfyui import PACK_ROOT, comfyui_python, free_port
from comfyui_courier.tests.support.requires import require_comfyui

STUB = """#!{python}
import json, os, sys
port = sys.argv[sys.argv.index("--port") + 1]
keys = ("TELEGRAM_BOT_TOKEN", "COURIER_BACKENDS", "COURIER_ANYONE", "COURIER_DATA_DIR", "COURIER_DATABASE_URL")
record = {{"argv": sys.argv[1:], "env": {{k: os.environ.get(k) for k in keys}}}}
with open(os.path.join({out!r}, port + ".json"), "w") as f:
    json.dump(record, f)
"""


STAND_IN = """#!{python}
import os, signal, sys
port = sys.argv[sys.argv.index("--port") + 1]
if port == {stubborn!r}:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one that only SIGKILL stops
ignores_sigint = signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # as any process a script starts with &
path = os.path.join({out!r}, port)
with open(path + ".tmp", "w") as f:
    f.write(f"{{os.getpid()}} {{int(ignores_sigint)}}")
os.rename(path + ".tmp", path + ".pid")
while True:
    signal.pause()
"""


@pytest.fixture
def fake_comfyui(tmp_path):
    folder = tmp_path / "Comfy UI"  # a space: every path in the script must be quoted
    folder.mkdir()
    (folder / "main.py").write_text("")
    return folder


def test_one_instance_per_gpu_with_distinct_ports_and_own_folders(fake_comfyui, tmp_path):
    plan = multi.make_plan(fake_comfyui, [0, 1, 3], base_port=9000, state_dir=tmp_path / "state",
                           python="/py", comfyui_args=("--highvram",))
    commands = [plan.command(i) for i in plan.instances]
    assert [c[c.index("--cuda-device") + 1] for c in commands] == ["0", "1", "3"]
    assert [c[c.index("--port") + 1] for c in commands] == ["9000", "9001", "9002"]
    assert {c[1] for c in commands} == {str(fake_comfyui.resolve() / "main.py")}  # one folder: shared models
    for flag in ("--user-directory", "--output-directory", "--temp-directory", "--database-url"):
        assert len({c[c.index(flag) + 1] for c in commands}) == 3, flag
    assert commands[2][commands[2].index("--user-directory") + 1] == str(tmp_path / "state" / "gpu3" / "user")
    assert all(c[0] == "/py" and c[-1] == "--highvram" for c in commands)
    assert plan.backends == "http://127.0.0.1:9000,http://127.0.0.1:9001,http://127.0.0.1:9002"
    bot, *others = [plan.environment(i) for i in plan.instances]
    assert bot == {"COURIER_DATA_DIR": None, "COURIER_BACKENDS": plan.backends}
    assert all(env == {"COURIER_DATA_DIR": None, "TELEGRAM_BOT_TOKEN": None, "COURIER_ANYONE": "0"}
               for env in others)


@pytest.mark.parametrize("listen, url", [("0.0.0.0", "http://127.0.0.1:8188"), ("10.0.0.5", "http://10.0.0.5:8188"),
                                         ("::1", "http://[::1]:8188")])
def test_backend_urls_follow_the_listen_address(fake_comfyui, listen, url):
    assert multi.make_plan(fake_comfyui, [0], listen=listen).backends == url


@pytest.mark.parametrize("text", ["", "0,0", "a", "-1", "1.5", "0,,1", "٣", ",".join(map(str, range(65)))])
def test_bad_gpu_lists_are_refused(text):
    with pytest.raises(multi.PlanError):
        multi.parse_gpus(text)


def test_bad_plans_say_why(fake_comfyui, tmp_path):
    assert multi.parse_gpus(" 1, 0 ") == [1, 0]
    with pytest.raises(multi.PlanError, match="main.py"):
        multi.make_plan(tmp_path, [0])
    with pytest.raises(multi.PlanError, match="65535"):
        multi.make_plan(fake_comfyui, [0, 1], base_port=65535)
    with pytest.raises(multi.PlanError, match="--port"):
        multi.make_plan(fake_comfyui, [0], comfyui_args=("--port=1",))
    with pytest.raises(multi.PlanError, match="base-directory"):
        multi.make_plan(fake_comfyui, [0], base_directory=tmp_path / "missing")


def run_script(path: Path, env: dict, timeout: float = 30) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("COURIER_", "TELEGRAM_"))}
    return subprocess.run(["bash", str(path)], env={**clean, **env}, capture_output=True, text=True, check=False,
                          timeout=timeout)


def test_the_script_starts_each_instance_as_planned(fake_comfyui, tmp_path):
    out = tmp_path / "records"
    out.mkdir()
    stub = tmp_path / "py thon"
    stub.write_text(STUB.format(python=sys.executable, out=str(out)))
    stub.chmod(0o755)
    state = tmp_path / "st'ate"  # a quote too
    plan = multi.make_plan(fake_comfyui, [0, 1], base_port=9100, state_dir=state, python=str(stub),
                           base_directory=tmp_path)
    path = tmp_path / "gpus.sh"
    path.write_text(multi.script(plan))
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0

    refused = run_script(path, {"TELEGRAM_BOT_TOKEN": "123:abc"})
    assert refused.returncode != 0 and "COURIER_DATABASE_URL" in refused.stderr
    assert not list(out.iterdir())

    done = run_script(path, {"TELEGRAM_BOT_TOKEN": "123:abc", "COURIER_DATABASE_URL": "postgresql://db/courier",
                             "COURIER_DATA_DIR": "/shared/would/clash"})
    assert done.returncode == 0, done.stderr
    records = {p.stem: json.loads(p.read_text()) for p in out.iterdir()}
    assert set(records) == {"9100", "9101"}
    for port, gpu in (("9100", "0"), ("9101", "1")):
        argv, env = records[port]["argv"], records[port]["env"]
        assert argv == plan.command(plan.instances[int(gpu)])[1:]
        assert argv[argv.index("--base-directory") + 1] == str(tmp_path.resolve())
        assert Path(argv[argv.index("--user-directory") + 1]).is_dir()  # ComfyUI refuses a missing one
        assert env["COURIER_DATABASE_URL"] == "postgresql://db/courier" and env["COURIER_DATA_DIR"] is None
    assert records["9100"]["env"]["TELEGRAM_BOT_TOKEN"] == "123:abc"
    assert records["9100"]["env"]["COURIER_BACKENDS"] == "http://127.0.0.1:9100,http://127.0.0.1:9101"
    assert records["9101"]["env"]["TELEGRAM_BOT_TOKEN"] is None  # one poller per bot token
    assert records["9101"]["env"]["COURIER_ANYONE"] == "0"


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
def test_ctrl_c_and_sigterm_stop_every_instance(fake_comfyui, tmp_path, how):
    """SIGTERM to the script, or SIGINT to its process group as a terminal's Ctrl-C: none is left running."""
    out = tmp_path / "pids"
    out.mkdir()
    stub = tmp_path / "stand-in"
    stub.write_text(STAND_IN.format(python=sys.executable, out=str(out), stubborn="9201"))
    stub.chmod(0o755)
    plan = dataclasses.replace(multi.make_plan(fake_comfyui, [0, 1, 2], base_port=9200, state_dir=tmp_path / "state",
                                               python=str(stub)), stop_grace_s=3)
    path = tmp_path / "gpus.sh"
    path.write_text(multi.script(plan))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("COURIER_", "TELEGRAM_"))}
    launcher = subprocess.Popen(["bash", str(path)], env={**clean, "COURIER_DATABASE_URL": "postgresql://db/c"},
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    started: dict[int, bool] = {}
    try:
        deadline = time.monotonic() + 30
        while len(files := list(out.glob("*.pid"))) < len(plan.instances):
            assert time.monotonic() < deadline and launcher.poll() is None, "the stand-ins did not start"
            time.sleep(0.05)
        started = {int(pid): ignored == "1" for pid, ignored in (f.read_text().split() for f in files)}
        assert all(started.values())  # Ctrl-C alone would stop none of them
        if how == "SIGTERM":
            launcher.send_signal(signal.SIGTERM)
        else:
            os.killpg(launcher.pid, signal.SIGINT)
        assert launcher.wait(plan.stop_grace_s + 30) == 0
        for pid in started:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()


def pack_cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PACK_ROOT), "multi-gpu", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False)


def test_the_cli_prints_or_writes_the_script(fake_comfyui, tmp_path):
    printed = pack_cli("--comfyui-dir", str(fake_comfyui), "--gpus", "0,1", "--print", cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith("#!/usr/bin/env bash") and "--cuda-device 1" in printed.stdout
    written = pack_cli("--comfyui-dir", str(fake_comfyui), "--gpus", "2", "--base-port", "8200", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert "COURIER_BACKENDS=http://127.0.0.1:8200" in written.stdout
    script = tmp_path / multi.DEFAULT_SCRIPT
    assert os.access(script, os.X_OK) and "--cuda-device 2" in script.read_text()
    assert str(tmp_path / multi.DEFAULT_STATE / "gpu2" / "user") in script.read_text()
    bad = pack_cli("--comfyui-dir", str(fake_comfyui), "--gpus", "0,0", cwd=tmp_path)
    assert bad.returncode == 2 and "twice" in bad.stderr


def _health(url: str) -> dict | None:
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "/courier/health", timeout=2) as reply:
            return json.loads(reply.read())
    except OSError:
        return None


def test_two_real_comfyui_instances_share_one_database(pg_database, comfyui_scratch, tmp_path):
    """Two "GPUs" on CPU: both serve, each pack has its own state folder, both reach the shared database."""
    comfyui_dir = require_comfyui()
    base = comfyui_scratch / "multi-gpu-base"
    (base / "custom_nodes").mkdir(parents=True, exist_ok=True)
    link = base / "custom_nodes" / "ComfyUI-Courier-multi"
    if not link.exists():
        link.symlink_to(PACK_ROOT, target_is_directory=True)
    port = free_port()
    plan = multi.make_plan(comfyui_dir, [0, 1], base_port=port, state_dir=comfyui_scratch / "multi-gpu",
                           python=comfyui_python(comfyui_dir), comfyui_args=("--cpu",), base_directory=base)
    if free_port() in (port, port + 1):  # pragma: no cover - ports are handed out anew
        pytest.skip("port clash")
    path = tmp_path / "gpus.sh"
    path.write_text(multi.script(plan))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURIER_", "TELEGRAM_"))}
    process = subprocess.Popen(["bash", str(path)], env={**env, "COURIER_DATABASE_URL": pg_database},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        states = {}
        while time.monotonic() < deadline and process.poll() is None:
            states = {i.port: _health(plan.url(i)) for i in plan.instances}
            if all(s and s["components"]["database"]["state"] == "ok" for s in states.values()):
                break
            time.sleep(0.2)
        logs = "\n".join(i.log_file.read_text(errors="replace")[-3000:] for i in plan.instances if i.log_file.exists())
        assert all(s and s["components"]["database"]["state"] == "ok" for s in states.values()), logs
        assert all(s["components"]["bot"]["state"] == "off" for s in states.values())  # no token given
        for instance in plan.instances:
            log = instance.log_file.read_text()
            assert "Set cuda device to: " + str(instance.gpu) in log
            assert f"Setting user directory to: {instance.user_dir}" in log  # each pack's own state
            assert (instance.user_dir / "comfyui.db").is_file()
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
