import math

import pytest

from comfyui_courier.gpu import session
from comfyui_courier.tests.support.requires import require_comfy_api

io = require_comfy_api().io
from comfyui_courier.nodes.benchmark import Benchmark  # noqa: E402 - needs comfy_api importable


def test_the_node_has_no_linked_inputs_so_it_starts_first():
    inputs = Benchmark.INPUT_TYPES()
    declared = {**inputs["required"], **inputs["optional"]}
    assert all(spec[0] in ("INT", "STRING", "BOOLEAN") for spec in declared.values())
    assert Benchmark.OUTPUT_NODE and tuple(Benchmark.RETURN_TYPES) == ("STRING", "IMAGE")
    assert set(inputs["hidden"]) == {"prompt", "unique_id", "extra_pnginfo"}  # all three reach execute
    assert Benchmark.NODE_ID == "CourierBenchmark" == session.with_benchmark_node({}, 1, 0, "w")[
        "courier-benchmark"]["class_type"]


def test_every_queue_is_measured_anew():
    assert math.isnan(Benchmark.fingerprint_inputs(repeats=5, warmup=1))


async def test_two_benchmark_nodes_in_one_workflow_are_refused():
    prompt = {"1": {"class_type": "CourierBenchmark", "inputs": {}},
              "2": {"class_type": "CourierBenchmark", "inputs": {}}}
    with pytest.raises(ValueError, match="one Benchmark node per workflow"):
        await Benchmark.PREPARE_CLASS_CLONE({io.Hidden.prompt: prompt, io.Hidden.unique_id: "1"}).execute(1, 0)
