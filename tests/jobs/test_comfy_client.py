"""ComfyClient against the fake ComfyUI, and the shared tests also against a real one.

The real ComfyUI runs when COMFYUI_DIR is set (interpreter: $COMFYUI_PYTHON,
<COMFYUI_DIR>/.venv/bin/python, or ours): a bare server, core nodes only, started once
for this module with ``--cpu`` on 127.0.0.1 and its own ``--base-directory``.
"""

import asyncio
import io
import random
import uuid

import aiohttp
import pytest
from PIL import Image

from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.jobs.comfy.events import EventStream
from comfyui_courier.jobs.comfy.records import Event, Preview, parse_preview
from comfyui_courier.jobs.errors import (
    BackendUnavailable,
    ExecutionFailed,
    Interrupted,
    Problem,
    PromptLost,
    PromptRejected,
    describe_error,
)
from comfyui_courier.jobs.model_sources import model_url
from comfyui_courier.tests.fixtures.comfyui import ComfyUIProcess, free_port
from comfyui_courier.tests.support.fake_comfyui import CORE_NODES, FakeComfyUI
from comfyui_courier.tests.support.graphs import FLUX
from comfyui_courier.tests.support.requires import require_comfyui


def invert_workflow(color: int, width: int = 64, height: int = 48) -> dict:
    return {
        "1": {"class_type": "EmptyImage", "inputs": {"width": width, "height": height, "batch_size": 1,
                                                     "color": color}},
        "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
        "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "courier_test"}},
    }


def telegram_workflow(image: str = "", width: int = 96, height: int = 64) -> dict:
    return {
        "1": {"class_type": "CourierTelegramInput", "inputs": {"command": "invert", "prompt": "a red fox", "seed": 7,
                                                               "width": width, "height": height, "image": image,
                                                               "chat_id": "42", "user_id": "42"}},
        "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 1]}},
        "3": {"class_type": "CourierTelegramOutput", "inputs": {"images": ["2", 0],
                                                                "filename_prefix": "courier/result"}},
    }


def png(rgb: tuple[int, int, int], size: tuple[int, int] = (20, 10)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, rgb).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def real_comfyui(tmp_path_factory):
    """Base URL of a real ComfyUI from $COMFYUI_DIR (no pack), for this module."""
    directory = require_comfyui()
    with ComfyUIProcess(directory, tmp_path_factory.mktemp("comfyui-base"), with_pack=False) as server:
        yield server.url


@pytest.fixture
async def fake():
    async with FakeComfyUI() as server:
        yield server


@pytest.fixture(params=["fake", "real"])
def backend(request, fake) -> str:
    """URL of the backend under test; knobs set on ``fake`` do nothing to the real one."""
    return fake.url if request.param == "fake" else request.getfixturevalue("real_comfyui")


@pytest.fixture
async def client(backend):
    async with ComfyClient(backend, poll_interval=0.05, retries=3) as comfy:
        yield comfy


@pytest.fixture
async def fake_client(fake):
    async with ComfyClient(fake.url, poll_interval=0.05, retries=3) as comfy:
        yield comfy


# --- the same behaviour from the fake and the real ComfyUI ----------------------------------------

async def test_run_reports_progress_and_returns_outputs(client, fake):
    color = random.randrange(1 << 24)
    seen = []
    result = await client.run_prompt(invert_workflow(color), on_progress=seen.append)

    nodes = [p.node for p in seen if p.node]
    assert list(dict.fromkeys(nodes)) == ["1", "2", "3"]
    assert next(p.node_type for p in seen if p.node == "2") == "ImageInvert"
    assert seen[-1].running and seen[-1].nodes_done == 2 and seen[-1].nodes_total == 3
    if client.base_url == fake.url:
        assert [(p.value, p.max) for p in seen if p.value] == [(1, 3), (2, 3), (3, 3)]
    [ref] = result.files
    assert (ref.node, ref.type, ref.subfolder) == ("3", "output", "")
    image = Image.open(io.BytesIO(await client.view(ref.filename, ref.subfolder, ref.type)))
    inverted = [255 - (color >> shift & 255) for shift in (16, 8, 0)]
    assert image.size == (64, 48)
    assert all(abs(got - want) <= 1  # float rounding
               for got, want in zip(image.getpixel((5, 5)), inverted, strict=True))
    assert result.execution_ms is not None and result.execution_ms >= 0
    entry = await client.history(result.prompt_id)
    assert (entry.status_str, entry.completed, entry.files) == ("success", True, result.files)


