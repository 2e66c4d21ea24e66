"""``/bench`` jobs: a stored command's workflow measured by the Benchmark node on one backend.

The bot queues a job of kind ``benchmark``; the dispatcher runs it like any job, on the backend
whose worker claims it, and gives it that backend alone (``dispatcher.ALONE``): no other
Courier job runs there until the session ends. Here the workflow is filled like a normal job
(a fixed prompt and seed, a fixed picture for edit commands), gets a Benchmark node
(``gpu.session.with_benchmark_node``) plus two display nodes for its report and chart, and is
queued once.

The Benchmark node queues the other runs itself (see ``gpu/session.py``), under the
``client_id`` of the prompt that started it: the client's, so ComfyUI sends the frames of every
run of the session to the client's shared websocket (``execution_start``/``executed``/
``execution_success`` go to the queuing client only). The runner follows its first prompt there
and adopts the prompts no other run of the client follows: the session's other runs. The report
run's ``executed`` frames carry the report text and the chart. The node stores the run in its
Courier's database; when that is the bot's database (one process, or backends sharing
``COURIER_DATABASE_URL``), the stored row is checked to be this session's (its prompt ids are
runs we saw) and linked in the reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
from PIL import Image

from ..core import imaging
from ..core.logs import get_logger
from ..gpu.session import is_link, with_benchmark_node
from ..store import benchmarks
from .comfy.client import ComfyClient
from .comfy.events import Follower
from .comfy.records import Event, Gap
from .errors import BackendUnavailable, ComfyError, ExecutionFailed, Interrupted, PromptLost
from .runner import JobRun, send_once
from .workflow import fill_job, requires_image

log = get_logger("bench")

KIND = "benchmark"  # job.params["kind"]
PROMPT = "a lighthouse on a rocky coast at dusk, waves, volumetric light"  # fixed, like the seed
SEED = 42
WARMUP = 1  # runs before the measured ones: models load, caches fill
DEFAULT_REPEATS = 3
MAX_REPEATS = 20
BENCHMARK_NODE = "CourierBenchmark"
REPORT_NODE = "courier-benchmark-report"
CHART_NODE = "courier-benchmark-chart"
PICTURE_SIZE = 1024  # the fixed input picture of edit commands
STORED = re.compile(r"stored as benchmark run (\d+)")


def job_params(command: str, workflow: dict, repeats: int, language: str | None, *,
               backend: str | None = None) -> dict:
    """What a ``/bench`` job carries: the command's workflow as it was when queued, and the URL of the
    one backend that may claim it (``backend``; None: any)."""
    if not 1 <= repeats <= MAX_REPEATS:
        raise ValueError(f"repeats must be between 1 and {MAX_REPEATS}")
    return {"kind": KIND, "command": command, "workflow": workflow, "repeats": repeats, "warmup": WARMUP,
            "prompt": PROMPT, "seed": SEED, "language": language, "backend": backend}


def without_benchmark_nodes(workflow: dict) -> dict:
    """The workflow without Benchmark nodes and what displays their outputs (one per session)."""
    kept = {node_id: node for node_id, node in workflow.items() if node.get("class_type") != BENCHMARK_NODE}
    while True:
        dropped = [node_id for node_id, node in kept.items()
                   if any(is_link(value) and value[0] not in kept for value in node.get("inputs", {}).values())]
        if not dropped:
            return kept
        for node_id in dropped:
            del kept[node_id]


def _free_id(prompt: dict, wanted: str) -> str:
    while wanted in prompt:
        wanted += "-"
    return wanted


@dataclasses.dataclass(frozen=True)
class BenchPrompt:
    prompt: dict
    benchmark_node: str
    report_node: str
    chart_node: str


def benchmark_prompt(workflow: dict, *, name: str, repeats: int, warmup: int = WARMUP, image: str = "",
                     chat_id: int | str = "", user_id: int | str = "") -> BenchPrompt:
    """The job's workflow filled like a normal job, with a Benchmark node and its display nodes."""
    filled = fill_job(without_benchmark_nodes(workflow), prompt=PROMPT, seed=SEED, image=image,
                      chat_id=chat_id, user_id=user_id)
    prompt = with_benchmark_node(filled, repeats, warmup, name)  # host "": the backend's hostname
    (bench,) = set(prompt) - set(filled)
    report = _free_id(prompt, REPORT_NODE)
    prompt[report] = {"class_type": "PreviewAny", "inputs": {"source": [bench, 0]}}
    chart = _free_id(prompt, CHART_NODE)
    prompt[chart] = {"class_type": "PreviewImage", "inputs": {"images": [bench, 1]}}
    return BenchPrompt(prompt, bench, report, chart)


