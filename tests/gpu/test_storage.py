"""Benchmark runs through the store's real SQL (embedded PostgreSQL: the ``store`` fixture)."""

from comfyui_courier.gpu import compare, storage
from comfyui_courier.gpu.compare import Side
from comfyui_courier.gpu.runs import BenchmarkRun
from comfyui_courier.gpu.stats import summarize


def run(workflow, device, wall, host="box"):
    return BenchmarkRun(
        workflow=workflow, device=device, host=host, comfyui_version="0.3.64", torch_version="2.8.0",
        repeats=len(wall), warmup=1, wall_s=wall, stats=summarize(wall).as_dict(),
        per_node={"3": {"node_id": "3", "class_type": "KSampler", "title": "KSampler", "runs": len(wall),
                        "mean_s": 1.0, "median_s": 1.0, "share": 0.5, "steps": 20, "it_per_s": 20.0}},
        peak_memory_bytes=5 * 2**30, extra={"memory_kind": "cuda", "session": "abc", "missing_runs": []})


async def test_a_run_round_trips(store):
    mine = run("flux", "NVIDIA H200", [1.5, 1.25, 1.75])
    stored = await storage.save_run(store.pool, mine)
    assert stored.id is not None and stored.created_at is not None
    (loaded,) = await storage.load_runs(store.pool, workflow="flux")
    for field in ("workflow", "device", "host", "comfyui_version", "torch_version", "repeats", "warmup",
                  "wall_s", "stats", "per_node", "peak_memory_bytes", "extra"):
        assert getattr(loaded, field) == getattr(mine, field), field


async def test_comparison_from_stored_runs_and_the_reference(store):
    await storage.save_run(store.pool, run("SD 3.5", "NVIDIA H200", [3.2, 2.8, 3.0]))
    await storage.save_run(store.pool, run("SD 3.5", "NVIDIA H200", [2.2, 1.8, 2.0]))  # newest wins
    await storage.save_run(store.pool, run("flux", "NVIDIA H200", [1.0]))  # no reference row: left out
    stored = await storage.load_runs(store.pool)
    reference = compare.reference_data()
    table = compare.build_table(compare.reference_runs() + stored, Side(**reference["old"]),
                                Side("NVIDIA H200", "box"))
    assert [(r.workflow, r.old_s, r.new_s) for r in table.rows] == [("SD 3.5", 8.96, 2.0)]
    assert round(table.rows[0].speedup_pct, 2) == 77.68
