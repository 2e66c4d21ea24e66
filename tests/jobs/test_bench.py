"""The /bench runner: the benchmarked prompt, following a session by its frames, the stored run.

Sessions run on the fake ComfyUI with a scripted stand-in of the Benchmark node
(``bench_standin``); the real node runs in tests/bot/test_admin.py when COMFYUI_DIR is set.
"""

import asyncio
import io
import json

import pytest
from PIL import Image

from comfyui_courier.gpu.runs import BenchmarkRun
from comfyui_courier.gpu.session import RUN_KEY
from comfyui_courier.gpu.storage import save_run
from comfyui_courier.jobs import bench
from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.jobs.comfy.records import Event
from comfyui_courier.jobs.errors import ExecutionFailed, Interrupted, PromptRejected
from comfyui_courier.jobs.seed import SEED_DIR
from comfyui_courier.jobs.workflow import WorkflowError
from comfyui_courier.tests.jobs.bench_standin import StandIn, install
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI

DEMO = json.loads((SEED_DIR / "demo.json").read_text())
DEMOEDIT = json.loads((SEED_DIR / "demoedit.json").read_text())


def test_the_prompt_is_filled_like_a_job_and_benchmarked():
    made = bench.benchmark_prompt(DEMO, name="demo", repeats=4, chat_id=7, user_id=8)
    prompt = made.prompt
    assert prompt["1"]["inputs"] | {"prompt": bench.PROMPT, "seed": bench.SEED, "chat_id": "7", "user_id": "8"} == \
        prompt["1"]["inputs"]
    assert prompt[made.benchmark_node] == {"class_type": "CourierBenchmark", "inputs": {
        "repeats": 4, "warmup": bench.WARMUP, "workflow_name": "demo", "host": "", "save": True}}
    assert prompt[made.report_node]["inputs"] == {"source": [made.benchmark_node, 0]}
    assert prompt[made.chart_node]["inputs"] == {"images": [made.benchmark_node, 1]}
    assert {k: v for k, v in prompt.items() if k in DEMO} != DEMO  # filled, on a copy
    assert DEMO["1"]["inputs"]["prompt"] == "a lighthouse at dusk"


def test_a_workflow_with_its_own_benchmark_node_gets_just_ours():
    workflow = {**DEMO, "courier-benchmark": {"class_type": "CourierBenchmark", "inputs": {"repeats": 9, "warmup": 0}},
                "courier-benchmark-report": {"class_type": "PreviewAny",
                                             "inputs": {"source": ["courier-benchmark", 0]}},
                "x": {"class_type": "SaveImage", "inputs": {"images": ["2", 0]}}}
    made = bench.benchmark_prompt(workflow, name="demo", repeats=2)
    benchmarks = [n for n, node in made.prompt.items() if node["class_type"] == "CourierBenchmark"]
    assert benchmarks == [made.benchmark_node] and made.prompt[made.benchmark_node]["inputs"]["repeats"] == 2
    assert "x" in made.prompt and made.prompt[made.report_node]["inputs"]["source"][0] == made.benchmark_node
    with pytest.raises(WorkflowError):
        bench.benchmark_prompt({"1": {"class_type": "SaveImage", "inputs": {}}}, name="x", repeats=1)


def test_job_params_bound_the_runs():
    params = bench.job_params("demo", DEMO, 3, "de")
    assert params["kind"] == bench.KIND and params["workflow"] == DEMO and params["warmup"] == bench.WARMUP
    for bad in (0, bench.MAX_REPEATS + 1):
        with pytest.raises(ValueError):
            bench.job_params("demo", DEMO, bad, None)


def test_the_edit_picture_is_fixed():
    first, second = bench.bench_picture(64), bench.bench_picture(64)
    assert first == second and Image.open(io.BytesIO(first)).size == (64, 64)


def frames(*events):
    return [Event(kind, data) for kind, data in events]


def tracker():
    return bench.Tracker("p0", warmup=1, repeats=2, report_node="r", chart_node="c")