def bench_picture(size: int = PICTURE_SIZE) -> bytes:
    """The fixed input of edit commands: the same pixels on every machine."""
    ramp = np.linspace(0, 255, size, dtype=np.float32)
    red = np.tile(ramp, (size, 1))
    green = red.T
    blue = (np.add.outer(ramp, ramp) / 2)[::-1]
    pixels = np.stack([red, green, blue], axis=-1).astype(np.uint8)
    return imaging.encode_png(Image.fromarray(pixels, "RGB"))


# --- following a session ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Step:
    """A run of the session has started: ``run`` counts from 0 (warm-up runs first)."""

    run: int
    warmup: int
    repeats: int

    @property
    def is_warmup(self) -> bool:
        return self.run < self.warmup

    @property
    def is_report(self) -> bool:
        return self.run >= self.warmup + self.repeats


@dataclasses.dataclass
class Tracker:
    """The session as its websocket frames tell it (no I/O): feed ``handle`` every frame.

    Prompts run in the order they were queued, so the n-th prompt started on our socket is run n
    (0: the one we queued; ``warmup + repeats``: the report run).
    """

    first_prompt: str
    warmup: int
    repeats: int
    report_node: str
    chart_node: str
    started: list[str] = dataclasses.field(default_factory=list)
    queued: list[str] = dataclasses.field(default_factory=list)  # the runs run 0 queued, from /queue
    ended: dict[str, str] = dataclasses.field(default_factory=dict)  # prompt id -> success/error
    errors: dict[str, dict] = dataclasses.field(default_factory=dict)  # prompt id -> execution_error data
    report: str | None = None
    chart: dict | None = None  # {filename, subfolder, type}
    done: bool = False

    def __post_init__(self):
        self.started.append(self.first_prompt)

    @property
    def report_run(self) -> int:
        return self.warmup + self.repeats

    def run_of(self, prompt_id: str) -> int | None:
        return self.started.index(prompt_id) if prompt_id in self.started else None

    def learn(self, prompt_id: str) -> None:
        """A prompt of the session seen in the backend's queue (it may start while we cannot hear it)."""
        if prompt_id not in self.queued:
            self.queued.append(prompt_id)

    def ours(self, data: dict) -> bool:
        """Whether a frame is about the session; a run learnt from the queue that started unheard
        takes its place now."""
        prompt_id = data.get("prompt_id")
        if prompt_id in self.queued and prompt_id not in self.started:
            self.started.append(prompt_id)
        return prompt_id in self.started

    def handle(self, event: Event) -> Step | None:
        """Apply one frame; a ``Step`` when a run starts. Raises when the session failed."""
        data, kind = event.data, event.type
        prompt_id = data.get("prompt_id")
        if kind == "execution_start" and isinstance(prompt_id, str):
            if prompt_id not in self.started:  # only prompts queued with our client_id reach us
                self.started.append(prompt_id)
            return Step(self.run_of(prompt_id), self.warmup, self.repeats)
        if not self.ours(data):
            return None  # a broadcast frame of someone else's prompt
        if kind == "executed":
            self.output(str(data.get("node")), data.get("output") or {})
        elif kind == "execution_success":
            self.ended[prompt_id] = "success"
            self.done = self.report is not None
        elif kind == "execution_error":
            self.ended[prompt_id] = "error"
            self.errors[prompt_id] = dict(data)
            run = self.run_of(prompt_id)
            if run == 0 or run >= self.report_run:
                raise self.failure()
        elif kind == "execution_interrupted":
            raise Interrupted(data)
        return None

    def output(self, node: str, output: dict) -> None:
        if node == self.report_node:
            lines = output.get("text")
            if isinstance(lines, list) and lines and isinstance(lines[0], str):
                self.report = lines[0]
        elif node == self.chart_node:
            images = output.get("images")
            if isinstance(images, list) and images and isinstance(images[0], dict):
                self.chart = images[0]

    def failure(self) -> ComfyError:
        """Why the session produced no report: the first failed run's error."""
        for prompt_id in self.started:
            if prompt_id in self.errors:
                return ExecutionFailed(self.errors[prompt_id])
        return PromptLost("the benchmark session ended without a report")


