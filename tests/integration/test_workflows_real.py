"""The shipped command workflows against a real ComfyUI (COMFYUI_DIR, started --cpu).

Every command of commands.json validates against the real ``/object_info``: node classes exist,
required inputs are there, values have the input's type and range (or are one of its choices; a
loader's choice may be the manifest's model file, absent here), links come from outputs of the
type the input takes. The weight-free commands (demo, demoedit, upscale) run to the end and produce an image.
The model commands have no weights here, so ComfyUI must reject them at
validation with nothing but ``value_not_in_list`` on their loaders, naming
exactly the manifest's model files: every other node, link and value of the
converted graphs is valid. The editor (UI-format) templates, workflows/*.json, run as saved:
their widget values are read by position in the order this ComfyUI's /object_info gives.
"""

import io
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from comfyui_courier.jobs.model_graph import checkpoint_of
from comfyui_courier.jobs.options import declared
from comfyui_courier.jobs.workflow import requires_image

API_DIR = Path(__file__).resolve().parents[2] / "workflows" / "api"
MANIFEST = json.loads((API_DIR / "commands.json").read_text(encoding="utf-8"))
MODEL_COMMANDS = [name for name, entry in MANIFEST.items() if entry["models"]]
INPUT, OUTPUT = "CourierTelegramInput", "CourierTelegramOutput"
LOADER_INPUTS = {
    "CheckpointLoaderSimple": {"ckpt_name"}, "UNETLoader": {"unet_name"},
    "DualCLIPLoader": {"clip_name1", "clip_name2"}, "CLIPLoader": {"clip_name"},
    "VAELoader": {"vae_name"}, "LoraLoaderModelOnly": {"lora_name"},
}
RUN_S, HTTP_S = 120.0, 30.0
TEMPLATES = sorted(path.stem for path in API_DIR.parent.glob("*.json"))
WIDGET_TYPES = ("INT", "FLOAT", "STRING", "BOOLEAN", "COMBO")


@pytest.fixture
def server(comfyui):
    """The session's real ComfyUI with the pack (tests/fixtures/comfyui.py); skips without COMFYUI_DIR."""
    return comfyui


def _request(server, method, path, body=None, headers=None):
    req = urllib.request.Request(server.url + path, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=HTTP_S) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _json(server, method, path, payload=None):
    body = None if payload is None else json.dumps(payload).encode()
    status, data = _request(server, method, path, body, {"Content-Type": "application/json"})
    return status, json.loads(data)


