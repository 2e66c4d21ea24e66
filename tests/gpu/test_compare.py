from datetime import datetime, timedelta, timezone

import pytest

from comfyui_courier.gpu import compare
from comfyui_courier.gpu.compare import Side
from comfyui_courier.gpu.runs import BenchmarkRun

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def run(workflow, device, seconds, host="box", at=0):
    return BenchmarkRun(workflow=workflow, device=device, host=host, comfyui_version="0.3.64",
                        torch_version="2.8.0", repeats=len(seconds), warmup=1, wall_s=list(seconds),
                        stats={}, per_node={}, peak_memory_bytes=None, created_at=T0 + timedelta(minutes=at))


def test_reference_table_reproduces_the_published_speedups():
    data = compare.reference_data()
    table = compare.reference_table()
    published = {w["workflow"]: w["published_speedup_pct"] for w in data["workflows"]}
    assert [row.workflow for row in table.rows] == [w["workflow"] for w in data["workflows"]]
    for row in table.rows:
        assert row.speedup_pct == pytest.approx(published[row.workflow], abs=0.05), row.workflow


def test_reference_ratio_is_what_readers_call_speedup():
    sd35 = compare.reference_table().rows[0]
    assert (sd35.old_s, sd35.new_s) == (8.96, 5.96)
    assert f"{sd35.ratio:.2f}" == "1.50"
    assert compare.speedup_pct(10.0, 5.0) == 50.0 and compare.ratio(10.0, 5.0) == 2.0


def test_table_from_stored_runs_uses_each_sides_latest_run():
    runs = [
        run("flux", "RTX 4090", [5.0, 5.2, 4.8], at=0),
        run("flux", "RTX 4090", [4.0, 4.2, 3.8], at=5),  # newer: used
        run("flux", "RTX 5090", [2.0, 2.0, 2.0], at=1),
        run("sd3", "RTX 4090", [9.0], at=2),  # no 5090 run: no row
        run("flux", "RTX 5090", [1.0], host="elsewhere", at=9),  # another machine
    ]
    table = compare.build_table(runs, Side("RTX 4090", "box"), Side("RTX 5090", "box"))
    assert [(r.workflow, r.old_s, r.new_s) for r in table.rows] == [("flux", 4.0, 2.0)]
    assert table.rows[0].speedup_pct == 50.0
    anywhere = compare.build_table(runs, Side("RTX 4090"), Side("RTX 5090"), statistic="min")
    assert anywhere.rows[0].new_s == 1.0 and anywhere.statistic == "min"


def test_stored_runs_sit_beside_the_reference_rows():
    data = compare.reference_data()
    mine = run("SD 3.5", "NVIDIA H200", [3.0])
    table = compare.build_table(compare.reference_runs() + [mine], Side(**data["old"]), Side("NVIDIA H200"))
    assert [(r.workflow, r.old_s, r.new_s) for r in table.rows] == [("SD 3.5", 8.96, 3.0)]


def test_stored_statistics_are_used_when_present():
    stored = run("flux", "A", [1.0, 2.0, 9.0])
    assert compare.run_seconds(stored, "median") == 2.0
    stored.stats = {"median": 1.5}
    assert compare.run_seconds(stored, "median") == 1.5
    with pytest.raises(ValueError):
        compare.run_seconds(stored, "mode")


def test_text_rendering():
    table = compare.reference_table()
    text = compare.to_text(table)
    assert "old: NVIDIA GeForce RTX 4090" in text and "FLUX schnell" in text and "63.4 %" in text
    assert "2.73x" in text  # 4.92 / 1.80