@dataclasses.dataclass(frozen=True)
class BenchResult:
    report: str
    chart: dict | None
    prompt_ids: list[str]  # every run of the session, in order (the report run last)
    failed_runs: list[int]


StepCallback = Callable[[Step], Awaitable[None]]


async def run_session(client: ComfyClient, bench: BenchPrompt, *, warmup: int, repeats: int,
                      prompt_id: str | None = None, on_step: StepCallback | None = None) -> BenchResult:
    """Queue the benchmarked prompt and follow its session to the report run.

    The session is followed on the client's shared websocket; after a reconnect the runs it
    missed are read from ``/queue`` and ``/history`` (it gives up after ``client.retries`` looks
    while the socket stays down). Leaving early (an error, a cancel, a timeout) deletes the
    session's queued runs and interrupts its running one, so no orphan runs hold the GPU.

    :raises PromptRejected, ExecutionFailed, Interrupted, PromptLost, BackendUnavailable:
    """
    tracker = Tracker(prompt_id or str(uuid.uuid4()), warmup, repeats, bench.report_node, bench.chart_node)
    async with client.follow(tracker.first_prompt, adopt=True) as follower:
        try:
            await client.queue_prompt(bench.prompt, client.client_id, tracker.first_prompt)
            down = 0
            while not tracker.done:
                item = await follower.next()
                if isinstance(item, Gap) and not item.reconnected:
                    down += 1
                    if down >= client.retries:
                        raise BackendUnavailable(f"the websocket to {client.base_url} stays down")
                elif isinstance(item, Gap):
                    down = 0
                    await _catch_up(client, follower, tracker)
                elif isinstance(item, Event):
                    step = tracker.handle(item)
                    if step is not None and on_step is not None:
                        await on_step(step)
                    if item.type == "execution_success" and item.data.get("prompt_id") == tracker.first_prompt:
                        await _learn_queued(client, follower, tracker)  # run 0 queued the others by now
            return _result(tracker)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(drop_session(client, follower))
            raise


def _result(tracker: Tracker) -> BenchResult:
    failed = [tracker.run_of(p) for p in tracker.started if tracker.ended.get(p) == "error"]
    return BenchResult(tracker.report, tracker.chart, list(tracker.started), failed)


async def _learn_queued(client: ComfyClient, follower: Follower, tracker: Tracker) -> set[str]:
    """Note the session's prompts on the backend now; returns those still running or waiting."""
    state = await client.queue()
    waiting = [item.prompt_id for item in sorted(state.running + state.pending, key=lambda i: i.number)
               if follower.owns(item)]
    for prompt_id in waiting:
        tracker.learn(prompt_id)
    return set(waiting)


async def _catch_up(client: ComfyClient, follower: Follower, tracker: Tracker) -> None:
    """After a reconnect: what ended while we could not hear it (queue first, then history).

    Runs are taken in queue order, so a run that started and ended unheard keeps its index.
    """
    waiting = await _learn_queued(client, follower, tracker)
    for prompt_id in tracker.started + [p for p in tracker.queued if p not in tracker.started]:
        if prompt_id in waiting or prompt_id in tracker.ended:
            continue
        entry = await client.history(prompt_id)
        if entry is None:
            continue
        for kind, data in entry.messages:  # execution_start … execution_success/error
            if kind != "execution_success":
                tracker.handle(Event(kind, data))
        for node, output in entry.outputs.items():
            tracker.output(node, output)
        if entry.status_str == "success":
            tracker.handle(Event("execution_success", {"prompt_id": prompt_id}))
        if tracker.done:
            return
    if not waiting:
        if tracker.errors:
            raise tracker.failure()
        raise PromptLost(f"lost track of the benchmark session on {client.base_url} while the connection "
                         "was down; if it finished, /compare shows its stored run")


