"""Where a bot job's time goes: a timestamp for each step, from the user's message to the result.

``Trace.install()`` wraps a few functions of the pack, each at the attribute its caller looks up
when it runs, so nothing else changes; install it before the Courier starts (the bot's handlers
are wired then). Benchmarks run one job at a time, so every mark belongs to the job begun last.
A bot in a process of its own records its marks with a ``Recorder``; the benchmark's ``Trace``
``adopt``s them (``time.perf_counter`` is the system's monotonic clock, the same in every process).
``steps()`` gives each step's time since the one before, in milliseconds: the median, and the
99th percentile (where the slow jobs lose their time).
"""

from __future__ import annotations

import bisect
import functools
import json
import statistics
import time

STEPS = (
    ("update", "the update reached the bot's handlers (getUpdates)"),
    ("submit", "the command was parsed, its table row read"),
    ("committed", "the job row and its Queued reply are committed"),
    ("claimed", "a worker claimed the job (NOTIFY, claim query)"),
    ("post_prompt", "the workflow is filled, POST /prompt starts"),
    ("prompt_queued", "ComfyUI answered POST /prompt"),
    ("frame_execution_start", "execution_start arrived (ComfyUI's worker picked the prompt up)"),
    ("frame_execution_success", "execution_success arrived (ComfyUI ran the graph)"),
    ("frame_end", "`executing: null` arrived (ComfyUI wrote the history)"),
    ("run_returned", "run_prompt returned"),
    ("send_result", "the result's bytes are in hand, sendDocument starts"),
    ("document", "sendDocument reached the Bot API"),
)


class Trace:
    def __init__(self):
        self.jobs: list[dict[str, float]] = []
        self.paths: list[str] = []  # how each job reached its backend (benchmarks that compare paths)

    def begin(self, path: str = "") -> None:
        """A new job: the user's message is sent now."""
        self.jobs.append({"injected": time.perf_counter()})
        self.paths.append(path)

    def mark(self, step: str, at: float | None = None) -> None:
        """The current job reached ``step``, now or ``at`` (a ``time.perf_counter`` reading; only its
        first time counts)."""
        if self.jobs:
            self.jobs[-1].setdefault(step, time.perf_counter() if at is None else at)

    def adopt(self, marks: list[tuple[str, float]]) -> None:
        """Marks made elsewhere (a ``Recorder``'s), each to the job begun last before it."""
        begun = [job["injected"] for job in self.jobs]
        for step, at in marks:
            index = bisect.bisect_right(begun, at) - 1
            if index >= 0:
                self.jobs[index].setdefault(step, at)

    def drop(self) -> None:
        """Forget the current job (a warm-up)."""
        self.jobs.pop()
        self.paths.pop()

    def install(self) -> None:
        from comfyui_courier.bot import handlers, queueing
        from comfyui_courier.bot.sink import TelegramSink
        from comfyui_courier.jobs.comfy.client import ComfyClient
        from comfyui_courier.store import jobs

        self._around(handlers, "gatekeeper", before="update")
        self._around(queueing, "submit", before="submit", after="committed")  # queueing.queue_job's
        self._around(jobs, "claim", after="claimed", when=lambda job: job is not None)
        self._around(ComfyClient, "queue_prompt", before="post_prompt", after="prompt_queued")
        self._around(ComfyClient, "run_prompt", after="run_returned")
        self._around(TelegramSink, "send_result", before="send_result")
        on_event = ComfyClient._on_event

        @functools.wraps(on_event)
        async def traced_on_event(client, run, event):
            if event.data.get("prompt_id", run.prompt_id) == run.prompt_id:
                ended = event.type == "executing" and event.data.get("node") is None
                self.mark("frame_end" if ended else f"frame_{event.type}")
            return await on_event(client, run, event)

        ComfyClient._on_event = traced_on_event

    def _around(self, owner, name: str, *, before: str | None = None, after: str | None = None,
                when=lambda result: True) -> None:
        wrapped = getattr(owner, name)

        @functools.wraps(wrapped)
        async def traced(*args, **kwargs):
            if before:
                self.mark(before)
            result = await wrapped(*args, **kwargs)
            if after and when(result):
                self.mark(after)
            return result

        setattr(owner, name, traced)

    def steps(self, path: str = "") -> list[tuple[str, str, float, float]]:
        """(step, what happened, median ms since the step before, p99 of it) over the jobs of ``path``
        that passed every step."""
        names = ["injected"] + [name for name, _ in STEPS]
        complete = [job for job, on in zip(self.jobs, self.paths, strict=True)
                    if on == path and all(name in job for name in names)]
        found = []
        # names is one longer than STEPS: each step pairs with the name before it, the last name with none
        for (name, what), previous in zip(STEPS, names, strict=False) if complete else ():
            times = sorted((job[name] - job[previous]) * 1000 for job in complete)
            found.append((name, what, statistics.median(times), times[round(0.99 * (len(times) - 1))]))
        return found


class Recorder(Trace):
    """The marks alone, in the order made, for a ``Trace`` in another process (``save`` writes them)."""

    def __init__(self):
        super().__init__()
        self.marks: list[tuple[str, float]] = []

    def mark(self, step: str, at: float | None = None) -> None:
        self.marks.append((step, time.perf_counter() if at is None else at))

    def save(self, path) -> None:
        with open(path, "w") as out:
            json.dump(self.marks, out)
