"""A command's options without a bot: the declaration, what a graph offers, each check, the jobs they make."""

import pytest

from comfyui_courier.jobs.options import (
    DEFAULT_RANGES,
    MAX_SEED,
    WIDEST,
    OptionError,
    OptionSpec,
    check,
    command_options,
    declared,
    plan,
)
from comfyui_courier.jobs.seed import seed_manifest, shipped_workflow
from comfyui_courier.jobs.workflow import WorkflowError, fill_job

INPUT = "CourierTelegramInput"


def graph(input_values: dict, *links: tuple[str, int]) -> dict:
    """An Input (node "1") whose outputs ``links`` (input name, output index) feed one saving node."""
    return {"1": {"class_type": INPUT, "inputs": {"command": "x", "prompt": "p", "seed": 0, "width": 512,
                                                  "height": 512, **input_values}},
            "2": {"class_type": "CourierTelegramOutput",
                  "inputs": {f"in{i}": ["1", index] for i, (_, index) in enumerate(links)}}}


def spec_of(name: str) -> OptionSpec:
    return command_options(shipped_workflow(seed_manifest()[name]))


@pytest.mark.parametrize(("text", "expected"), [
    ("", {}),
    ("size steps n neg", {name: DEFAULT_RANGES[name] for name in ("size", "steps", "n", "neg")}),
    ("size=256-2048, steps=1-8 n=4", {"size": (256, 2048), "steps": (1, 8), "n": (1, 4)}),
    ("STEPS=50", {"steps": (1, 50)}),
])
def test_a_declaration_names_options_and_ranges(text, expected):
    assert declared(text) == expected


@pytest.mark.parametrize(("text", "why"), [
    ("colour", "'colour' is not one of"),
    ("seed", "'seed' is not one of"),  # always offered, never declared
    ("steps=8-1", "low before high"),
    ("n=5", "within 1-4"),
    ("size=8-100", "within 16-8192"),
    ("neg=3", "neg takes no range"),
    ("steps=1-", "is not one of"),
])
def test_a_malformed_declaration_says_why(text, why):
    with pytest.raises(ValueError, match=why):
        declared(text)


def test_an_option_is_offered_only_where_the_graph_uses_it():
    everything = graph({"options": "size steps n neg"}, ("w", 4), ("s", 8), ("neg", 9), ("b", 10))
    assert set(command_options(everything).ranges) == {"size", "steps", "n", "neg"}
    assert command_options(everything).batch
    only_height = graph({"options": "size steps n neg"}, ("h", 5))
    assert set(command_options(only_height).ranges) == {"size", "n"} and not command_options(only_height).batch
    card = graph({"options": "size"}, ("image", 1))  # the prompt card is width x height
    assert set(command_options(card).ranges) == {"size"}
    picture = graph({"options": "size", "require_image": True}, ("image", 1))  # the user's picture is not
    assert set(command_options(picture).ranges) == set()


def test_an_old_graph_without_a_declaration_offers_what_it_wires():
    """Published before options existed: the widget's default declaration, cut to what the graph uses."""
    old = graph({}, ("w", 4), ("h", 5), ("seed", 3))
    spec = command_options(old)
    assert spec.ranges == {"size": DEFAULT_RANGES["size"], "n": DEFAULT_RANGES["n"]}
    assert spec.offers("seed") and spec.size == (512, 512) and not spec.batch


def test_a_malformed_declaration_is_a_workflow_error():
    with pytest.raises(WorkflowError, match="not one of"):
        command_options(graph({"options": "size colour"}, ("w", 4)))
    with pytest.raises(WorkflowError, match="must be a text"):
        command_options(graph({"options": ["size"]}, ("w", 4)))


def test_a_size_or_steps_widget_turned_into_an_input_keeps_the_defaults():
    spec = command_options(graph({"width": ["9", 0], "steps": ["9", 1], "options": "size steps"}, ("w", 4), ("s", 8)))
    assert spec.size == (1024, 512) and spec.steps == 20  # what the Input runs with
    assert check("ar", "1:1", spec)[1] == (720, 720)


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("seed", "0", 0), ("seed", str(MAX_SEED), MAX_SEED), ("steps", "1", 1), ("steps", "8", 8), ("n", "4", 4),
    ("size", "256x2048", (256, 2048)), ("size", "300×260", (304, 256)), ("size", "1024X768", (1024, 768)),
    ("ar", "1:1", (1024, 1024)), ("ar", "16:9", (1360, 768)), ("ar", "9:16", (768, 1360)), ("ar", "4:1", (2048, 512)),
])
def test_a_value_in_range_is_taken(name, value, expected):
    assert check(name, value, spec_of("f"))[1] == expected


