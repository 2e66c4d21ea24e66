"""Device Assign and the Benchmark node in a real ComfyUI (``COMFYUI_DIR``), weight-free."""

import json
import re
import time
import urllib.error
import urllib.request
import uuid

from comfyui_courier.tests.integration.test_comfyui import wait_for_health

SESSION_DEADLINE_S = 180.0


def weight_free(device: str, benchmark: dict | None = None) -> dict:
    """An image through ComfyUI's weight-free pixel-space VAE, placed by Device Assign."""
    prompt = {
        "1": {"class_type": "EmptyImage", "inputs": {"width": 256, "height": 256, "batch_size": 1,
                                                      "color": 0x336699}},
        "2": {"class_type": "ImageBlur", "inputs": {"image": ["1", 0], "blur_radius": 5, "sigma": 2.0}},
        "3": {"class_type": "VAELoader", "inputs": {"vae_name": "pixel_space"}},
        "4": {"class_type": "CourierDeviceAssign", "inputs": {"device": device, "vae": ["3", 0]}},
        "5": {"class_type": "VAEEncode", "inputs": {"pixels": ["2", 0], "vae": ["4", 2]}},
        "6": {"class_type": "VAEDecodeTiled", "inputs": {"samples": ["5", 0], "vae": ["4", 2], "tile_size": 128,
                                                         "overlap": 32, "temporal_size": 64,
                                                         "temporal_overlap": 8}},
        "7": {"class_type": "PreviewImage", "inputs": {"images": ["6", 0]}},
    }
    if benchmark is not None:
        prompt["20"] = {"class_type": "CourierBenchmark", "inputs": benchmark}
        prompt["21"] = {"class_type": "PreviewAny", "inputs": {"source": ["20", 0]}}
        prompt["22"] = {"class_type": "PreviewImage", "inputs": {"images": ["20", 1]}}
    return prompt


def post_prompt(server, prompt: dict) -> tuple[int, dict]:
    body = json.dumps({"prompt": prompt, "client_id": uuid.uuid4().hex}).encode()
    request = urllib.request.Request(server.url + "/prompt", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_for_report(server, workflow_name: str) -> tuple[dict, dict]:
    """(the report run's history entry, the whole history) once the session has reported."""
    deadline = time.monotonic() + SESSION_DEADLINE_S
    while time.monotonic() < deadline:
        history = server.get_json("/history?max_items=1000")
        for entry in history.values():
            text = entry["outputs"].get("21", {}).get("text", [""])[0]
            if f"Benchmark: {workflow_name}" in text:
                return entry, history
        time.sleep(0.3)
    raise AssertionError("no benchmark report in time\n" + server.log_tail())


def test_nodes_are_registered(comfyui):
    object_info = comfyui.get_json("/object_info")
    for name in ("CourierDeviceAssign", "CourierBenchmark"):
        assert name in object_info, f"{name} missing: list it in nodes/extension.py"
    assert object_info["CourierBenchmark"]["output_node"] is True
    kind, options = object_info["CourierDeviceAssign"]["input"]["required"]["device"]
    assert kind == "COMBO" and options["options"][:2] == ["auto", "cpu"]  # a v3 combo


def test_a_benchmark_session_runs_measures_and_stores(comfyui):
    assert wait_for_health(comfyui, "database")["components"]["database"]["state"] == "ok"
    name = f"weight-free {uuid.uuid4().hex[:6]}"
    status, answer = post_prompt(comfyui, weight_free("cpu", {"repeats": 2, "warmup": 1, "workflow_name": name,
                                                              "host": "ci", "save": True}))
    assert status == 200, answer
    report_entry, history = wait_for_report(comfyui, name)
    text = report_entry["outputs"]["21"]["text"][0]
    assert "2 measured runs after 1 warm-up" in text
    assert "host: ci" in text and re.search(r"stored as benchmark run \d+", text), text
    assert "CourierDeviceAssign" in text and "VAEDecodeTiled" in text and "it/s" in text
    assert len(report_entry["outputs"]["22"]["images"]) == 1  # the chart
    session_id = re.findall(r"Courier benchmark (\w+): run 1/3 ", comfyui.log_text())[-1]
    runs = [entry for entry in history.values()
            if entry["prompt"][2].get("20", {}).get("inputs", {}).get("courier_benchmark_run", "")
            .startswith(session_id)]
    assert len(runs) == 3 and all(entry["status"]["status_str"] == "success" for entry in runs)
    measured = re.findall(rf"Courier benchmark {session_id}: run [23]/3 ([\d.]+) s", comfyui.log_text())
    assert len(measured) == 2 and all(f"{float(t):.3f}" in text for t in measured)


def test_a_missing_device_is_refused_with_what_the_machine_has(comfyui):
    status, answer = post_prompt(comfyui, weight_free("cuda:99"))
    assert status == 400
    details = [error["details"] for error in answer["node_errors"]["4"]["errors"]]
    assert any(d.startswith("device - cuda:99 is not available: this machine has") for d in details), details
