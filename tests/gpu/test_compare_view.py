"""What /compare and the compare routes show: two sides from stored runs, the seed's rows as reference."""

import io
from datetime import datetime, timedelta, timezone

import pytest
from PIL import Image

from comfyui_courier.gpu import compare_view
from comfyui_courier.gpu.compare import Side, reference_data
from comfyui_courier.gpu.runs import BenchmarkRun

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
XEON = "Intel(R) Xeon(R) CPU @ 2.20GHz"  # an '@' in a real device name


def run(workflow, device, seconds, host="box", at=0):
    return BenchmarkRun(workflow=workflow, device=device, host=host, comfyui_version="0.3.64",
                        torch_version="2.8.0", repeats=len(seconds), warmup=1, wall_s=list(seconds),
                        stats={}, per_node={}, peak_memory_bytes=None, created_at=T0 + timedelta(minutes=at))


def test_reference_rows_reproduce_the_published_speedups():
    reply, _, _ = compare_view.comparison([], Side("a"), Side("b"))
    published = {w["workflow"]: w for w in reference_data()["workflows"]}
    rows = reply["rows"]
    assert [r["workflow"] for r in rows] == list(published) and all(r["reference"] for r in rows)
    for row in rows:
        seed = published[row["workflow"]]
        assert (row["t_old"], row["t_new"]) == (seed["old_s"], seed["new_s"])
        assert row["speedup_pct"] == pytest.approx(seed["published_speedup_pct"], abs=0.05)
        assert row["published_speedup_pct"] == seed["published_speedup_pct"]
        assert row["ratio"] == pytest.approx(seed["old_s"] / seed["new_s"])
        assert "RTX 4090" in row["old"] and "RTX 5090" in row["new"]
    assert f"{rows[0]['ratio']:.2f}" == "1.50"  # SD 3.5
    assert reply["reference_source"].startswith("The project's seed")


def test_stored_rows_come_first_and_use_each_sides_latest_run():
    runs = [run("demo", XEON, [2.0, 2.2, 2.1], at=0), run("demo", XEON, [4.0], at=5),  # latest wins
            run("demo", "NVIDIA H200", [1.0], host="gpu", at=1), run("only-old", XEON, [1.0], at=2)]
    reply, _, _ = compare_view.comparison(runs, Side(XEON, "box"), Side("NVIDIA H200"))
    stored = [r for r in reply["rows"] if not r["reference"]]
    assert stored == [{"workflow": "demo", "old": f"{XEON} (box)", "new": "NVIDIA H200", "t_old": 4.0,
                       "t_new": 1.0, "speedup_pct": 75.0, "ratio": 4.0, "reference": False}]
    assert reply["rows"].index(stored[0]) == 0 and len(reply["rows"]) == 6
    assert [s["label"] for s in reply["sides"]] == [f"{XEON} (box)", "NVIDIA H200 (gpu)"]
    assert reply["old"] == {"device": XEON, "host": "box", "label": f"{XEON} (box)"}


def test_a_workflow_filter_keeps_matching_rows_only():
    runs = [run("demo", "cpu", [2.0]), run("demo", "gpu", [1.0]),
            run("other", "cpu", [1.0]), run("other", "gpu", [1.0])]
    reply, _, reference = compare_view.comparison(runs, Side("cpu"), Side("gpu"), workflow="demo")
    assert [r["workflow"] for r in reply["rows"]] == ["demo"] and reference is None
    reply, _, reference = compare_view.comparison(runs, Side("cpu"), Side("gpu"), workflow="FLUX schnell")
    assert [(r["workflow"], r["reference"]) for r in reply["rows"]] == [("FLUX schnell", True)]
    with pytest.raises(ValueError):
        compare_view.comparison(runs, Side("cpu"), Side("gpu"), statistic="max")


@pytest.mark.parametrize("text, known, side", [
    ("NVIDIA H200", (), Side("NVIDIA H200")),
    ("NVIDIA H200@box", (), Side("NVIDIA H200", "box")),
    (f"{XEON}", (XEON,), Side(XEON)),  # a known device as a whole
    (f"{XEON}@box", (XEON,), Side(XEON, "box")),
    (f"  {XEON} @ node-1 ", (), Side(XEON, "node-1")),
])
def test_sides_parse_device_and_host(text, known, side):
    assert compare_view.parse_side(text, known) == side


@pytest.mark.parametrize("text", ["", "   ", "@", "@box", "gpu@", "a\x00b", "a\nb", "\u202egpu", "x" * 257])
def test_bad_sides_are_refused(text):
    with pytest.raises(compare_view.BadSide):
        compare_view.parse_side(text)


def test_sides_are_picked_by_shared_workflows_and_the_slower_is_old():
    runs = [run("a", "fast", [1.0], at=1), run("b", "fast", [1.0], at=1),
            run("a", "slow", [3.0], at=2), run("b", "slow", [2.0], at=2),
            run("a", "lonely", [9.0], at=9)]  # newest, but shares only one workflow
    assert compare_view.pick_sides(runs) == (Side("slow", "box"), Side("fast", "box"))
    assert compare_view.pick_sides(runs[:2]) is None and compare_view.pick_sides([]) is None


def test_chart_stacks_the_reference_under_the_stored_table():
    runs = [run("demo", "cpu", [2.0]), run("demo", "gpu", [1.0])]
    _, table, reference = compare_view.comparison(runs, Side("cpu"), Side("gpu"))
    both = Image.open(io.BytesIO(compare_view.chart_png(table, reference)))
    banner = compare_view.BANNER_HEIGHT
    assert both.format == "PNG" and both.size == (960, 540 + banner + 540)
    alone = Image.open(io.BytesIO(compare_view.chart_png(table, None)))
    assert alone.size == (960, 540)
    pixels = both.convert("RGB")
    assert pixels.getpixel((0, 0)) == (255, 255, 255)
    assert pixels.getpixel((2, 541)) == compare_view.BANNER  # the strip that says "reference"
    tag = sum(pixels.getpixel((x, y)) == compare_view.TAG for x in range(960) for y in range(540, 540 + banner))
    assert tag > 50
    assert Image.open(io.BytesIO(compare_view.chart_png(None, reference))).size == (960, banner + 540)
    with pytest.raises(ValueError):
        compare_view.chart_png(None, None)
