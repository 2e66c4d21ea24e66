"""The fake ComfyUI against the recorded ComfyUI 0.3.64 transcript: same routes, shapes and frame order."""

import io
import json
import uuid
from pathlib import Path

import aiohttp
import pytest
from PIL import Image

from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.graphs import FLUX

TRANSCRIPT = json.loads((Path(__file__).parent / "comfyui-0.3.64-api-transcript.json").read_text())

# The recorded run1 graph, with the probe pack's nodes replaced by core ones of the same kind:
# node 2 is an output node that reports 3 progress steps, 3 and 4 are further output nodes.
RUN1_LIKE = {
    "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 48, "batch_size": 1, "color": 16711680}},
    "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "probe"}},
    "3": {"class_type": "CourierTelegramOutput", "inputs": {"images": ["1", 0], "filename_prefix": "probe"}},
    "4": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}},
}


def shape(frame: dict) -> tuple:
    """What must match between recorded and fake frames: type, data keys, and the telling values."""
    data = frame["data"]
    detail = None
    if frame["type"] == "status":
        detail = (data["status"]["exec_info"]["queue_remaining"], "sid" in data)
    elif frame["type"] == "progress_state":
        detail = tuple(sorted(
            (tuple(sorted(n)), n["state"]) for n in data["nodes"].values()))
    elif frame["type"] == "executing":
        detail = data["node"] is None
    elif frame["type"] == "execution_cached":
        detail = len(data["nodes"])
    return frame["type"], tuple(sorted(data)), detail


def recorded(key: str) -> list[dict]:
    return [f for f in TRANSCRIPT[key][1:] if "type" in f and not f["type"].startswith("probe_pack.")]


@pytest.fixture
async def fake():
    async with FakeComfyUI(steps=3, progress_class="SaveImage") as server:
        yield server


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


async def record_run(fake: FakeComfyUI, http: aiohttp.ClientSession, workflow: dict,
                     with_client_id: bool = True) -> tuple[dict, list[dict]]:
    """Queue ``workflow`` like the recording client did and collect the frames its websocket got."""
    listener = uuid.uuid4().hex
    frames = []
    async with http.ws_connect(f"{fake.url}/ws", params={"clientId": listener}) as ws:
        await ws.send_json({"type": "feature_flags", "data": {"supports_preview_metadata": True}})
        body = {"prompt": workflow, **({"client_id": listener} if with_client_id else {})}
        async with http.post(f"{fake.url}/prompt", json=body) as resp:
            assert resp.status == 200, await resp.text()
            reply = await resp.json()
        started = False
        async for msg in ws:
            frame = json.loads(msg.data)
            frames.append(frame)
            remaining = frame["data"].get("status", {}).get("exec_info", {}).get("queue_remaining")
            started = started or remaining == 1
            if frame["type"] == "executing" and frame["data"]["node"] is None:
                break
            if not with_client_id and started and remaining == 0:
                break
    return reply, frames


async def test_run_frames_match_the_recording(fake, http):
    reply, frames = await record_run(fake, http, RUN1_LIKE)
    assert reply.keys() == TRANSCRIPT["run1_ws"][0]["_post_prompt_resp"].keys()
    assert [shape(f) for f in frames] == [shape(f) for f in recorded("run1_ws")]
    progress = [f["data"] for f in frames if f["type"] == "progress"]
    assert [(p["value"], p["max"], p["node"]) for p in progress] == [(1, 3, "2"), (2, 3, "2"), (3, 3, "2")]
    assert {f["data"]["prompt_id"] for f in frames if "prompt_id" in f["data"]} == {reply["prompt_id"]}


async def test_cached_rerun_frames_match_the_recording(fake, http):
    await record_run(fake, http, RUN1_LIKE)
    _, frames = await record_run(fake, http, RUN1_LIKE)
    assert [shape(f) for f in frames] == [shape(f) for f in recorded("run2_cached_ws")]


async def test_loadimage_preview_frames_match_the_recording(fake, http):
    fake.steps = 0
    form = aiohttp.FormData()
    form.add_field("image", _png((32, 32, 32)), filename="probe_up.png")
    form.add_field("subfolder", "probe")
    async with http.post(f"{fake.url}/upload/image", data=form) as resp:
        assert await resp.json() == TRANSCRIPT["upload_image"]["json"]
    workflow = {"1": {"class_type": "LoadImage", "inputs": {"image": "probe/probe_up.png"}},
                "2": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}}}
    _, frames = await record_run(fake, http, workflow)
    assert [shape(f) for f in frames] == [shape(f) for f in recorded("run4_loadimage_preview_ws")]
    executed = next(f["data"]["output"]["images"][0] for f in frames if f["type"] == "executed")
    assert executed["type"] == "temp" and executed["filename"].startswith("ComfyUI_temp_")


async def test_without_client_id_only_progress_and_status_are_seen(fake, http):
    _, frames = await record_run(fake, http, RUN1_LIKE, with_client_id=False)
    seen = {f["type"] for f in frames}
    assert seen == {f["type"] for f in recorded("run3_no_client_id_ws")}
    assert not seen & {"execution_start", "executing", "executed", "execution_success"}


