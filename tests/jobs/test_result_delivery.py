"""How a job gets its result files without a ``/view`` round trip, and when it still fetches them.

- A remote backend (the session's real ComfyUI with the pack, whose own Courier runs no bot):
  Telegram Output pushes its PNGs to the queuing client as ``PREVIEW_IMAGE`` frames.
- The bot inside the ComfyUI that runs the job: the node hands the bytes over in memory.
- ``/view``: a node answered from ComfyUI's cache, a result over ``PUSH_MAX_BYTES``, a video.
"""

import asyncio
import json
import struct
import time
import uuid

import asyncpg
import pytest

from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.jobs.comfy.http import WS_MAX_MSG_BYTES
from comfyui_courier.jobs.comfy.records import PUSH_MAX_BYTES, Preview, parse_preview, png_preview_payload
from comfyui_courier.jobs.prompt_job import result_files
from comfyui_courier.jobs.workflow import OUTPUT_NODE, fill_job, nodes_of
from comfyui_courier.tests.nodes import test_nodes_comfyui as node_tests
from comfyui_courier.tests.support.courier import running_courier
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI
from comfyui_courier.tests.support.requires import require_module

USER = 4242
JOB_S = 60
output_file = node_tests.output_file


def job_graph(*, width: int = 96, height: int = 64, noise: bool = False, video: bool = False) -> dict:
    """Telegram Input -> (noise, incompressible) -> Telegram Output, as a command's workflow."""
    nodes = {
        "1": {"class_type": "CourierTelegramInput", "inputs": {"command": "deliver", "prompt": "a red fox", "seed": 7,
                                                               "width": width, "height": height}},
        "3": {"class_type": "CourierTelegramOutput", "inputs": {"filename_prefix": "courier/delivery",
                                                                "images": ["2", 0] if noise else ["1", 1]}},
    }
    if noise:
        nodes["2"] = {"class_type": "ImageAddNoise", "inputs": {"image": ["1", 1], "seed": 1, "strength": 1.0}}
    if video:
        nodes["4"] = {"class_type": "CreateVideo", "inputs": {"images": ["1", 1], "fps": 4.0}}
        nodes["3"]["inputs"] = {"filename_prefix": "courier/delivery", "video": ["4", 0]}
    return nodes


async def run_job(client: ComfyClient, graph: dict, job: str | None = None):
    """Run ``graph`` filled as a job's (``job``: its Output's ``bot_job``, the prompt id by default);
    (the result, [(filename, bytes, via)] as the job would send them)."""
    prompt_id = str(uuid.uuid4())
    workflow = fill_job(graph, prompt="a red fox", seed=7, job=job or prompt_id)
    outputs = nodes_of(workflow, OUTPUT_NODE)
    result = await asyncio.wait_for(client.run_prompt(workflow, prompt_id=prompt_id, result_nodes=outputs), JOB_S)
    return result, [(f.filename, f.data, f.via) async for f in result_files(client, result, {}, outputs)]


def on_disk(server, result) -> list[bytes]:
    return [output_file(server, ref).read_bytes() for ref in result.outputs["3"]["images"]]


@pytest.fixture
async def comfy(comfyui):
    async with ComfyClient(comfyui.url) as client:
        yield client


def test_a_pushed_frame_is_comfyuis_png_preview_and_fits_the_socket():
    frame = struct.pack(">I", 1) + png_preview_payload(b"\x89PNG...")  # ComfyUI's encode_bytes adds the type
    assert parse_preview(frame) == Preview("image/png", b"\x89PNG...")
    assert PUSH_MAX_BYTES + 8 < WS_MAX_MSG_BYTES  # a push can never close the shared socket


async def test_a_remote_output_pushes_its_pngs_as_frames(comfyui, comfy):
    result, files = await run_job(comfy, job_graph())
    assert set(result.pushed) == {"3"}
    assert [(data, via) for _, data, via in files] == [(data, "websocket") for data in on_disk(comfyui, result)]
    assert files[0][0] == result.outputs["3"]["images"][0]["filename"]


async def test_each_job_runs_its_output_though_comfyui_cached_the_rest(comfyui, comfy):
    graph = job_graph(width=104)
    await run_job(comfy, graph)
    result, files = await run_job(comfy, graph)  # the same prompt and seed: only bot_job differs
    cached = dict((await comfy.history(result.prompt_id)).messages)["execution_cached"]["nodes"]
    assert "1" in cached and "3" not in cached
    assert [via for *_, via in files] == ["websocket"]


async def test_an_output_answered_from_the_cache_is_fetched(comfyui, comfy):
    graph, job = job_graph(width=112), uuid.uuid4().hex
    first, _ = await run_job(comfy, graph, job)
    again, files = await run_job(comfy, graph, job)  # the identical prompt: ComfyUI runs no node at all
    assert again.pushed == {} and again.outputs == first.outputs
    assert [(data, via) for _, data, via in files] == [(data, "view") for data in on_disk(comfyui, first)]