def upload_png(server, image: Image.Image) -> str:
    """POST /upload/image as the bot does; returns the name the Input node's ``image`` takes."""
    png = io.BytesIO()
    image.save(png, format="PNG")
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="wf-{boundary[:8]}.png"\r\n'
        "Content-Type: image/png\r\n\r\n".encode() + png.getvalue() + b"\r\n",
        f'--{boundary}\r\nContent-Disposition: form-data; name="type"\r\n\r\ninput\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="subfolder"\r\n\r\ncourier\r\n'.encode(),
        f"--{boundary}--\r\n".encode(),
    ]
    status, data = _request(server, "POST", "/upload/image", b"".join(parts),
                            {"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert status == 200, data
    reply = json.loads(data)
    return f"{reply['subfolder']}/{reply['name']}" if reply["subfolder"] else reply["name"]


def job(name, *, prompt, seed, image=""):
    """The command's workflow filled in as the bot fills it for one job."""
    workflow = json.loads((API_DIR / MANIFEST[name]["file"]).read_text(encoding="utf-8"))
    (node,) = [n for n in workflow.values() if n["class_type"] == INPUT]
    node["inputs"].update(prompt=prompt, seed=seed, image=image, chat_id="42", user_id="7")
    return workflow


def run_to_end(server, workflow):
    status, reply = _json(server, "POST", "/prompt", {"prompt": workflow, "client_id": uuid.uuid4().hex})
    assert status == 200 and reply["node_errors"] == {}, reply
    prompt_id = reply["prompt_id"]
    deadline = time.monotonic() + RUN_S
    while time.monotonic() < deadline:
        _, history = _json(server, "GET", f"/history/{prompt_id}")
        entry = history.get(prompt_id)
        if entry and entry["status"].get("completed") is not None and entry["status"]["status_str"] != "running":
            errors = [data for kind, data in entry["status"]["messages"] if kind == "execution_error"]
            assert entry["status"]["status_str"] == "success", [
                f"{e['node_type']} {e['node_id']}: {e['exception_type']}: {e['exception_message']}" for e in errors]
            return entry
        time.sleep(0.2)
    raise TimeoutError(f"prompt {prompt_id} did not finish within {RUN_S:.0f} s")


def output_image(server, workflow, entry) -> Image.Image:
    (output_id,) = [i for i, n in workflow.items() if n["class_type"] == OUTPUT]
    (ref,) = entry["outputs"][output_id]["images"]
    query = urllib.parse.urlencode({k: ref[k] for k in ("filename", "subfolder", "type")})
    status, data = _request(server, "GET", f"/view?{query}")
    assert status == 200
    return Image.open(io.BytesIO(data))


_object_info: dict[str, dict] = {}


def object_info(server) -> dict:
    """The server's ``/object_info`` (read once per server: it is megabytes)."""
    if server.url not in _object_info:
        status, info = _json(server, "GET", "/object_info")
        assert status == 200 and INPUT in info and OUTPUT in info, status
        _object_info[server.url] = info
    return _object_info[server.url]


def takes(received: str, wanted: str) -> bool:
    """Whether an output of type ``received`` may feed an input of type ``wanted`` (ComfyUI's rule:
    ``*`` takes anything, "A,B" lists take any overlap)."""
    mine, theirs = ({t.strip() for t in kind.split(",")} for kind in (received, wanted))
    return "*" in mine | theirs or bool(mine & theirs)


def value_problem(value, kind, extra: dict, models: set[str]) -> str | None:
    """Why a literal ``value`` cannot go to an input of ``kind``; None if it can."""
    choices = kind if isinstance(kind, list) else extra.get("options") if kind == "COMBO" else None
    if choices is not None:
        return None if value in choices or value in models else f"{value!r} is not one of its choices"
    checks = {"INT": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "FLOAT": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
              "STRING": lambda v: isinstance(v, str), "BOOLEAN": lambda v: isinstance(v, bool)}
    if kind not in checks:
        return f"a {kind} input needs a link, not the value {value!r}"
    if not checks[kind](value):
        return f"{value!r} is not a {kind}"
    if kind in ("INT", "FLOAT") and not extra.get("min", value) <= value <= extra.get("max", value):
        return f"{value} is outside {extra.get('min')}..{extra.get('max')}"
    return None


def graph_problems(workflow: dict, info: dict, models: set[str]) -> list[str]:
    """What ComfyUI's validation would object to in ``workflow``, read off ``info`` (/object_info)."""
    found = []
    for node_id, node in workflow.items():
        schema = info.get(node["class_type"])
        if schema is None:
            found.append(f"{node_id}: no node class {node['class_type']}")
            continue
        declared = {**schema["input"].get("optional", {}), **schema["input"].get("required", {})}
        found += [f"{node_id}.{name}: required input missing" for name in schema["input"].get("required", {})
                  if name not in node["inputs"]]
        found += [f"{node_id}.{name}: {node['class_type']} has no such input" for name in node["inputs"]
                  if name not in declared and name not in schema["input"].get("hidden", {})]
        for name, value in node["inputs"].items():
            if name not in declared:
                continue
            kind, extra = declared[name][0], (declared[name][1] if len(declared[name]) > 1 else {})
            if isinstance(value, list):
                source, index = value
                outputs = info.get(workflow.get(source, {}).get("class_type"), {}).get("output", [])
                if index >= len(outputs):
                    found.append(f"{node_id}.{name}: no output {index} on node {source}")
                elif isinstance(kind, list) or not takes(outputs[index], kind):
                    found.append(f"{node_id}.{name}: takes {kind}, gets {outputs[index]} from {source}[{index}]")
            elif problem := value_problem(value, kind, extra, models):
                found.append(f"{node_id}.{name}: {problem}")
    return found


def editor_prompt(graph: dict, info: dict) -> dict:
    """A saved editor graph as the editor queues it: each node's widget values by position, in the
    order of ``info``'s input_order (a seed's "randomize" right after it, not sent), links by the link table."""
    links = {link[0]: [str(link[1]), link[2]] for link in graph["links"]}
    prompt = {}
    for node in graph["nodes"]:
        schema = info[node["type"]]
        names = []
        for part in ("required", "optional"):
            for name in schema["input_order"].get(part, []):
                kind, *extra = schema["input"][part][name]
                if isinstance(kind, list) or kind in WIDGET_TYPES:
                    names += [name, None] if extra and extra[0].get("control_after_generate") else [name]
        values = zip(names, node.get("widgets_values") or [], strict=True)
        inputs = {name: value for name, value in values if name is not None}
        inputs |= {put["name"]: links[put["link"]] for put in node.get("inputs", []) if put.get("link") is not None}
        prompt[str(node["id"])] = {"class_type": node["type"], "inputs": inputs}
    return prompt


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_saved_editor_graph_runs_as_saved(server, name):
    graph = json.loads((API_DIR.parent / f"{name}.json").read_text(encoding="utf-8"))
    workflow = editor_prompt(graph, object_info(server))
    seed = json.loads((API_DIR / f"{name}.json").read_text(encoding="utf-8"))
    for node_id, node in seed.items():  # each value lands on the input the API-format seed gives it
        assert {key: workflow[node_id]["inputs"].get(key) for key in node["inputs"]} == node["inputs"], node_id
    picture = output_image(server, workflow, run_to_end(server, workflow))
    assert picture.format == "PNG" and picture.size == (512, 512)


@pytest.mark.parametrize("name", list(MANIFEST))
def test_every_shipped_workflow_validates_against_object_info(server, name):
    models = {model["name"] for model in MANIFEST[name]["models"]}
    workflow = job(name, prompt="an astronaut riding a horse", seed=2**64 - 1)
    if "model" in declared(MANIFEST[name]["options"]):  # /img: the user's --model replaces the graph's stand-in
        models.add(checkpoint_of(workflow))
    assert graph_problems(workflow, object_info(server), models) == []


def test_the_object_info_check_finds_what_comfyui_would_refuse(server):
    workflow = job("demo", prompt="x", seed=0)
    (input_id,) = [i for i, n in workflow.items() if n["class_type"] == INPUT]
    (output_id,) = [i for i, n in workflow.items() if n["class_type"] == OUTPUT]
    broken = json.loads(json.dumps(workflow))
    broken[input_id]["inputs"]["width"] = 10**6
    broken[input_id]["inputs"]["seed"] = "seven"
    broken[output_id]["inputs"]["images"] = [input_id, 0]  # the prompt, a STRING
    broken["99"] = {"class_type": "NoSuchNode", "inputs": {}}
    problems = graph_problems(broken, object_info(server), set())
    assert len(problems) == 4, problems
    assert any("width: 1000000 is outside" in p for p in problems)
    assert any("seed: 'seven' is not a INT" in p for p in problems)
    assert any("images: takes IMAGE, gets STRING" in p for p in problems)
    assert any("no node class NoSuchNode" in p for p in problems)


def test_demo_renders_the_prompt_card(server):
    workflow = job("demo", prompt="a lighthouse at dusk", seed=12345)
    picture = output_image(server, workflow, run_to_end(server, workflow))
    assert picture.format == "PNG" and picture.size == (512, 512)
    pixels = np.asarray(picture.convert("RGB"))
    assert pixels.std() > 5  # a card with text, not a blank


def test_demoedit_inverts_the_users_image(server):
    rng = np.random.default_rng(7)
    original = rng.integers(0, 256, size=(48, 64, 3), dtype=np.uint8)
    name = upload_png(server, Image.fromarray(original, "RGB"))
    workflow = job("demoedit", prompt="invert it", seed=1, image=name)
    picture = output_image(server, workflow, run_to_end(server, workflow))
    assert picture.size == (64, 48)
    result = np.asarray(picture.convert("RGB")).astype(int)
    # ComfyUI images are floats in 0..1; writing 8 bits truncates as SaveImage does, so 1 - x
    # may land one step low. Anything more would be a lossy path (JPEG, a resize, a colour shift).
    assert np.abs(result - (255 - original.astype(int))).max() <= 1


def test_upscale_doubles_the_users_image_without_a_model(server):
    ys, xs = np.mgrid[0:30, 0:50]
    ramps = np.stack([xs * 5, ys * 8, (xs + ys) * 3], axis=-1).astype(np.uint8)  # smooth: sharpening keeps it
    original = Image.fromarray(ramps, "RGB")
    workflow = job("upscale", prompt="", seed=1, image=upload_png(server, original))
    picture = output_image(server, workflow, run_to_end(server, workflow))
    assert picture.size == (100, 60)
    lanczos = np.asarray(original.resize((100, 60), Image.Resampling.LANCZOS)).astype(int)
    assert np.abs(np.asarray(picture.convert("RGB")).astype(int) - lanczos).mean() < 4  # the picture, larger


@pytest.mark.parametrize("name", MODEL_COMMANDS)
def test_model_command_fails_only_for_its_missing_model_files(server, name):
    image = ""
    if requires_image(job(name, prompt="", seed=0)):
        image = upload_png(server, Image.new("RGB", (96, 64), (200, 30, 30)))
    workflow = job(name, prompt="an astronaut riding a horse", seed=2**64 - 1, image=image)
    status, reply = _json(server, "POST", "/prompt", {"prompt": workflow, "client_id": uuid.uuid4().hex})
    assert status == 400, reply
    assert reply["error"]["type"] == "prompt_outputs_failed_validation", reply["error"]
    named = set()
    for node_id, failure in reply["node_errors"].items():
        class_type = workflow[node_id]["class_type"]
        assert failure["class_type"] == class_type
        assert class_type in LOADER_INPUTS, f"{class_type} {node_id}: {failure['errors']}"
        for error in failure["errors"]:
            assert error["type"] == "value_not_in_list", error
            info = error["extra_info"]
            assert info["input_name"] in LOADER_INPUTS[class_type]
            assert info["received_value"] == workflow[node_id]["inputs"][info["input_name"]]
            named.add(info["received_value"])
    assert named == {model["name"] for model in MANIFEST[name]["models"]}
