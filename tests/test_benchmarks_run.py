"""Each benchmark run for real with a tiny budget, so none can rot unseen (issue 29): it must end with
exit status 0 and print at least one figure, every stdout line a well-formed figure
(``{"figure": name, "value": number, "unit": text}``, plus ``"partial": true`` where a part ran out of
its time). Those that need a real ComfyUI or anon use the fixtures' variables (``COMFYUI_DIR``,
``COURIER_ANON_BINARY``) and skip, or under COURIER_REQUIRE_ALL=1 fail, without them. Also: a part that
runs out of its time prints what it measured, marked partial, and says so, and the other parts still
print theirs (``channel.py``'s backlog, given far more jobs than its share of the budget allows)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from comfyui_courier.jobs.seed import seed_manifest
from comfyui_courier.tests.fixtures.comfyui import comfyui_python
from comfyui_courier.tests.support.requires import require_comfyui

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SLACK_S = 120  # over a run's own --budget: ComfyUI's start and the teardown (a busy CI machine)


def quick(name: str, *args: str, needs: tuple[str, ...] = (), expect: tuple[str, ...] = ()):
    """A run of ``name`` with ``args``, which ``needs`` parts and prints at least the figures ``expect``."""
    return pytest.param(name, args, needs, expect, id=f"{name}{'-' + args[1] if args[:1] == ('--parts',) else ''}")


QUICK_RUNS = [
    quick("gateway_checks", "--repeats", "50", "--budget", "3"),
    quick("load", "--chats", "4", "--commands", "20", "--budget", "40"),
    quick("channel", "--parts", "flood", "--commands", "20", "--chats", "4", "--budget", "40"),
    quick("strangers", "--rounds", "1", "--budget", "250"),  # a round needs 240 s left, takes seconds
    quick("backlog", "--rounds", "1", "--budget", "200", needs=("comfyui",)),  # a round needs 120 s left
    quick("startup", "--runs", "1", "--budget", "180", needs=("comfyui",)),  # four ComfyUI starts, 13-17 s each loaded
    quick("bench_node", "--repeats", "1", "--pairs", "0", "--size", "64", "--no-sampler", "--budget", "90",
          needs=("comfyui",)),
    quick("bot_overhead", "--jobs", "1", "--budget", "90", needs=("comfyui",)),
    quick("scaleout", "--jobs", "2", "--budget", "120", needs=("comfyui",)),
    quick("placement", "--jobs-per-user", "1", "--budget", "300", needs=("comfyui",)),
    quick("estimates", "--jobs", "4", "--budget", "120", expect=("estimate_jobs", "left_samples")),
    quick("onion", "--requests", "3", "--jobs", "1", "--budget", "150", needs=("anon", "comfyui"),
          expect=("privnet_bringup_s", "onion_added_rtt_ms", "onion_demo_job_added_ms")),
]


@pytest.mark.parametrize(("name", "args", "needs", "expect"), QUICK_RUNS)
def test_the_benchmark_runs_with_a_tiny_budget_and_prints_figures(name, args, needs, expect, tmp_path, request):
    env = {"COURIER_ANON_BINARY": str(request.getfixturevalue("anon_binary"))} if "anon" in needs else {}
    figures, said = run_benchmark(name, args, tmp_path, needs, env)
    names = [figure["figure"] for figure in figures]
    assert len(set(names)) == len(names), names  # each figure once
    assert set(expect) <= set(names), said[-3000:]


def test_a_part_that_runs_out_of_time_prints_its_partial_figures_and_the_others_theirs(tmp_path):
    figures, said = run_benchmark("channel", ("--parts", "jobs,backlog", "--jobs", "1", "--backlog", "2000",
                                              "--backlog-users", "20", "--budget", "50"), tmp_path, ("comfyui",))
    named = {figure["figure"]: figure for figure in figures}
    assert "partial" not in named["requests_per_job_mean"]  # the jobs part ended in its time
    assert named["result_wait_median_ms"]["partial"] is True  # 2000 jobs do not fit in the backlog's share
    assert "backlog: gave up waiting for the backlog (the part's time ran out)" in said, said[-3000:]
    assert "partial" not in named["max_chat_requests_in_any_10s"]  # over every part, printed at the end


def test_checks_cut_short_by_the_budget_print_each_commands_partial_median(tmp_path):
    """``gateway_checks.py`` crashed here (``statistics.median([])``, ``body`` unbound) and lost the JSON."""
    figures, said = run_benchmark("gateway_checks", ("--repeats", "1000000", "--budget", "2"), tmp_path, ())
    assert len(figures) == len(seed_manifest()) + 1 and all(figure["partial"] for figure in figures), figures
    assert "the figure is partial" in said


def run_benchmark(name: str, args: tuple[str, ...], tmp_path: Path, needs: tuple[str, ...],
                  env: dict[str, str] | None = None) -> tuple[list[dict], str]:
    """Its figures (each stdout line, parsed and checked) and its stderr."""
    env = {**os.environ, "TMPDIR": str(tmp_path), **(env or {})}
    python = comfyui_python(require_comfyui()) if "comfyui" in needs else sys.executable
    out = ("--out", str(tmp_path / f"{name}.json")) if name in ("gateway_checks", "onion", "startup") else ()
    budget = float(args[args.index("--budget") + 1])
    done = subprocess.run([python, str(BENCHMARKS / f"{name}.py"), *args, *out], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=budget + SLACK_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = [well_formed(line) for line in done.stdout.splitlines()]
    assert figures, done.stderr[-3000:]
    return figures, done.stderr


def well_formed(line: str) -> dict:
    figure = json.loads(line)
    assert set(figure) in ({"figure", "value", "unit"}, {"figure", "value", "unit", "partial"}), line
    assert isinstance(figure["figure"], str) and figure["figure"] and isinstance(figure["unit"], str), line
    value = figure["value"]
    assert isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value), line
    assert figure.get("partial", True) is True, line
    return figure
