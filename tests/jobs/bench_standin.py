"""The Benchmark node's protocol, scripted on the fake ComfyUI (which cannot run the real node).

The real node measures inside ComfyUI; what the ``/bench`` runner relies on is its protocol
(``gpu/session.py``, ``nodes/benchmark.py``): run 0, the prompt the runner queued, queues runs
1 … total-1 and the report run as copies (``gpu.session.queued_prompts``) under the running
prompt's ``client_id``; every run but the report run blocks the display nodes; the report run
outputs the report text (naming the stored run) and the chart. This stand-in does exactly that,
with prompt ids the test chooses, so the test can store the run first. ``install`` also gives the
fake ComfyUI's ``PreviewAny`` and a ``PreviewImage`` that honours the block.
"""

from __future__ import annotations

import dataclasses
import heapq
import uuid

from PIL import Image

from comfyui_courier.gpu.session import RUN_KEY, Session, queued_prompts
from comfyui_courier.tests.support.fake_comfyui import (
    CORE_NODES,
    FakeComfyUI,
    NodeSpec,
    _Failure,
)

BLOCKED = "<blocked by the Benchmark node>"  # stands for ComfyUI's ExecutionBlocker


@dataclasses.dataclass
class StandIn:
    """What the stand-in will do; ``runs`` records each run index it executed, in order."""

    stored_id: int | None = None  # "stored as benchmark run N" in the report; None: "not stored: ..."
    copy_ids: list[str] | None = None  # prompt ids of runs 1 … total (the report run last)
    fail_runs: tuple[int, ...] = ()
    hold_after_run0: bool = False  # pause the fake once run 0 has queued the copies
    session_id: str = "standin"
    runs: list[int] = dataclasses.field(default_factory=list)
    report: str = ""

    def ids(self, total: int) -> list[str]:
        if self.copy_ids is None:
            self.copy_ids = [str(uuid.uuid4()) for _ in range(total)]
        return self.copy_ids


def install(fake: FakeComfyUI, standin: StandIn) -> StandIn:
    def benchmark(fake, repeats, warmup, workflow_name="", host="", save=True, **tagged):
        _, _, prompt, extra_data, outputs = fake._running
        node_id = next(n for n, node in prompt.items() if node["class_type"] == "CourierBenchmark")
        session = Session(standin.session_id, workflow_name, host or "fake-host", repeats, warmup, save)
        tag = tagged.get(RUN_KEY)
        run = 0 if tag is None else int(tag.rpartition("/")[2])
        standin.runs.append(run)
        if run in standin.fail_runs:
            raise _Failure(f"scripted failure of run {run}", "RuntimeError")
        if run == 0:
            copies = queued_prompts(prompt, node_id, session)
            for prompt_id, copy in zip(standin.ids(len(copies)), copies, strict=True):
                heapq.heappush(fake._queue, (fake._number, prompt_id, copy, dict(extra_data), list(outputs)))
                fake._number += 1
            fake._wakeup.set()
            if standin.hold_after_run0:
                fake.pause()
        if run < session.report_run:
            return (BLOCKED, BLOCKED), None
        stored = (f"stored as benchmark run {standin.stored_id}" if standin.stored_id is not None
                  else "not stored: Courier's database is not running")
        standin.report = (f"Benchmark: {workflow_name}\ndevice: Fake GPU · host: {session.host}\n"
                          f"runs (s): {', '.join('0.010' for _ in range(repeats))}\n{stored}")
        return (standin.report, [Image.new("RGB", (96, 54), (34, 139, 230))]), None

    def preview_any(fake, source):
        return (), (None if source == BLOCKED else {"text": [str(source)]})

    def preview_image(fake, images):
        return ((), None) if images == BLOCKED else CORE_NODES["PreviewImage"].run(fake, images)

    fake.nodes["CourierBenchmark"] = NodeSpec(
        {"repeats": ["INT", {"min": 1, "max": 100}], "warmup": ["INT", {"min": 0, "max": 10}]},
        {"workflow_name": ["STRING", {}], "host": ["STRING", {}], "save": ["BOOLEAN", {}], RUN_KEY: ["STRING", {}]},
        outputs=("STRING", "IMAGE"), output_node=True, run=benchmark)
    fake.nodes["PreviewAny"] = NodeSpec({"source": ["*", {}]}, output_node=True, run=preview_any)
    fake.nodes["PreviewImage"] = dataclasses.replace(CORE_NODES["PreviewImage"], run=preview_image)
    return standin