def test_the_tracker_numbers_runs_and_finds_the_report():
    t = tracker()
    steps = []
    for event in frames(("status", {"status": {}}), ("execution_start", {"prompt_id": "p0"}),
                        ("executing", {"node": "1", "prompt_id": "p0"}), ("execution_success", {"prompt_id": "p0"}),
                        ("execution_start", {"prompt_id": "p1"}), ("progress", {"prompt_id": "other", "value": 1}),
                        ("executed", {"node": "r", "output": {"text": ["not ours"]}, "prompt_id": "other"}),
                        ("execution_success", {"prompt_id": "p1"}), ("execution_start", {"prompt_id": "p2"}),
                        ("execution_success", {"prompt_id": "p2"}), ("execution_start", {"prompt_id": "p3"}),
                        ("executed", {"node": "r", "output": {"text": ["Benchmark: demo"]}, "prompt_id": "p3"}),
                        ("executed", {"node": "c", "output": {"images": [{"filename": "c.png", "type": "temp"}]},
                                      "prompt_id": "p3"})):
        step = t.handle(event)
        if step:
            steps.append((step.run, step.is_warmup, step.is_report))
        assert not t.done
    t.handle(Event("execution_success", {"prompt_id": "p3"}))
    assert t.done and t.report == "Benchmark: demo" and t.chart["filename"] == "c.png"
    assert steps == [(0, True, False), (1, False, False), (2, False, False), (3, False, True)]


def test_a_failed_measured_run_does_not_end_the_session_but_a_failed_report_does():
    t = tracker()
    error = {"prompt_id": "p1", "node_id": "2", "node_type": "ImageSharpen", "exception_message": "boom",
             "exception_type": "RuntimeError"}
    for event in frames(("execution_start", {"prompt_id": "p0"}), ("execution_success", {"prompt_id": "p0"}),
                        ("execution_start", {"prompt_id": "p1"}), ("execution_error", error),
                        ("execution_start", {"prompt_id": "p2"}), ("execution_success", {"prompt_id": "p2"}),
                        ("execution_start", {"prompt_id": "p3"})):
        t.handle(event)
    with pytest.raises(ExecutionFailed, match="boom"):  # the report run says "no run finished": show why
        t.handle(Event("execution_error", {"prompt_id": "p3", "exception_message": "no measured run"}))


def test_run_zero_failing_or_an_interrupt_end_the_session():
    t = tracker()
    with pytest.raises(ExecutionFailed, match="missing"):
        t.handle(Event("execution_error", {"prompt_id": "p0", "exception_message": "missing model"}))
    t = tracker()
    t.handle(Event("execution_interrupted", {"prompt_id": "someone else's"}))
    with pytest.raises(Interrupted):
        t.handle(Event("execution_interrupted", {"prompt_id": "p0", "node_id": "1", "node_type": "X"}))


@pytest.fixture
async def fake():
    async with FakeComfyUI(steps=0) as server:
        yield server


async def run(fake, standin, *, repeats=2, on_step=None, prompt_id=None, workflow=DEMO):
    install(fake, standin)
    made = bench.benchmark_prompt(workflow, name="demo", repeats=repeats)
    async with ComfyClient(fake.url, poll_interval=0.02) as client:
        return await asyncio.wait_for(bench.run_session(client, made, warmup=bench.WARMUP, repeats=repeats,
                                                        prompt_id=prompt_id, on_step=on_step), 30)


def our_prompts(fake) -> list[str]:
    return [body.get("prompt_id") for body in fake.prompts]