@pytest.mark.parametrize(("name", "value", "key", "params"), [
    ("seed", "-1", "option_bad_number", {"low": 0, "high": MAX_SEED}),
    ("seed", str(MAX_SEED + 1), "option_bad_number", {"low": 0, "high": MAX_SEED}),
    ("seed", "٧", "option_bad_number", {}),  # a digit, but not one a command takes
    ("steps", "0", "option_bad_number", {"low": 1, "high": 8}),
    ("steps", "9", "option_bad_number", {"low": 1, "high": 8}),
    ("steps", "4.5", "option_bad_number", {}),
    ("n", "5", "option_bad_number", {"low": 1, "high": 4}),
    ("size", "4096x512", "option_bad_size", {"low": 256, "high": 2048}),
    ("size", "4096", "option_bad_size", {}),  # one side: a square
    ("size", "512x", "option_bad_size", {}),
    ("size", "٣٠٠x٣٠٠", "option_bad_size", {}),
    ("ar", "5:1", "option_bad_ar", {"limit": "4"}),
    ("ar", "0:1", "option_bad_ar", {}),
    ("ar", "wide", "option_bad_ar", {}),
    ("neg", "x", "option_unknown", {"name": "neg"}),  # f's graph has no negative prompt
    ("colour", "red", "option_unknown", {"name": "colour"}),
    ("steps", None, "option_no_value", {"name": "steps"}),
])
def test_a_bad_value_names_the_option_and_the_range(name, value, key, params):
    with pytest.raises(OptionError) as raised:
        check(name, value, spec_of("f"))
    assert raised.value.key == key
    assert params.items() <= raised.value.params.items()


def test_a_long_bad_value_is_shortened_in_the_message():
    with pytest.raises(OptionError) as raised:
        check("steps", "9" * 100, spec_of("f"))
    assert len(raised.value.params["value"]) == 24


def test_n_is_one_batch_where_the_graph_takes_it_else_n_jobs_from_consecutive_seeds():
    chosen = {"n": 3, "size": (512, 768), "steps": 6}
    (batch,) = plan(chosen, spec_of("f"), seed=100)
    assert batch.seed == 100 and batch.inputs == {"width": 512, "height": 768, "steps": 6, "batch": 3}
    runs = plan({"n": 3, "seed": 7, "neg": "blurry"}, spec_of("wan"), seed=100)
    assert [run.seed for run in runs] == [7, 8, 9]
    assert all(run.inputs == {"negative": "blurry"} for run in runs)
    assert plan({}, spec_of("f"), seed=5) == plan({}, spec_of("demo"), seed=5)  # nothing chosen: one plain job
    assert plan({}, spec_of("f"), seed=5)[0].inputs == {}


def test_the_last_seed_of_n_jobs_must_fit():
    assert [run.seed for run in plan({"n": 2, "seed": MAX_SEED - 1}, spec_of("demo"), 0)] == [MAX_SEED - 1, MAX_SEED]
    with pytest.raises(OptionError) as raised:
        plan({"n": 3, "seed": MAX_SEED - 1}, spec_of("demo"), 0)
    assert raised.value.params["high"] == MAX_SEED - 2


def test_the_widest_spec_takes_whatever_some_graph_can():
    assert check("steps", "10000", WIDEST)[1] == 10000
    assert check("ar", "64:1", WIDEST)[1] == (8192, 128)
    assert check("neg", "blurry", WIDEST) == ("neg", "blurry")


def test_the_planned_inputs_are_what_fill_job_sets_on_the_input():
    workflow = shipped_workflow(seed_manifest()["sd3"])
    (run,) = plan({"size": (768, 512), "steps": 9, "neg": "fog", "n": 2}, command_options(workflow), seed=3)
    filled = fill_job(workflow, prompt="a cat", seed=run.seed, options=run.inputs)
    (node,) = [n for n in filled.values() if n["class_type"] == INPUT]
    assert {k: node["inputs"][k] for k in ("width", "height", "steps", "negative", "batch", "prompt", "seed")} == \
        {"width": 768, "height": 512, "steps": 9, "negative": "fog", "batch": 2, "prompt": "a cat", "seed": 3}


def published_at(width: int, height: int, steps: int = 20) -> OptionSpec:
    """The options of ComfyUI's default graph published with its latent at width x height (issue 29)."""
    from comfyui_courier.tests.jobs.test_autopublish import DEFAULT_SD, graph, published

    latent = {**DEFAULT_SD["5"], "inputs": {"batch_size": 1, "width": width, "height": height}}
    sampler = {**DEFAULT_SD["3"], "inputs": {**DEFAULT_SD["3"]["inputs"], "steps": steps}}
    return command_options(published(graph(**{"5": latent, "3": sampler})))


def test_a_published_graph_s_own_size_and_steps_lie_within_its_ranges():
    spec = published_at(128, 128, steps=150)
    assert spec.size == (128, 128) and spec.ranges["size"] == (64, 2048) and spec.ranges["steps"] == (1, 150)
    assert check("size", "128", spec)[1] == (128, 128) and check("steps", "150", spec)[1] == 150
    assert (spec.max_ratio, check("ar", "2:1", spec)[1], check("ar", "1:4", spec)[1]) == (4, (176, 96), (64, 256))
    tiny = published_at(64, 64)  # the lowest a graph's size widens the range to: --ar grows the short side
    assert (tiny.ranges["size"], check("ar", "4:1", tiny)[1], check("ar", "1:1", tiny)[1]) == \
        ((64, 2048), (256, 64), (64, 64))
    assert published_at(40, 48).ranges["size"] == (64, 2048)  # not below 64
    assert published_at(3000, 1000).ranges["size"] == (256, 3000)
    with pytest.raises(OptionError) as raised:
        check("ar", "5:1", spec)
    assert raised.value.params["limit"] == "4"
