import pytest

from comfyui_courier.gpu import session
from comfyui_courier.gpu.recorder import NodeTime, RunResult
from comfyui_courier.gpu.runs import aggregate_nodes, build_run, slowest_nodes


def result(total, sampler, decode, rate=None, peak=100):
    return RunResult(total_s=total, nodes=[NodeTime("3", "KSampler", "KSampler", sampler, 20, rate),
                                           NodeTime("8", "VAEDecode", "Decode", decode)],
                     peak_memory_bytes=peak, memory_kind="cuda", devices=["cuda:0"], prompt_id=f"p{total}")


def test_nodes_are_aggregated_over_runs():
    per_node = aggregate_nodes([result(2.0, 1.5, 0.4, 10.0), result(4.0, 3.5, 0.4, 6.0)])
    sampler = per_node["3"]
    assert (sampler["runs"], sampler["mean_s"], sampler["median_s"]) == (2, 2.5, 2.5)
    assert sampler["share"] == pytest.approx(2.5 / 3.0)
    assert sampler["it_per_s"] == 8.0 and sampler["steps"] == 20
    assert per_node["8"]["it_per_s"] is None
    assert [row["node_id"] for row in slowest_nodes(per_node)] == ["3", "8"]


def test_a_finished_session_becomes_one_row():
    bench = session.open_session("flux", "box", repeats=3, warmup=1)
    bench.runs = {0: result(9.0, 8.0, 0.5, peak=999), 1: result(2.0, 1.5, 0.4, peak=100),
                  2: result(3.0, 2.5, 0.4, peak=300)}  # run 3 never finished
    run = build_run(bench, "NVIDIA GeForce RTX 4090", {"comfyui": "0.3.64", "torch": "2.8.0", "python": "3.11"})
    assert (run.workflow, run.device, run.host) == ("flux", "NVIDIA GeForce RTX 4090", "box")
    assert (run.comfyui_version, run.torch_version) == ("0.3.64", "2.8.0")
    assert run.wall_s == [2.0, 3.0] and run.repeats == 2 and run.warmup == 1  # warm-up excluded
    assert run.stats["median"] == 2.5 and run.stats["n"] == 2
    assert run.peak_memory_bytes == 300
    assert run.extra["missing_runs"] == [3] and run.extra["memory_kind"] == "cuda"
    assert run.extra["devices"] == ["cuda:0"] and run.extra["prompt_ids"] == ["p2.0", "p3.0"]


def test_a_session_without_measured_runs_has_no_row():
    bench = session.open_session("flux", "box", repeats=1, warmup=1)
    bench.runs = {0: result(9.0, 8.0, 0.5)}
    with pytest.raises(ValueError):
        build_run(bench, "cpu", {})
