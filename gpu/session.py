"""A benchmark session: one workflow run (warm-up + N) times, as separate ComfyUI prompts.

How repeats work: ComfyUI executes one prompt at a time, so a node cannot run
its own workflow again while it runs. The Benchmark node in the prompt the
user queued (run 0) measures that run and, at its end, queues the remaining
runs as copies of the same API prompt through ComfyUI's ``POST /prompt``,
then one more copy, the report run, in which only the Benchmark node (and
what displays its outputs) executes: it aggregates, stores and outputs the
report, so no measured run pays for reporting. In each copy the Benchmark
node's inputs carry ``RUN_KEY = "<session>/<run>"``. Sessions live in this
process (the copies run here), keyed by id.

The copies must compute again instead of coming from ComfyUI's cache: every
node with a linked input gets ``RUN_KEY`` too. ComfyUI's cache key covers all
inputs of a node and of its ancestors, while a node is only called with the
inputs it declares, so the extra key changes nothing but the cache. Nodes
without linked inputs (loaders, empty latents) stay cached: weights stay
loaded, as in the warm runs the seed's table compares. In the report run the
other nodes carry the last run's key, so they come from the cache.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field

from .recorder import RunResult

RUN_KEY = "courier_benchmark_run"
KEEP_SESSIONS = 16  # sessions whose last run never came (cleared queue) are dropped oldest first

_sessions: OrderedDict[str, Session] = OrderedDict()


@dataclass
class Session:
    id: str
    workflow: str
    host: str
    repeats: int
    warmup: int
    save: bool = True
    runs: dict[int, RunResult] = field(default_factory=dict)

    @property
    def total_runs(self) -> int:
        return self.warmup + self.repeats

    def is_warmup(self, run: int) -> bool:
        return run < self.warmup

    @property
    def report_run(self) -> int:
        """Index of the extra run that only reports."""
        return self.total_runs

    def measured(self) -> list[RunResult]:
        """Results of the measured (non-warm-up) runs that completed, in order."""
        return [self.runs[k] for k in range(self.warmup, self.total_runs) if k in self.runs]

    def missing(self) -> list[int]:
        """Runs that never reported (they failed or were interrupted)."""
        return [k for k in range(self.total_runs) if k not in self.runs]


def open_session(workflow: str, host: str, repeats: int, warmup: int, save: bool = True) -> Session:
    session = Session(uuid.uuid4().hex[:12], workflow, host, repeats, warmup, save)
    _sessions[session.id] = session
    while len(_sessions) > KEEP_SESSIONS:
        _sessions.popitem(last=False)
    return session


def find_session(session_id: str) -> Session | None:
    return _sessions.get(session_id)


def close_session(session_id: str) -> None:
    _sessions.pop(session_id, None)


def run_of(prompt: dict, node_id: str) -> tuple[str, int] | None:
    """(session id, run index) if this prompt is a run made for a session, None for the user's own."""
    tag = prompt.get(node_id, {}).get("inputs", {}).get(RUN_KEY)
    if not isinstance(tag, str):
        return None
    session_id, _, run = tag.rpartition("/")
    return (session_id, int(run)) if session_id and run.isdigit() else None


def queued_prompts(prompt: dict, benchmark_node_id: str, session: Session) -> list[dict]:
    """What the user's run queues: runs 1 … total-1, then the report run."""
    return [prompt_for_run(prompt, benchmark_node_id, session, run)
            for run in range(1, session.report_run + 1)]


def prompt_for_run(prompt: dict, benchmark_node_id: str, session: Session, run: int) -> dict:
    """The API prompt of one run of the session (see the module docstring).

    The Benchmark node is marked with ``run``; the computing nodes with the run
    whose results they produce: the report run reuses the last run's, and run
    0's carry no key, as in the user's own prompt.
    """
    data_run = min(run, session.total_runs - 1)
    tagged = copy.deepcopy(prompt)
    for node_id, node in tagged.items():
        inputs = node.setdefault("inputs", {})
        if node_id == benchmark_node_id:
            inputs[RUN_KEY] = f"{session.id}/{run}"
        elif data_run > 0 and any(is_link(value) for value in inputs.values()):
            inputs[RUN_KEY] = f"{session.id}/{data_run}"
    return tagged


def is_link(value) -> bool:
    """An API-prompt input that connects to another node's output: [node_id, output_index]."""
    return (isinstance(value, list) and len(value) == 2
            and isinstance(value[0], str) and isinstance(value[1], int))


def workflow_fingerprint(prompt: dict, skip: str | None = None) -> str:
    """A default workflow name from the graph's shape (node types and links, not values)."""
    shape = sorted(
        (node_id, node.get("class_type", ""),
         sorted((name, value) for name, value in node.get("inputs", {}).items() if is_link(value)))
        for node_id, node in prompt.items() if node_id != skip)
    return "workflow " + hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:8]


def with_benchmark_node(prompt: dict, repeats: int, warmup: int, workflow: str,
                        host: str = "", save: bool = True) -> dict:
    """The API prompt plus a Benchmark node: queue it once to benchmark a stored workflow.

    For runners (a route, a bot command) that hold a workflow without the node.
    """
    node_id = "courier-benchmark"
    while node_id in prompt:
        node_id += "-"
    benchmarked = copy.deepcopy(prompt)
    benchmarked[node_id] = {
        "class_type": "CourierBenchmark",
        "inputs": {"repeats": repeats, "warmup": warmup, "workflow_name": workflow,
                   "host": host, "save": save},
    }
    return benchmarked
