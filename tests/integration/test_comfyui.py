"""The pack inside a real ComfyUI (``COMFYUI_DIR``): nodes, routes, frontend, log."""

import io
import json
import logging
import signal
import time

import comfyui_courier
from comfyui_courier.core.logs import get_logger
from comfyui_courier.tests.fixtures.comfyui import PACK_ROOT
from comfyui_courier.tests.integration._log import pack_problems, traceback_blocks
from comfyui_courier.tests.support.fake_comfyui import PACK_OBJECT_INFO

HEALTH_STATES = {"ok", "off", "starting", "error"}
HEALTH_DEADLINE_S = 60.0
PACK_NODES = {"CourierTelegramInput": "Telegram Input (Courier)", "CourierTelegramOutput": "Telegram Output (Courier)",
              "CourierDeviceAssign": "Device Assign (Courier)", "CourierBenchmark": "Benchmark (Courier)"}


def wait_for_health(server, component, deadline_s=HEALTH_DEADLINE_S):
    """/courier/health once ``component`` is ok or error (or the deadline passed).

    The pack boots its services in the background after ComfyUI is ready, so a
    component reads "off"/"not started", then "starting", before it settles.
    """
    deadline = time.monotonic() + deadline_s
    while True:
        health = server.get_json("/courier/health")
        state = health.get("components", {}).get(component, {}).get("state")
        if state in ("ok", "error") or time.monotonic() > deadline:
            return health
        time.sleep(0.2)


def test_object_info_lists_every_node_of_the_pack(comfyui):
    """The four nodes, registered through comfy_entrypoint (v3), under the ids saved graphs name."""
    object_info = comfyui.get_json("/object_info")
    assert set(PACK_NODES) <= set(object_info), f"missing: {sorted(set(PACK_NODES) - set(object_info))}"
    for name, display_name in PACK_NODES.items():
        info = object_info[name]
        assert info["python_module"] == f"custom_nodes.{comfyui.pack_folder_name}", info
        assert info["display_name"] == display_name


def test_the_test_double_shows_the_telegram_nodes_as_comfyui_does(comfyui):
    """tests/support/pack_object_info.json, which the fake ComfyUI serves, is this ComfyUI's answer."""
    object_info = comfyui.get_json("/object_info")
    for name, saved in PACK_OBJECT_INFO.items():
        served = {**object_info[name], "python_module": saved["python_module"]}
        assert served == saved, f"write this into pack_object_info.json: {json.dumps({name: served}, indent=1)}"


def test_health_reports_every_component_and_the_embedded_database_ok(comfyui):
    health = wait_for_health(comfyui, "database")
    assert health["version"] == comfyui_courier.__version__
    components = health["components"]
    assert {"database", "bot", "anyone"} <= set(components)
    for name, component in components.items():
        assert component["state"] in HEALTH_STATES, (name, component)
        assert isinstance(component.get("reason"), str), (name, component)
    assert components["database"]["state"] == "ok", components["database"]
    assert components["database"]["reason"].startswith("embedded PostgreSQL in /"), components["database"]


def test_health_is_also_served_under_api(comfyui):
    status, body = comfyui.get("/api/courier/health")
    assert status == 200, body[:300]
    assert json.loads(body)["version"] == comfyui_courier.__version__


def test_frontend_extension_is_listed_once_and_served(comfyui):
    js_dir = PACK_ROOT / "js"
    ours = sorted(p.relative_to(js_dir).as_posix() for p in js_dir.rglob("*.js"))
    assert ours, "js/ holds no .js file"
    listed = comfyui.get_json("/extensions")
    prefix = f"/extensions/{comfyui.pack_folder_name}/"
    assert sorted(url[len(prefix):] for url in listed if url.startswith(prefix)) == ours
    for name in ours:
        # WEB_DIRECTORY and [tool.comfy].web together would list each file twice
        assert [url for url in listed if url.endswith("/" + name)] == [prefix + name]
        status, body = comfyui.get(prefix + name)
        assert status == 200
        assert body == (js_dir / name).read_bytes()