async def drop_session(client: ComfyClient, follower: Follower) -> None:
    """Delete the session's queued runs and interrupt its running one."""
    state = await client.queue()
    pending = [item.prompt_id for item in state.pending if follower.owns(item)]
    if pending:
        await client.delete_queued(*pending)
    for item in state.running:
        if follower.owns(item):
            await client.interrupt(item.prompt_id)


# --- the stored run -----------------------------------------------------------------------------

async def stored_run(db, report: str, session_prompts: list[str]) -> tuple[int | None, Any]:
    """(the id the report names, that row if it is this session's run in ``db``, else None).

    A backend with its own database numbers its runs too, so the row must list only prompt ids
    of this session's runs.
    """
    match = STORED.search(report)
    if match is None:
        return None, None
    run_id = int(match.group(1))
    row = await benchmarks.get_benchmark_run(db, run_id)
    prompts = set((row.extra or {}).get("prompt_ids") or []) if row is not None else set()
    return run_id, (row if prompts and prompts <= set(session_prompts) else None)


def clean_png(data: bytes) -> bytes:
    """The chart without the workflow ComfyUI's preview embeds: the same pixels, no metadata."""
    with Image.open(io.BytesIO(data)) as image:
        return imaging.encode_png(image.convert("RGB"))


# --- the dispatcher's side ----------------------------------------------------------------------

async def run_job(run: JobRun) -> dict:
    """Run a ``/bench`` job on ``run.client`` and send the report and chart to the chat."""
    job, client, say = run.job, run.client, run.say
    params = job.params
    name, repeats, warmup = params["command"], int(params["repeats"]), int(params.get("warmup", WARMUP))
    image = ""
    if requires_image(params["workflow"]):
        image = await client.upload_image(bench_picture(), "courier-bench.png")
    bench = benchmark_prompt(params["workflow"], name=name, repeats=repeats, warmup=warmup, image=image,
                             chat_id=job.chat_id, user_id=job.user_id)

    async def on_step(step: Step) -> None:
        if step.is_report:
            text = say("bench_report", name=name)
        elif step.is_warmup:
            text = say("bench_warmup", name=name, run=step.run + 1, count=step.warmup)
        else:
            text = say("bench_run", name=name, run=step.run - step.warmup + 1, count=step.repeats)
        await run.status.update(text)

    result = await run_session(client, bench, warmup=warmup, repeats=repeats, prompt_id=run.prompt_id,
                               on_step=on_step)
    named_id, row = await stored_run(run.pool, result.report, result.prompt_ids)
    if row is not None:
        note = say("bench_stored", id=row.id)
    elif named_id is not None:
        note = say("bench_stored_elsewhere", id=named_id)
    else:
        note = ""
    text = result.report if not note else f"{result.report}\n\n{note}"

    async def send_report() -> dict:
        return {"message_id": await run.sink.send_text(job.chat_id, _fit(text), job.reply_to_message_id)}

    async def send_chart() -> dict:
        chart = await client.view(result.chart["filename"], result.chart.get("subfolder", ""),
                                  result.chart.get("type", "temp"))
        return await run.sink.send_file(job.chat_id, job.reply_to_message_id, f"benchmark-{_slug(name)}.png",
                                        clean_png(chart))

    # like a prompt job's files: sent once, and an answer that did not come is no failure
    sends = [("report", send_report)] + ([("chart", send_chart)] if result.chart is not None else [])
    unconfirmed = [output for output, send in sends if await send_once(run, output, send) is None]
    return {"prompt_id": run.prompt_id, "benchmark_run_id": row.id if row is not None else None,
            "prompt_ids": result.prompt_ids, "failed_runs": result.failed_runs, "unconfirmed": unconfirmed}


MAX_MESSAGE = 4096


def _fit(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "workflow"