async def test_a_session_runs_to_its_report(fake):
    standin = StandIn(stored_id=12)
    steps = []

    async def on_step(step):
        steps.append(step.run)

    result = await run(fake, standin, repeats=3, on_step=on_step, prompt_id="first")
    assert standin.runs == [0, 1, 2, 3, 4] and steps == [0, 1, 2, 3, 4]
    assert result.prompt_ids == ["first", *standin.copy_ids] and result.failed_runs == []
    assert result.report == standin.report and "stored as benchmark run 12" in result.report
    assert result.chart["type"] == "temp" and result.chart["filename"].endswith(".png")
    assert our_prompts(fake) == ["first"]  # the rest were queued by the node
    tags = [fake._history[p]["prompt"][2][next(n for n, v in fake._history[p]["prompt"][2].items()
                                               if v["class_type"] == "CourierBenchmark")]["inputs"].get(RUN_KEY)
            for p in result.prompt_ids]
    assert tags == [None, "standin/1", "standin/2", "standin/3", "standin/4"]


async def test_a_failing_run_is_reported_and_the_session_goes_on(fake):
    result = await run(fake, StandIn(fail_runs=(2,)), repeats=3)
    assert result.failed_runs == [2] and "Benchmark: demo" in result.report


def websockets_opened(fake) -> int:
    return sum(r.path.endswith("/ws") for r in fake.requests)


def queue_reads(fake) -> int:
    """How often the runner read /queue: after run 0 (it learns the runs the node queued), after a reconnect."""
    return sum(r.method == "GET" and r.path.endswith("/queue") for r in fake.requests)


async def test_runs_that_end_while_the_websocket_is_down_are_read_back(fake):
    """The socket drops after run 0 and stays refused until every run, the report run too, has
    ended unheard: the runs learnt from /queue after run 0 are read from /history."""
    standin = install(fake, StandIn(stored_id=1, hold_after_run0=True))
    made = bench.benchmark_prompt(DEMO, name="demo", repeats=3)
    async with ComfyClient(fake.url, poll_interval=0.01, retries=2000) as client:
        task = asyncio.create_task(bench.run_session(client, made, warmup=1, repeats=3))
        await fake_wait(lambda: queue_reads(fake) == 1, task)
        fake.refuse_websockets = True
        await fake.drop_websockets()
        fake.resume()
        await fake_wait(lambda: standin.runs == [0, 1, 2, 3, 4] and fake._running is None, task)
        opened = websockets_opened(fake)
        fake.refuse_websockets = False
        result = await asyncio.wait_for(task, 30)
    assert result.report == standin.report and result.prompt_ids[1:] == standin.copy_ids
    assert websockets_opened(fake) > opened


async def test_runs_after_a_reconnect_are_heard_live(fake):
    standin = install(fake, StandIn(stored_id=1, hold_after_run0=True))
    made = bench.benchmark_prompt(DEMO, name="demo", repeats=2)
    steps = []

    async def on_step(step):
        steps.append(step.run)

    async with ComfyClient(fake.url, poll_interval=0.01) as client:
        task = asyncio.create_task(bench.run_session(client, made, warmup=1, repeats=2, on_step=on_step))
        await fake_wait(lambda: queue_reads(fake) == 1, task)
        await fake.drop_websockets()
        await fake_wait(lambda: websockets_opened(fake) == 2 and fake._sockets and queue_reads(fake) == 2, task)
        fake.resume()  # the runner listens again and has caught up: the other runs are heard live
        result = await asyncio.wait_for(task, 30)
    assert result.report == standin.report and steps == [0, 1, 2, 3]


async def test_leaving_early_deletes_the_queued_runs(fake):
    standin = StandIn(hold_after_run0=True)
    install(fake, standin)
    made = bench.benchmark_prompt(DEMO, name="demo", repeats=3)
    async with ComfyClient(fake.url) as client:
        task = asyncio.create_task(bench.run_session(client, made, warmup=1, repeats=3))
        await fake_wait(lambda: standin.runs == [0] and len(fake._queue) == 4, task)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert fake._queue == []
        fake.resume()
        # A probe queued after the session runs only once everything queued before it has run.
        probe = {"probe": {"class_type": "PreviewAny", "inputs": {"source": "probe"}}}
        await asyncio.wait_for(client.run_prompt(probe), 10)
    assert standin.runs == [0]


