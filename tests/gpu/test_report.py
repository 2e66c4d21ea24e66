import numpy as np

from comfyui_courier.gpu import compare, report
from comfyui_courier.gpu.runs import BenchmarkRun
from comfyui_courier.gpu.stats import summarize


def sample_run(wall=(1.0, 2.0, 3.0), kind="cuda"):
    per_node = {
        "3": {"node_id": "3", "class_type": "KSampler", "title": "KSampler", "runs": 3, "mean_s": 1.6,
              "median_s": 1.6, "share": 0.8, "steps": 20, "it_per_s": 12.5},
        "8": {"node_id": "8", "class_type": "VAEDecode", "title": "VAE Decode", "runs": 3, "mean_s": 0.4,
              "median_s": 0.4, "share": 0.2, "steps": 0, "it_per_s": None},
    }
    return BenchmarkRun(workflow="flux schnell", device="NVIDIA GeForce RTX 4090", host="box",
                        comfyui_version="0.3.64", torch_version="2.8.0", repeats=len(wall), warmup=1,
                        wall_s=list(wall), stats=summarize(wall).as_dict(), per_node=per_node,
                        peak_memory_bytes=3 * 2**30, extra={"memory_kind": kind, "missing_runs": [2]})


def bars(image, colour, top, bottom, left=0, right=None):
    """(x, height) of each run of columns holding ``colour`` between rows top and bottom."""
    pixels = np.asarray(image)[top:bottom, left:right]
    counts = (pixels == np.array(colour)).all(axis=2).sum(axis=0)
    found, start = [], None
    for x, count in enumerate(list(counts) + [0]):
        if count and start is None:
            start = x
        elif not count and start is not None:
            found.append((start + left, int(counts[start:x].max())))
            start = None
    return found


def test_text_report_has_the_figures():
    text = report.benchmark_report(sample_run())
    assert "Benchmark: flux schnell" in text
    assert "device: NVIDIA GeForce RTX 4090 · host: box" in text
    assert "ComfyUI 0.3.64 · torch 2.8.0 · 3 measured runs after 1 warm-up" in text
    assert "mean 2.000 s · median 2.000 s · p95 2.900 s" in text
    assert "peak VRAM: 3.00 GiB" in text
    assert "did not finish (failed or interrupted): 2" in text
    lines = text.splitlines()
    sampler = lines.index("  #3 KSampler: 1.600 s (80.0 %) · 12.50 it/s")
    assert lines[sampler + 1] == "  #8 VAE Decode: 0.400 s (20.0 %)"
    assert lines[-1] == "runs (s): 1.000, 2.000, 3.000"
    assert "peak RSS" in report.benchmark_report(sample_run(kind="rss since window"))


def test_byte_sizes():
    assert report.format_bytes(None) == "unknown"
    assert report.format_bytes(512) == "512 B"
    assert report.format_bytes(3 * 2**20) == "3.00 MiB"


def test_benchmark_chart_draws_one_bar_per_run_in_proportion():
    image = report.benchmark_chart(sample_run())
    assert image.size == (report.WIDTH, report.HEIGHT) and image.mode == "RGB"
    runs = bars(image, report.NEW, 96, report.HEIGHT - 40, right=440)
    heights = [h for _, h in runs]
    assert len(heights) == 3 and heights[0] < heights[1] < heights[2]
    assert abs(heights[2] / heights[0] - 3.0) < 0.05
    nodes = np.asarray(image)[96:, 480:]
    assert (nodes == np.array(report.NEW)).all(axis=2).any()  # the node bars


def test_comparison_chart_draws_old_and_new_bars_per_workflow():
    table = compare.reference_table()
    image = report.comparison_chart(table)
    assert image.size == (report.WIDTH, report.HEIGHT) and image.mode == "RGB"
    old = bars(image, report.OLD, 100, report.HEIGHT - 70)
    new = bars(image, report.NEW, 100, report.HEIGHT - 70)
    assert len(old) == len(new) == len(table.rows)
    for (_, old_h), (_, new_h), row in zip(old, new, table.rows, strict=True):
        assert new_h < old_h
        assert abs(new_h / old_h - row.new_s / row.old_s) < 0.05


def test_empty_comparison_still_renders():
    empty = compare.Table(compare.Side("A"), compare.Side("B"), ())
    assert report.comparison_chart(empty).size == (report.WIDTH, report.HEIGHT)


def test_long_workflows_list_the_slowest_nodes_only():
    run = sample_run()
    run.per_node = {str(i): {"node_id": str(i), "class_type": "X", "title": "X", "runs": 1, "mean_s": i / 100,
                             "median_s": i / 100, "share": 0.01, "steps": 0, "it_per_s": None}
                    for i in range(30)}
    lines = report.benchmark_report(run).splitlines()
    assert "  #29 X: 0.290 s (1.0 %)" in lines and "  #9 X: 0.090 s (1.0 %)" not in lines
    assert "  … and 10 faster nodes" in lines