async def test_history_matches_the_recording(fake, http):
    reply, _ = await record_run(fake, http, RUN1_LIKE)
    prompt_id = reply["prompt_id"]
    async with http.get(f"{fake.url}/history/{prompt_id}") as resp:
        entry = (await resp.json())[prompt_id]
    want = next(iter(TRANSCRIPT["history_pid"].values()))
    assert entry.keys() == want.keys()
    assert entry["status"].keys() == want["status"].keys()
    assert [m[0] for m in entry["status"]["messages"]] == [m[0] for m in want["status"]["messages"]]
    assert (entry["status"]["status_str"], entry["status"]["completed"]) == ("success", True)
    assert len(entry["prompt"]) == 5 and entry["prompt"][1] == prompt_id and entry["prompt"][2] == RUN1_LIKE
    assert entry["outputs"]["2"] == {"images": [{"filename": "probe_00001_.png", "subfolder": "", "type": "output"}]}
    assert entry["meta"]["2"].keys() == want["meta"]["3"].keys()
    async with http.get(f"{fake.url}/history/no-such-prompt") as resp:
        assert await resp.json() == {}


async def test_rejections_match_the_recording(fake, http):
    cases = [("missing_model_prompt", FLUX),
             ("unknown_node_prompt", {"1": {"class_type": "NoSuchNode", "inputs": {}}}),
             ("invalid_prompt", {"1": {"class_type": "SaveImage", "inputs": {"filename_prefix": "x"}}})]
    for key, workflow in cases:
        async with http.post(f"{fake.url}/api/prompt", json={"prompt": workflow}) as resp:
            assert resp.status == TRANSCRIPT[key]["status"] == 400
            assert _sorted_errors(await resp.json()) == _sorted_errors(TRANSCRIPT[key]["json"]), key


def _sorted_errors(reply: dict) -> dict:
    """ComfyUI walks inputs in set order, so the order of a node's errors varies; compare them sorted."""
    for entry in reply["node_errors"].values():
        entry["errors"].sort(key=lambda e: e["details"])
    return reply


async def test_more_rejections_as_comfyui_words_them(fake, http):
    workflow = {"1": {"class_type": "LoadImage", "inputs": {"image": "nope.png"}},
                "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}},
                "3": {"class_type": "SaveImage", "inputs": {"images": ["9", 0], "filename_prefix": "x"}}}
    async with http.post(f"{fake.url}/prompt", json={"prompt": workflow}) as resp:
        reply = await resp.json()
    assert reply["node_errors"]["1"]["errors"] == [{
        "type": "custom_validation_failed", "message": "Custom validation failed for node",
        "details": "image - Invalid image file: nope.png", "extra_info": {"input_name": "image"}}]
    assert reply["node_errors"]["3"]["errors"][0]["type"] == "exception_during_validation"
    async with http.post(f"{fake.url}/prompt", json={"prompt": {"1": RUN1_LIKE["1"]}}) as resp:
        assert (await resp.json())["error"]["type"] == "prompt_no_outputs"
    async with http.post(f"{fake.url}/prompt", json={}) as resp:
        assert (await resp.json())["error"]["type"] == "no_prompt"


async def test_routes_reply_like_the_recording(fake, http):
    async with http.get(f"{fake.url}/queue") as resp:
        assert await resp.json() == TRANSCRIPT["queue"]
    async with http.post(f"{fake.url}/interrupt") as resp:
        assert resp.status == TRANSCRIPT["interrupt_status"]
    async with http.post(f"{fake.url}/free", json={"unload_models": True}) as resp:
        assert resp.status == TRANSCRIPT["free_status"]
    async with http.get(f"{fake.url}/api/object_info/SaveImage") as resp:
        info = (await resp.json())["SaveImage"]
    assert info.keys() == TRANSCRIPT["object_info_ProbeNode"]["ProbeNode"].keys()
    assert info["output_node"] is True and info["input_order"]["required"] == ["images", "filename_prefix"]
    async with http.get(f"{fake.url}/object_info/NoSuchNode") as resp:
        assert await resp.json() == {}
    async with http.get(f"{fake.url}/system_stats") as resp:
        stats = await resp.json()
    assert stats["system"]["comfyui_version"] == "0.3.64" and stats["devices"][0]["type"] == "cpu"


async def test_view_serves_real_pngs(fake, http):
    await record_run(fake, http, RUN1_LIKE)
    async with http.get(f"{fake.url}/view", params={"filename": "probe_00001_.png", "type": "output"}) as resp:
        assert (resp.status, resp.content_type) == (TRANSCRIPT["view"]["status"], TRANSCRIPT["view"]["ctype"])
        image = Image.open(io.BytesIO(await resp.read()))
    assert image.size == (64, 48) and image.getpixel((0, 0)) == (255, 0, 0)
    async with http.get(f"{fake.url}/view", params={"filename": "missing.png"}) as resp:
        assert resp.status == 404
    async with http.get(f"{fake.url}/view", params={"filename": "../etc/passwd"}) as resp:
        assert resp.status == 400


async def test_upload_without_overwrite_renames_like_comfyui(fake, http):
    async def upload(data: bytes, overwrite: str) -> dict:
        form = aiohttp.FormData()
        form.add_field("image", data, filename="a.png")
        form.add_field("overwrite", overwrite)
        async with http.post(f"{fake.url}/upload/image", data=form) as resp:
            return await resp.json()

    assert (await upload(b"one", "false"))["name"] == "a.png"
    assert (await upload(b"one", "false"))["name"] == "a.png"  # same bytes: a duplicate, not renamed
    assert (await upload(b"two", "false"))["name"] == "a (1).png"
    assert (await upload(b"three", "true"))["name"] == "a.png"
    assert fake.files[("input", "", "a.png")] == b"three"


async def test_records_what_it_received(fake, http):
    await record_run(fake, http, RUN1_LIKE)
    assert fake.prompts[0]["prompt"] == RUN1_LIKE
    assert [(r.method, r.path) for r in fake.requests[:2]] == [("GET", "/ws"), ("POST", "/prompt")]


def _png(rgb: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (8, 8), rgb).save(out, format="PNG")
    return out.getvalue()