async def test_jobs_and_a_session_share_the_clients_one_websocket(fake):
    """Prompt jobs before and after a session, on one client: the session follows the same socket and
    leaves the jobs' prompts alone."""
    standin = install(fake, StandIn(stored_id=1))
    made = bench.benchmark_prompt(DEMO, name="demo", repeats=2)
    async with ComfyClient(fake.url) as client:
        before = await asyncio.wait_for(client.run_prompt({"p": {"class_type": "PreviewAny",
                                                                 "inputs": {"source": "before"}}}), 10)
        result = await asyncio.wait_for(bench.run_session(client, made, warmup=1, repeats=2), 30)
        after = await asyncio.wait_for(client.run_prompt({"p": {"class_type": "PreviewAny",
                                                                "inputs": {"source": "after"}}}), 10)
    assert result.report == standin.report and before.prompt_id not in result.prompt_ids
    assert after.outputs["p"]["text"] == ["after"] and websockets_opened(fake) == 1


async def test_leaving_early_leaves_the_other_prompts_of_the_client_queued(fake):
    """The session's runs and a job's prompt share the client's client_id: only the session's go."""
    standin = install(fake, StandIn(hold_after_run0=True))
    made = bench.benchmark_prompt(DEMO, name="demo", repeats=3)
    async with ComfyClient(fake.url) as client:
        session = asyncio.create_task(bench.run_session(client, made, warmup=1, repeats=3))
        await fake_wait(lambda: standin.runs == [0] and len(fake._queue) == 4, session)
        probe = {"p": {"class_type": "PreviewAny", "inputs": {"source": "job"}}}
        job = asyncio.create_task(client.run_prompt(probe))
        await fake_wait(lambda: len(fake._queue) == 5, job)
        session.cancel()
        with pytest.raises(asyncio.CancelledError):
            await session
        assert [item[1] for item in fake._queue] == [fake.prompts[-1]["prompt_id"]]
        fake.resume()
        result = await asyncio.wait_for(job, 10)
    assert result.outputs["p"]["text"] == ["job"] and standin.runs == [0]


async def fake_wait(condition, task, timeout=10.0):
    """Wait until ``condition()`` holds, checking after every step of the loop; fail if ``task`` ended."""
    async with asyncio.timeout(timeout):
        while not condition():
            assert not task.done(), task
            await asyncio.sleep(0)


async def test_a_backend_without_the_pack_rejects_the_prompt(fake):
    made = bench.benchmark_prompt(DEMO, name="demo", repeats=1)
    async with ComfyClient(fake.url) as client:
        with pytest.raises(PromptRejected) as caught:
            await bench.run_session(client, made, warmup=1, repeats=1)
    assert "CourierBenchmark" in str(caught.value)


def stored(prompt_ids):
    return BenchmarkRun(workflow="demo", device="Fake GPU", host="h", comfyui_version="0.3.64", torch_version="2",
                        repeats=2, warmup=1, wall_s=[0.01, 0.02], stats={}, per_node={}, peak_memory_bytes=None,
                        extra={"prompt_ids": prompt_ids, "session": "s"})


async def test_the_stored_run_must_be_this_sessions(store):
    ours = await save_run(store.pool, stored(["a", "b"]))
    other = await save_run(store.pool, stored(["x", "y"]))
    session = ["p0", "a", "b", "report"]
    assert await bench.stored_run(store.pool, f"…\nstored as benchmark run {ours.id}", session) == (ours.id, ours)
    assert await bench.stored_run(store.pool, f"stored as benchmark run {other.id}", session) == (other.id, None)
    assert await bench.stored_run(store.pool, "stored as benchmark run 999999", session) == (999999, None)
    assert await bench.stored_run(store.pool, "not stored: Courier's database is not running", session) == (None, None)


def test_the_chart_loses_the_embedded_workflow():
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("prompt", json.dumps(DEMO))
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(out, format="PNG", pnginfo=info)
    cleaned = Image.open(io.BytesIO(bench.clean_png(out.getvalue())))
    assert "prompt" not in cleaned.info and cleaned.getpixel((4, 4)) == (1, 2, 3)