def test_log_scanner_finds_our_traceback_and_ignores_comfyuis():
    log = "\n".join([
        "Traceback (most recent call last):",
        '  File "/c/comfy_extras/nodes_audio.py", line 4, in <module>',
        "ModuleNotFoundError: No module named 'torchaudio'",
        "IMPORT FAILED: nodes_audio.py",
        "Traceback (most recent call last):",
        '  File "/b/custom_nodes/X-Courier/store/pool.py", line 9, in start',
        "    raise OSError('boom')",
        "OSError: boom",
        "   0.1 seconds (IMPORT FAILED): /b/custom_nodes/X-Courier",
        "/b/custom_nodes/X-Courier/bot/app.py:3: DeprecationWarning: old",
        "   0.0 seconds: /b/custom_nodes/X-Courier",
    ])
    assert len(traceback_blocks(log)) == 2
    problems = pack_problems(log, ["X-Courier"])
    assert len(problems) == 3
    assert problems[0].endswith("OSError: boom")
    assert "IMPORT FAILED" in problems[1] and "DeprecationWarning" in problems[2]


def test_log_scanner_finds_every_warning_of_our_logger_and_no_venv_warning():
    """ComfyUI logs bare messages: our logger's prefix must carry the level for a warning or
    error of ours to be found, whatever its words; a venv inside the clone is not the pack."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))  # ComfyUI's format
    logger = logging.getLogger("courier")
    logger.addHandler(handler)
    try:
        get_logger("test").info("started embedded PostgreSQL 18 in /x")
        get_logger("test").warning("the socket is busy")
        get_logger("test").error("off: courier.toml: unknown setting 'oops'")
    finally:
        logger.removeHandler(handler)
    log = out.getvalue() + "\n".join([
        "/x/comfyui-courier/.venv/lib/python3.11/site-packages/av/__init__.py:2: DeprecationWarning: old",
        "/x/comfyui-courier/bot/app.py:3: DeprecationWarning: ours",
    ])
    assert pack_problems(log, ["comfyui-courier"]) == [
        "[Courier] WARNING the socket is busy",
        "[Courier] ERROR off: courier.toml: unknown setting 'oops'",
        "/x/comfyui-courier/bot/app.py:3: DeprecationWarning: ours",
    ]


def test_a_warning_of_the_pack_in_a_real_comfyui_log_is_found(comfyui_factory):
    server = comfyui_factory(start=False)
    server.prepare()
    (server.user_directory / "courier.toml").write_text("oops = 1\n")
    server.start()
    assert wait_for_health(server, "database")["components"]["database"]["state"] == "error"
    problems = pack_problems(server.log_text(), [server.pack_folder_name])
    assert [line for line in problems if "unknown setting 'oops'" in line], server.log_tail(60)


def test_comfyui_without_the_pack_has_no_courier_routes(comfyui_factory):
    server = comfyui_factory(with_pack=False)
    assert server.get("/courier/health")[0] == 404
    assert not set(PACK_NODES) & set(server.get_json("/object_info"))


def database_up(server) -> int:
    """Wait until the pack's database is ok; the pid of its postmaster, which is running."""
    database = wait_for_health(server, "database")["components"]["database"]
    assert database["state"] == "ok", database
    pid = server.postmaster_pid()
    assert pid is not None and pid in server.leftover_processes(), "no postmaster found"
    return pid


def test_pack_starts_and_stops_on_ctrl_c_cleanly(comfyui_factory):
    """A fresh server (the session's log has other tests in it): from start to Ctrl-C, the log
    shows no import error, traceback or warning of ours, and nothing we started survives."""
    server = comfyui_factory(env={"PYTHONWARNINGS": "default"})  # show our DeprecationWarnings
    postmaster = database_up(server)
    code = server.signal_and_wait(signal.SIGINT, group=True)  # what a terminal's Ctrl-C does
    assert code is not None, f"ComfyUI did not exit on Ctrl-C\n{server.log_tail(60)}"
    assert server.wait_for_no_leftovers(also=(postmaster,)) == [], "the pack left processes running after Ctrl-C"
    log = server.log_text()
    assert f"custom_nodes/{server.pack_folder_name}" in log, "ComfyUI did not try to load the pack"
    markers = [server.pack_folder_name, str(PACK_ROOT), "courier"]
    assert pack_problems(log, markers) == [], server.log_tail(120)


def test_sigterm_stops_comfyui_and_everything_the_pack_started(comfyui_factory):
    """What systemd and ``docker stop`` send, to ComfyUI alone: it runs no cleanup of ours."""
    server = comfyui_factory()
    postmaster = database_up(server)
    assert server.signal_and_wait(signal.SIGTERM) == -signal.SIGTERM, "ComfyUI did not exit on SIGTERM"
    assert server.wait_for_no_leftovers(also=(postmaster,)) == [], "the pack left processes running after SIGTERM"
