import asyncio
from enum import Enum

import pytest

from comfyui_courier.gpu.recorder import RunRecorder, steps_per_second


class State(Enum):  # like comfy_execution.progress.NodeState
    Pending = "pending"
    Running = "running"
    Finished = "finished"


class Prompt:  # like comfy_execution.graph.DynamicPrompt
    def __init__(self, nodes):
        self.nodes = nodes

    def get_node(self, node_id):
        return self.nodes[node_id]


class Registry:  # like comfy_execution.progress.ProgressRegistry
    def __init__(self, nodes=None, states=None):
        self.dynprompt = Prompt(nodes or {})
        self.nodes = states or {}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def recorder_with(nodes=None, states=None):
    clock = Clock()
    recorder = RunRecorder("9", clock=clock)
    recorder.set_registry(Registry(nodes, states))
    return recorder, clock


def run_node(recorder, clock, node_id, seconds, steps=0):
    recorder.start_handler(node_id, {}, "p")
    for step in range(1, steps + 1):
        clock.now += seconds / max(steps, 1)
        recorder.update_handler(node_id, step, steps, {}, "p")
    clock.now += 0 if steps else seconds
    recorder.finish_handler(node_id, {}, "p")


def test_node_times_titles_and_sampler_rate():
    nodes = {"3": {"class_type": "KSampler", "_meta": {"title": "Sampler"}},
             "8": {"class_type": "VAEDecode"}}
    recorder, clock = recorder_with(nodes)
    run_node(recorder, clock, "3", 2.0, steps=20)
    run_node(recorder, clock, "8", 0.5)
    recorder.finish_handler("4", {}, "p")  # cached: finished without starting
    times = recorder.node_times()
    assert [(t.node_id, t.class_type, t.title) for t in times] == [
        ("3", "KSampler", "Sampler"), ("8", "VAEDecode", "VAEDecode")]
    assert times[0].seconds == pytest.approx(2.0) and times[1].seconds == pytest.approx(0.5)
    assert times[0].steps == 20 and times[0].it_per_s == pytest.approx(10.0)
    assert times[1].it_per_s is None
    assert recorder.cached == ["4"]


def test_own_node_is_not_recorded():
    recorder, clock = recorder_with({"9": {"class_type": "CourierBenchmark"}})
    run_node(recorder, clock, "9", 1.0, steps=3)
    assert recorder.node_times() == [] and recorder.updates == {} and not recorder.busy()


def test_nodes_that_ran_before_the_benchmark_node_are_reported():
    states = {"1": {"state": State.Finished}, "2": {"state": State.Pending}, "9": {"state": State.Running}}
    recorder, _ = recorder_with(states=states)
    assert recorder.ran_before == ["1"]


def test_rate_needs_two_updates():
    assert steps_per_second([]) is None
    assert steps_per_second([(1.0, 1)]) is None
    assert steps_per_second([(1.0, 1), (1.0, 2)]) is None
    assert steps_per_second([(1.0, 1), (3.0, 5)]) == 2.0


async def test_waits_through_synchronous_nodes():
    """ComfyUI runs the other nodes without yielding; the waiter resumes after them."""
    recorder, clock = recorder_with({"1": {"class_type": "A"}, "2": {"class_type": "B"}})
    waiter = asyncio.create_task(recorder.until_idle())
    await asyncio.sleep(0)  # the Benchmark node's first step, as ComfyUI gives it
    run_node(recorder, clock, "1", 1.0)
    run_node(recorder, clock, "2", 1.0)
    await asyncio.wait_for(waiter, 1)
    assert [t.node_id for t in recorder.node_times()] == ["1", "2"]


async def test_waits_for_a_pending_async_node():
    recorder, clock = recorder_with({"5": {"class_type": "AsyncApiNode"}})
    waiter = asyncio.create_task(recorder.until_idle())
    await asyncio.sleep(0)
    recorder.start_handler("5", {}, "p")  # an async node awaiting I/O: the loop is free
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiter.done()
    clock.now = 3.0
    recorder.finish_handler("5", {}, "p")
    await asyncio.wait_for(waiter, 1)
    assert recorder.node_times()[0].seconds == 3.0