async def test_cached_rerun_still_returns_the_outputs(client):
    workflow = invert_workflow(random.randrange(1 << 24))
    first = await client.run_prompt(workflow)
    seen = []
    second = await client.run_prompt(workflow, on_progress=seen.append)
    assert second.prompt_id != first.prompt_id and second.files == first.files
    assert seen[-1].nodes_total == 0 and not [p for p in seen if p.node]


async def test_missing_model_files_are_summarised(client):
    with pytest.raises(PromptRejected) as info:
        await client.run_prompt(FLUX)
    assert sorted(p.render() for p in info.value.problems) == [
        f"Missing model file ae.safetensors (folder: vae) needed by VAELoader; download: {model_url('ae.safetensors')}",
        "Missing model file clip_l.safetensors (folder: text_encoders) needed by DualCLIPLoader; "
        f"download: {model_url('clip_l.safetensors')}",
        "Missing model file flux1-schnell.safetensors (folder: diffusion_models) needed by UNETLoader; "
        f"download: {model_url('flux1-schnell.safetensors')}",
        "Missing model file t5xxl_fp16.safetensors (folder: text_encoders) needed by DualCLIPLoader; "
        f"download: {model_url('t5xxl_fp16.safetensors')}",
    ]
    assert info.value.node_errors["1"]["class_type"] == "UNETLoader"


async def test_unknown_node_is_named(client):
    workflow = {**invert_workflow(0), "2": {"class_type": "NoSuchNode", "inputs": {"image": ["1", 0]}}}
    with pytest.raises(PromptRejected) as info:
        await client.queue_prompt(workflow, client_id="test")
    assert info.value.problems == [Problem("missing_node", {"node_type": "NoSuchNode"})]


