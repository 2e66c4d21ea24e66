"""Timing one prompt from inside it: a progress handler on ComfyUI's own registry.

ComfyUI (``comfy_execution.progress``) keeps one ProgressRegistry per prompt
and calls every registered handler when a node starts, reports progress and
finishes, in the worker thread, right around the node's work. The Benchmark
node registers a ``RunRecorder`` there as the first node of the prompt, so
per-node times cost two ``perf_counter()`` calls per node and nothing in
ComfyUI is patched.

The recorder also tells when the rest of the prompt is done. The Benchmark
node is async: ComfyUI starts it, then runs the other nodes synchronously and
yields to the event loop only to wait for async nodes. So when the waiting
node gets the loop back and no other node is between start and finish, every
node that does not consume the Benchmark node's own outputs has run.

Duck-typed to ``comfy_execution.progress.ProgressHandler`` (the registry only
calls these methods), so this module imports nothing from ComfyUI.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


@dataclass
class NodeTime:
    node_id: str
    class_type: str
    title: str
    seconds: float
    steps: int = 0  # progress updates the node reported (sampler steps)
    it_per_s: float | None = None  # steps per second between its first and last update

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class RunResult:
    """One executed prompt as the Benchmark node saw it."""

    total_s: float
    nodes: list[NodeTime]
    cached: list[str] = field(default_factory=list)  # served from ComfyUI's cache, not run
    ran_before: list[str] = field(default_factory=list)  # ran before the Benchmark node (not timed)
    peak_memory_bytes: int | None = None
    memory_kind: str = ""
    devices: list[str] = field(default_factory=list)
    prompt_id: str = ""


class RunRecorder:
    """Records node start/finish times and progress updates of the current prompt."""

    name = "courier-benchmark"

    def __init__(self, own_node_id: str, clock=time.perf_counter):
        self.own_node_id = own_node_id
        self.clock = clock
        self.enabled = True
        self.registry = None
        self.started: dict[str, float] = {}
        self.finished: dict[str, float] = {}
        self.updates: dict[str, list[tuple[float, float]]] = {}
        self.cached: list[str] = []
        self.ran_before: list[str] = []
        self._changed = asyncio.Event()

    # -- the ProgressHandler interface ------------------------------------
    def set_registry(self, registry) -> None:
        self.registry = registry
        self.ran_before = [node_id for node_id, state in registry.nodes.items()
                           if node_id != self.own_node_id and _state_name(state) != "pending"]

    def start_handler(self, node_id, state, prompt_id) -> None:
        if node_id != self.own_node_id:
            # A node that asked for lazy inputs starts again later; keep its last start.
            self.started[node_id] = self.clock()

    def update_handler(self, node_id, value, max_value, state, prompt_id, image=None) -> None:
        if node_id != self.own_node_id:
            self.updates.setdefault(node_id, []).append((self.clock(), value))

    def finish_handler(self, node_id, state, prompt_id) -> None:
        if node_id == self.own_node_id:
            return
        if node_id in self.started:
            self.finished[node_id] = self.clock()
        else:
            self.cached.append(node_id)
        self._changed.set()

    def reset(self) -> None:
        """Nothing to free; ComfyUI calls it from ``unregister_handler``, which ``_measure_run`` uses."""

    # -- for the Benchmark node -------------------------------------------
    def busy(self) -> bool:
        """Whether some other node has started and not finished."""
        return any(node_id not in self.finished for node_id in self.started)

    async def until_idle(self) -> None:
        """Return once the prompt's other nodes are done (see the module docstring)."""
        while True:
            await asyncio.sleep(0)
            if not self.busy():
                return
            self._changed.clear()
            await self._changed.wait()

    def node_times(self) -> list[NodeTime]:
        """Finished nodes in the order they ran."""
        times = []
        for node_id, start in sorted(self.started.items(), key=lambda item: item[1]):
            if node_id not in self.finished:
                continue
            class_type, title = self._describe(node_id)
            updates = self.updates.get(node_id, [])
            times.append(NodeTime(node_id, class_type, title, self.finished[node_id] - start,
                                  steps=int(updates[-1][1]) if updates else 0,
                                  it_per_s=steps_per_second(updates)))
        return times

    def _describe(self, node_id: str) -> tuple[str, str]:
        try:
            node = self.registry.dynprompt.get_node(node_id)
        except Exception:  # an ephemeral node already gone, or no registry
            return "?", node_id
        class_type = node.get("class_type", "?")
        return class_type, node.get("_meta", {}).get("title", class_type)


def steps_per_second(updates: list[tuple[float, float]]) -> float | None:
    """Rate between the first and last progress update (like tqdm's it/s), None if unknown."""
    if len(updates) < 2:
        return None
    (t0, v0), (t1, v1) = updates[0], updates[-1]
    if t1 <= t0 or v1 <= v0:
        return None
    return (v1 - v0) / (t1 - t0)


def _state_name(state) -> str:
    value = state.get("state") if isinstance(state, dict) else None
    return getattr(value, "value", str(value))
