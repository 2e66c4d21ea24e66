import pytest

from comfyui_courier.gpu import session
from comfyui_courier.gpu.recorder import RunResult
from comfyui_courier.gpu.session import RUN_KEY

PROMPT = {
    "1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0}},
    "2": {"class_type": "ImageBlur", "inputs": {"image": ["1", 0], "blur_radius": 3, "sigma": 1.0}},
    "3": {"class_type": "PreviewImage", "inputs": {"images": ["2", 0]}},
    "9": {"class_type": "CourierBenchmark", "inputs": {"repeats": 2, "warmup": 1}},
    "10": {"class_type": "PreviewAny", "inputs": {"source": ["9", 0]}},
}


def test_user_prompt_is_run_zero_and_copies_are_recognised():
    assert session.run_of(PROMPT, "9") is None
    bench = session.open_session("wf", "host", repeats=2, warmup=1)
    copies = session.queued_prompts(PROMPT, "9", bench)
    assert [session.run_of(c, "9") for c in copies] == [(bench.id, 1), (bench.id, 2), (bench.id, 3)]
    assert bench.report_run == 3


def test_copies_recompute_every_node_with_a_linked_input_and_keep_sources_cached():
    bench = session.open_session("wf", "host", repeats=2, warmup=1)
    run1, run2, report = session.queued_prompts(PROMPT, "9", bench)
    assert RUN_KEY not in run1["1"]["inputs"]  # a source: stays cached (warm run)
    assert run1["2"]["inputs"][RUN_KEY] == f"{bench.id}/1" and run2["2"]["inputs"][RUN_KEY] == f"{bench.id}/2"
    assert run1["10"]["inputs"][RUN_KEY] == f"{bench.id}/1"
    assert all(RUN_KEY not in node["inputs"] for node in PROMPT.values())  # the user's prompt untouched
    # the report run: the computing nodes carry the last run's key, so ComfyUI serves them from cache
    assert {k: v for k, v in report.items() if k != "9"} == {k: v for k, v in run2.items() if k != "9"}


def test_a_single_run_reports_from_the_users_own_prompt_cache():
    bench = session.open_session("wf", "host", repeats=1, warmup=0)
    (report,) = session.queued_prompts(PROMPT, "9", bench)
    assert {k: v for k, v in report.items() if k != "9"} == {k: v for k, v in PROMPT.items() if k != "9"}
    assert session.run_of(report, "9") == (bench.id, 1)


def test_measured_and_missing_runs():
    bench = session.open_session("wf", "host", repeats=3, warmup=1)
    for run, seconds in ((0, 9.0), (1, 1.0), (3, 3.0)):  # run 2 failed
        bench.runs[run] = RunResult(total_s=seconds, nodes=[])
    assert [r.total_s for r in bench.measured()] == [1.0, 3.0]
    assert bench.missing() == [2]
    assert bench.is_warmup(0) and not bench.is_warmup(1)


def test_sessions_are_found_closed_and_bounded():
    first = session.open_session("wf", "host", 1, 0)
    assert session.find_session(first.id) is first
    session.close_session(first.id)
    assert session.find_session(first.id) is None
    kept = session.open_session("wf", "host", 1, 0)
    for _ in range(session.KEEP_SESSIONS):
        session.open_session("wf", "host", 1, 0)
    assert session.find_session(kept.id) is None


def test_default_name_follows_the_graph_not_its_values():
    name = session.workflow_fingerprint(PROMPT, skip="9")
    assert name.startswith("workflow ") and len(name) == len("workflow ") + 8
    reseeded = {**PROMPT, "2": {"class_type": "ImageBlur", "inputs": {"image": ["1", 0], "blur_radius": 9,
                                                                      "sigma": 2.0}}}
    assert session.workflow_fingerprint(reseeded, skip="9") == name
    rewired = {**PROMPT, "3": {"class_type": "PreviewImage", "inputs": {"images": ["1", 0]}}}
    assert session.workflow_fingerprint(rewired, skip="9") != name


def test_runners_can_add_the_benchmark_node_to_a_stored_workflow():
    prompt = {"courier-benchmark": {"class_type": "X", "inputs": {}}}
    benchmarked = session.with_benchmark_node(prompt, repeats=4, warmup=2, workflow="flux", host="box")
    assert benchmarked["courier-benchmark-"] == {
        "class_type": "CourierBenchmark",
        "inputs": {"repeats": 4, "warmup": 2, "workflow_name": "flux", "host": "box", "save": True}}
    assert prompt == {"courier-benchmark": {"class_type": "X", "inputs": {}}}


@pytest.mark.parametrize("value", [None, 3, "no-slash", "abc/x", "/3", ["9", 0]])
def test_foreign_values_are_not_mistaken_for_a_run(value):
    prompt = {"9": {"class_type": "CourierBenchmark", "inputs": {RUN_KEY: value}}}
    assert session.run_of(prompt, "9") is None


def test_run_zero_made_for_a_session_matches_the_users_prompt_but_for_the_mark():
    bench = session.open_session("wf", "host", repeats=2, warmup=1)
    run0 = session.prompt_for_run(PROMPT, "9", bench, 0)
    assert session.run_of(run0, "9") == (bench.id, 0)
    assert {k: v for k, v in run0.items() if k != "9"} == {k: v for k, v in PROMPT.items() if k != "9"}