async def test_node_exception_is_execution_failed(client):
    name = await client.upload_image(b"not an image", f"bad-{uuid.uuid4().hex}.png")
    workflow = {"1": {"class_type": "LoadImage", "inputs": {"image": name}},
                "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}}}
    prompt_id = str(uuid.uuid4())
    with pytest.raises(ExecutionFailed) as info:
        await client.run_prompt(workflow, prompt_id=prompt_id)
    assert (await client.history(prompt_id)).status_str == "error"  # raised once ComfyUI was done with it
    assert (info.value.node_id, info.value.node_type) == ("1", "LoadImage")
    assert info.value.exception_type == "PIL.UnidentifiedImageError"
    assert describe_error(info.value).startswith("LoadImage (node 1) failed: cannot identify image file")


async def test_interrupt_stops_the_run(client, fake):
    fake.progress_class, fake.step_delay = "ImageBlur", 60.0  # the fake blurs slowly until interrupted
    blur = {"blur_radius": 31, "sigma": 5.0}
    workflow = {
        "1": {"class_type": "EmptyImage", "inputs": {"width": 512, "height": 512, "batch_size": 1,
                                                     "color": random.randrange(1 << 24)}},
        "2": {"class_type": "ImageBlur", "inputs": {"image": ["1", 0], **blur}},
        "3": {"class_type": "ImageBlur", "inputs": {"image": ["2", 0], **blur}},
        "4": {"class_type": "SaveImage", "inputs": {"images": ["3", 0], "filename_prefix": "blur"}},
    }
    prompt_id = str(uuid.uuid4())
    interrupted = []

    async def on_progress(progress):
        if progress.node == "2" and not interrupted:
            interrupted.append(progress)
            await client.interrupt(prompt_id)

    with pytest.raises(Interrupted) as info:
        await client.run_prompt(workflow, on_progress=on_progress, prompt_id=prompt_id)
    assert info.value.node_type in ("ImageBlur", "SaveImage")
    assert (await client.history(prompt_id)).status_str == "error"


async def test_upload_view_and_plain_endpoints(client):
    data = png((1, 2, 3))
    name = await client.upload_image(data, f"up-{uuid.uuid4().hex}.png")
    subfolder, filename = name.split("/")
    assert subfolder == "courier"
    assert await client.view(filename, subfolder, "input") == data
    stats = await client.system_stats()
    assert stats.comfyui_version == "0.3.64" and stats.devices[0].type == "cpu" and stats.ram_total > 0
    info = await client.object_info("SaveImage")
    assert info["SaveImage"]["output_node"] is True
    assert await client.object_info("NoSuchNode") == {}
    queue = await client.queue()
    assert queue.running == [] and queue.pending == []
    assert await client.history(str(uuid.uuid4())) is None


async def test_events_stream_frames(client):
    client_id = uuid.uuid4().hex
    async with await EventStream.open(client, client_id) as stream:
        prompt_id = await client.queue_prompt(invert_workflow(random.randrange(1 << 24)), client_id)
        frames = []
        async for frame in stream:
            frames.append(frame)
            if frame.type == "executing" and frame.data["node"] is None:
                break
    assert all(isinstance(f, Event) for f in frames)
    assert frames[0].type == "status" and frames[0].data["sid"] == client_id
    kinds = [f.type for f in frames if f.data.get("prompt_id") == prompt_id]
    assert kinds[:2] == ["execution_start", "execution_cached"] and kinds[-2:] == ["execution_success", "executing"]


async def test_unreachable_backend():
    async with ComfyClient(f"http://127.0.0.1:{free_port()}", connect_timeout=5) as comfy:
        with pytest.raises(BackendUnavailable) as info:
            await comfy.run_prompt(invert_workflow(0))
        assert comfy.base_url in str(info.value)
        assert describe_error(info.value) == "The image server is not reachable right now"
        with pytest.raises(BackendUnavailable):
            await comfy.system_stats()


# --- the fake agrees with the real ComfyUI ----------------------------------------------------------

async def test_fake_node_schemas_match_real(real_comfyui, fake):
    async with ComfyClient(real_comfyui) as real_client, ComfyClient(fake.url) as fake_client:
        real, ours = await real_client.object_info(), await fake_client.object_info()
    for name in CORE_NODES:
        want, got = real[name], ours[name]
        for key in ("input_order", "output", "output_name", "output_node", "category", "python_module"):
            assert got[key] == want[key], (name, key)
        assert input_types(name, got) == input_types(name, want)


def input_types(name: str, info: dict) -> dict:
    """Each input's type; LoadImage's list of files differs between servers, so only its kind counts."""
    def kind(spec):
        return "COMBO" if name == "LoadImage" and isinstance(spec[0], list) else spec[0]

    return {group: inputs if group == "hidden" else {k: kind(v) for k, v in inputs.items()}
            for group, inputs in info["input"].items()}


async def test_fake_rejections_match_real(real_comfyui, fake):
    invalid = {
        "1": {"class_type": "LoadImage", "inputs": {"image": "nope.png"}},
        "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0], "filename_prefix": "x"}},
        "3": {"class_type": "PreviewImage", "inputs": {"images": ["4", 0]}},
        "4": {"class_type": "EmptyImage", "inputs": {"width": 0, "height": "abc", "batch_size": 1, "color": 0}},
        "5": {"class_type": "SaveImage", "inputs": {"images": ["9", 0], "filename_prefix": "x"}},
        "6": {"class_type": "SaveImage", "inputs": {"images": ["7", 0], "filename_prefix": "x"}},
        "7": {"class_type": "VAELoader", "inputs": {"vae_name": "pixel_space"}},
    }
    cases = [FLUX, invalid, {"1": {"class_type": "NoSuchNode", "inputs": {}}}, {"1": invert_workflow(0)["1"]}]
    async with aiohttp.ClientSession() as http:
        for workflow in cases:
            replies = []
            for url in (real_comfyui, fake.url):
                async with http.post(f"{url}/prompt", json={"prompt": workflow}) as resp:
                    replies.append((resp.status, normalized(await resp.json())))
            assert replies[0] == replies[1]


def normalized(reply: dict) -> dict:
    """Drop what legitimately differs: tracebacks, most tooltips (the fake leaves them out), and what
    hangs on ComfyUI's set iteration order: error order, and dependent_outputs (it lists every output
    validated after a node failed)."""
    for entry in reply.get("node_errors", {}).values():
        del entry["dependent_outputs"]
        entry["errors"].sort(key=lambda e: e["details"])
        for error in entry["errors"]:
            error["extra_info"].pop("traceback", None)
            config = error["extra_info"].get("input_config")
            if config and len(config) > 1:
                config[1].pop("tooltip", None)
    reply["error"]["details"] = sorted(reply["error"]["details"].split("\n"))
    return reply


async def test_fake_frames_match_real(real_comfyui, fake):
    fake.steps = 0  # core image nodes report no steps
    workflow = invert_workflow(random.randrange(1 << 24))
    shapes = []
    for url in (real_comfyui, fake.url):
        async with ComfyClient(url) as comfy:
            client_id = uuid.uuid4().hex
            async with await EventStream.open(comfy, client_id) as stream:
                await comfy.queue_prompt(workflow, client_id)
                frames = []
                async for frame in stream:
                    nodes = frame.data["nodes"].values() if frame.type == "progress_state" else []
                    states = [node["state"] for node in nodes]
                    frames.append((frame.type, sorted(frame.data), states))
                    if frame.type == "executing" and frame.data["node"] is None:
                        break
        shapes.append(frames)
    assert shapes[0] == shapes[1]


# --- what only the fake can stage ---------------------------------------------------------------------

async def test_telegram_input_image_is_used(fake_client):
    name = await fake_client.upload_image(png((10, 20, 30)), "in.png")
    result = await fake_client.run_prompt(telegram_workflow(image=name))
    [ref] = result.files
    assert (ref.subfolder, ref.filename) == ("courier", "result_00001_.png")
    image = Image.open(io.BytesIO(await fake_client.view(ref.filename, ref.subfolder, ref.type)))
    assert image.size == (20, 10) and image.getpixel((0, 0)) == (245, 235, 225)


async def test_telegram_input_without_image_renders_the_prompt(fake_client):
    result = await fake_client.run_prompt(telegram_workflow(width=96, height=64))
    [ref] = result.files
    image = Image.open(io.BytesIO(await fake_client.view(ref.filename, ref.subfolder, ref.type)))
    assert image.size == (96, 64)


async def test_queue_position_is_reported(fake, fake_client):
    fake.pause()
    await fake_client.queue_prompt(invert_workflow(1), client_id="someone-else")
    second_in_line = asyncio.Event()

    def on_progress(progress):
        if progress.ahead == 1:
            second_in_line.set()

    run = asyncio.create_task(fake_client.run_prompt(invert_workflow(2), on_progress=on_progress))
    await asyncio.wait_for(second_in_line.wait(), 10)
    fake.resume()
    assert (await asyncio.wait_for(run, 10)).files


async def test_deleted_pending_prompt_is_lost(fake, fake_client):
    fake.pause()
    prompt_id = str(uuid.uuid4())
    waiting = asyncio.Event()
    run = asyncio.create_task(fake_client.run_prompt(
        invert_workflow(3), prompt_id=prompt_id, on_progress=lambda p: p.ahead == 0 and waiting.set()))
    await asyncio.wait_for(waiting.wait(), 10)
    await fake_client.cancel(prompt_id)
    with pytest.raises(PromptLost):
        await asyncio.wait_for(run, 10)


async def mid_run(fake: FakeComfyUI, client: ComfyClient, action, **run_args):
    """Run a prompt with slow steps and start ``action()`` (a server-side mishap) at its first step."""
    fake.steps, fake.step_delay = 3, 0.05
    tasks = []

    def on_progress(progress):
        if progress.value == 1 and not tasks:
            tasks.append(asyncio.create_task(action()))  # not awaited here: the client must keep reading

    try:
        return await client.run_prompt(invert_workflow(random.randrange(1 << 24)), on_progress=on_progress,
                                       **run_args)
    finally:
        await asyncio.gather(*tasks)


def websocket_opens(fake: FakeComfyUI) -> int:
    return sum(1 for r in fake.requests if r.path == "/ws")


async def test_websocket_drop_reconnects(fake, fake_client):
    result = await mid_run(fake, fake_client, fake.drop_websockets)
    assert result.files and websocket_opens(fake) == 2


async def test_polls_history_when_websocket_stays_down(fake, fake_client):
    async def refuse_and_drop():
        fake.refuse_websockets = True
        await fake.drop_websockets()

    result = await mid_run(fake, fake_client, refuse_and_drop)
    assert result.files and websocket_opens(fake) >= 2
    assert sum(1 for r in fake.requests if r.path.startswith("/history/")) >= 2


async def test_restarted_backend_lost_the_prompt(fake, fake_client):
    with pytest.raises(PromptLost):
        await mid_run(fake, fake_client, fake.restart)


async def test_backend_gone_mid_run(fake, fake_client):
    with pytest.raises(BackendUnavailable):
        await mid_run(fake, fake_client, fake.stop)


async def test_previews_are_passed_on(fake, fake_client):
    fake.previews = True
    previews = []
    await fake_client.run_prompt(invert_workflow(5), on_preview=previews.append)
    assert [p.mime for p in previews] == ["image/jpeg"] * 3  # a sampler's, as ComfyUI's latent previews
    assert Image.open(io.BytesIO(previews[0].image)).size == (64, 64)


def test_parse_preview():
    assert parse_preview(b"\x00\x00\x00\x01\x00\x00\x00\x01jpeg") == Preview("image/jpeg", b"jpeg")
    assert parse_preview(b"\x00\x00\x00\x03\x00\x00\x00\x01text") is None  # other binary events
    assert parse_preview(b"\x00") is None


async def test_failing_node_knob(fake, fake_client):
    fake.fail_next("boom", node_type="ImageInvert")
    with pytest.raises(ExecutionFailed) as info:
        await fake_client.run_prompt(invert_workflow(6))
    assert (info.value.node_type, info.value.exception_message) == ("ImageInvert", "boom")
    assert (await fake_client.run_prompt(invert_workflow(6))).files  # only the next prompt fails


async def test_bad_arguments(fake_client):
    with pytest.raises(ValueError):
        await fake_client.queue_prompt({}, client_id="x")
    with pytest.raises(ValueError, match="UI-format"):
        await fake_client.queue_prompt({"nodes": [], "links": []}, client_id="x")
    with pytest.raises(ValueError):
        await fake_client.upload_image(b"x", "../evil.png")
    with pytest.raises(ValueError):
        ComfyClient("127.0.0.1:8188")


async def test_client_owns_its_connector(fake):
    made = []

    def factory():
        made.append(aiohttp.TCPConnector(limit=4))
        return made[-1]

    async with ComfyClient(fake.url, connector_factory=factory) as comfy:
        await comfy.system_stats()
        await comfy.queue()
    assert len(made) == 1 and made[0].closed


# --- one websocket per backend ----------------------------------------------------------------------

def node_ids(workflow: dict, prefix: str) -> dict:
    """``workflow`` with its node ids (and links) renamed ``prefix + id``."""
    def rename(value):
        return [prefix + value[0], value[1]] if isinstance(value, list) else value

    return {prefix + node: {**spec, "inputs": {k: rename(v) for k, v in spec["inputs"].items()}}
            for node, spec in workflow.items()}


async def test_many_runs_share_one_websocket(client, fake):
    """Five runs, two after each other and three at once, through one client: one socket."""
    colors = random.sample(range(1 << 24), 5)
    first = [await client.run_prompt(invert_workflow(color)) for color in colors[:2]]
    rest = await asyncio.wait_for(asyncio.gather(*(client.run_prompt(invert_workflow(color))
                                                   for color in colors[2:])), 120)
    results = first + list(rest)
    assert len({r.prompt_id for r in results}) == 5 and all(len(r.files) == 1 for r in results)
    assert len({r.files[0].filename for r in results}) == 5
    if client.base_url == fake.url:
        assert websocket_opens(fake) == 1


async def test_concurrent_runs_get_only_their_own_frames(client, fake):
    fake.previews = True
    seen = {"a": [], "b": []}
    previews = {"a": [], "b": []}
    runs = [client.run_prompt(node_ids(invert_workflow(random.randrange(1 << 24)), tag),
                              on_progress=seen[tag].append, on_preview=previews[tag].append) for tag in seen]
    await asyncio.wait_for(asyncio.gather(*runs), 120)
    for tag, progress in seen.items():
        nodes = list(dict.fromkeys(p.node for p in progress if p.node))
        assert nodes == [f"{tag}1", f"{tag}2", f"{tag}3"]
        assert len({p.prompt_id for p in progress}) == 1
        if client.base_url == fake.url:
            assert [(p.value, p.max) for p in progress if p.value] == [(1, 3), (2, 3), (3, 3)]
            assert len(previews[tag]) == 3


async def test_a_drop_reopens_the_one_socket_for_every_run(fake, fake_client):
    """Two runs wait on the socket when it drops (one running, one queued): one reopen serves both."""
    fake.pause()
    first = asyncio.create_task(mid_run(fake, fake_client, fake.drop_websockets))
    await until(lambda: len(fake._queue) == 1, first)
    second = asyncio.create_task(fake_client.run_prompt(invert_workflow(random.randrange(1 << 24))))
    await until(lambda: len(fake._queue) == 2, second)
    fake.resume()
    assert (await asyncio.wait_for(first, 10)).files and (await asyncio.wait_for(second, 10)).files
    assert websocket_opens(fake) == 2


async def test_a_run_queued_while_the_socket_is_down_polls_then_hears_it_again(fake, fake_client):
    fake.pause()
    first = asyncio.create_task(fake_client.run_prompt(invert_workflow(random.randrange(1 << 24))))
    await until(lambda: len(fake._queue) == 1, first)
    fake.refuse_websockets = True
    await fake.drop_websockets()
    second = asyncio.create_task(fake_client.run_prompt(invert_workflow(random.randrange(1 << 24))))
    await until(lambda: len(fake._queue) == 2, second)
    polled = sum(1 for r in fake.requests if r.path == "/queue")
    await until(lambda: sum(1 for r in fake.requests if r.path == "/queue") > polled + 2, second)
    fake.refuse_websockets = False
    await until(lambda: fake._sockets, second)
    fake.resume()
    assert (await asyncio.wait_for(first, 10)).files and (await asyncio.wait_for(second, 10)).files
    assert len(fake._sockets) == 1


async def until(condition, task, timeout=10.0):
    """Wait until ``condition()`` holds, checking after every step of the loop; fail if ``task`` ended."""
    async with asyncio.timeout(timeout):
        while not condition():
            assert not task.done(), task
            await asyncio.sleep(0)