async def test_a_big_result_is_fetched_and_the_socket_carries_on(comfyui, comfy):
    big, files = await run_job(comfy, job_graph(width=1536, height=1536, noise=True))
    (data,) = on_disk(comfyui, big)
    assert len(data) > PUSH_MAX_BYTES and big.pushed == {}
    assert files == [(files[0][0], data, "view")]
    _, small = await run_job(comfy, job_graph(width=120))  # the same websocket, still open
    assert [via for *_, via in small] == ["websocket"]


async def test_a_video_is_fetched(comfyui, comfy):
    require_module("av", "PyAV, ComfyUI's video library: install ComfyUI's requirements")
    result, files = await run_job(comfy, job_graph(video=True))
    assert result.pushed == {}
    assert [(name.endswith(".mp4"), data, via) for name, data, via in files] == \
        [(True, data, "view") for data in on_disk(comfyui, result)]


async def test_frames_of_other_nodes_stay_previews():
    """Sampler previews come while another node executes; only the Output's frames are results."""
    async with FakeComfyUI(previews=True) as fake, ComfyClient(fake.url) as client:
        previews = []
        workflow = fill_job(job_graph(), prompt="p", seed=1, job="j")
        result = await client.run_prompt(workflow, on_preview=previews.append, result_nodes=["3"])
        (ref,) = result.outputs["3"]["images"]
        assert len(previews) == fake.steps and {p.mime for p in previews} == {"image/jpeg"}
        assert result.pushed == {"3": [fake.files[("output", ref["subfolder"], ref["filename"])]]}


async def test_a_job_through_the_bot_gets_the_pushed_result(comfyui, botapi, botapi_bot, pg_database, tmp_path):
    async with running_courier(botapi, botapi_bot, pg_database, comfyui.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)) as courier:
        request = botapi_bot.inject_text(USER, "/demo pushed")
        call = await botapi_bot.wait_for_call("sendDocument", timeout=JOB_S, where=lambda c: (
            c.result.get("reply_to_message", {}).get("message_id") == request["message_id"]))
        async with courier.store.pool.acquire() as conn:
            outputs = await finished_outputs(conn)
    sent = botapi_bot.file_bytes(call.result["document"]["file_id"])
    assert [(o["filename"], o["via"]) for o in outputs] == [(call.result["document"]["file_name"], "websocket")]
    assert sent == (comfyui.base_directory / "output" / "courier" / outputs[0]["filename"]).read_bytes()


@pytest.fixture
async def comfyui_with_bot(comfyui_factory, botapi, botapi_bot, pg_database):
    """A ComfyUI whose bot runs inside it, on this test's emulator and database, once its bot is up."""
    server = comfyui_factory(start=False, env={
        "TELEGRAM_BOT_TOKEN": botapi_bot.token, "COURIER_TELEGRAM_API_URL": botapi.url,
        "COURIER_DATABASE_URL": pg_database, "COURIER_ALLOWED_USERS": str(USER)})
    await asyncio.to_thread(server.start)
    deadline = time.monotonic() + JOB_S
    while (bot := (await asyncio.to_thread(server.get_json, "/courier/health"))["components"]["bot"])["state"] != "ok":
        assert bot["state"] in ("starting", "off") and time.monotonic() < deadline, f"{bot}\n{server.log_tail()}"
        await asyncio.sleep(0.25)
    return server


async def test_the_bot_inside_comfyui_takes_the_bytes_in_memory(comfyui_with_bot, botapi_bot, pg_database):
    botapi_bot.inject_text(USER, "/help")
    request = botapi_bot.inject_text(USER, "/demo in process")
    call = await botapi_bot.wait_for_call("sendDocument", timeout=JOB_S, where=lambda c: (
        c.result.get("reply_to_message", {}).get("message_id") == request["message_id"]))
    conn = await asyncpg.connect(pg_database)
    try:
        outputs = await finished_outputs(conn)
    finally:
        await conn.close()
    assert [o["via"] for o in outputs] == ["handoff"]
    sent = botapi_bot.file_bytes(call.result["document"]["file_id"])
    path = comfyui_with_bot.base_directory / "output" / "courier" / outputs[0]["filename"]
    assert sent == path.read_bytes()


async def finished_outputs(conn) -> list[dict]:
    """The delivered outputs of the one job, once its row says it succeeded."""
    deadline = asyncio.get_running_loop().time() + JOB_S
    while True:
        row = await conn.fetchrow("SELECT status, result::text FROM courier_jobs")
        if row is not None and row["status"] == "succeeded":
            return json.loads(row["result"])["outputs"]
        assert asyncio.get_running_loop().time() < deadline, row
        await asyncio.sleep(0.05)
