"""Options in the command text, without Telegram: reading, writing back, typed over defaults, the messages."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comfyui_courier.bot.options import OPTION, choose, format_options, option_lines, option_message, split_options
from comfyui_courier.core import i18n
from comfyui_courier.jobs.options import MAX_SEED, SHOWN, WIDEST, OptionError, command_options, plan
from comfyui_courier.jobs.seed import seed_manifest, shipped_workflow

LANGUAGES = i18n.LANGUAGES
SPECS = {name: command_options(shipped_workflow(entry)) for name, entry in seed_manifest().items()}
EXAMPLES = 300
HOSTILE = "\x00\n\t \u200b\ufeff\ud800—–-:x×0123456789"


def say_in(language):
    return lambda key, **params: i18n.text(language, key, **params)


@pytest.mark.parametrize(("text", "prompt", "pairs"), [
    ("a cat", "a cat", []),
    ("--seed 7 --ar 16:9 a cat", "a cat", [("seed", "7"), ("ar", "16:9")]),
    ("a cat --seed 7", "a cat", [("seed", "7")]),
    ("a cat --seed 7 on a mat", "a cat on a mat", [("seed", "7")]),
    ("a cat --neg blurry, dark --steps 4", "a cat", [("neg", "blurry, dark"), ("steps", "4")]),
    ("--neg blurry", "", [("neg", "blurry")]),
    ("a cat --neg", "a cat", [("neg", None)]),
    ("a cat --seed", "a cat", [("seed", None)]),
    ("--seed --n 2 x", "x", [("seed", None), ("n", "2")]),
    ("—seed 7 –n 2 x", "x", [("seed", "7"), ("n", "2")]),  # the dashes a phone makes of --
    ("--SEED 7 x", "x", [("seed", "7")]),
    ("line one\nline two --seed 1", "line one\nline two", [("seed", "1")]),
    ("a — b --- c -5 --9", "a — b --- c -5 --9", []),  # dashes that make no option stay in the prompt
    ("a -- b", "a b", [("", None)]),  # but "--" alone is an option without its name (refused)
    ("--seed=7 x --ar=16:9", "x", [("seed", "7"), ("ar", "16:9")]),
    ("--neg=blurry dark --seed= x", "x", [("neg", "blurry dark"), ("seed", None)]),
    ("--seed -5 x", "x", [("seed", "-5")]),
])
def test_options_are_read_anywhere_in_the_text(text, prompt, pairs):
    assert split_options(text) == (prompt, pairs)


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(st.lists(st.sampled_from(HOSTILE) | st.sampled_from(["--seed", "--neg", "--ar", "—n", "--x"])
                | st.text(max_size=3), max_size=30).map("".join))
def test_reading_any_text_never_fails_and_leaves_no_option_in_the_prompt(text):
    prompt, pairs = split_options(text)
    assert not any(OPTION.fullmatch(word) for word in prompt.split())
    for name, value in pairs:
        assert name == name.lower() and OPTION.fullmatch(f"--{name}")
        assert value is None or (value and not OPTION.fullmatch(value.split()[0]))


word = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp", "Cf")), min_size=1, max_size=8).filter(
    lambda w: not OPTION.fullmatch(w) and w.strip() == w and w.isprintable())
words = st.lists(word, min_size=1, max_size=5).map(" ".join)
pair = st.one_of(st.tuples(st.sampled_from([n for n in SHOWN if n != "neg"]), word), st.tuples(st.just("neg"), words))


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(pairs=st.lists(pair, max_size=6), prompt=st.just("") | words)
def test_written_options_read_back_the_same(pairs, prompt):
    text = format_options(pairs, prompt)
    in_order = [p for p in pairs if p[0] != "neg"] + [p for p in pairs if p[0] == "neg"]
    assert split_options(text) == (prompt, in_order)


values = st.one_of(st.none(), st.sampled_from(["0", "1", "4", "5", "8", "99", str(MAX_SEED), "16:9", "1:5", "0:0",
                                               "512x512", "9000x9000", "x", "٧", "blurry"]), word)
any_pairs = st.lists(st.tuples(st.sampled_from([*SHOWN, "foo", "seeds"]), values), max_size=5)


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(command=st.sampled_from(sorted(SPECS)), typed=any_pairs, defaults=any_pairs)
def test_any_options_give_jobs_within_range_or_a_message_in_every_language(command, typed, defaults):
    spec = SPECS[command]
    try:
        chosen, used = choose(typed, defaults, spec)
        runs = plan(chosen, spec, seed=123)
    except OptionError as error:
        for language in LANGUAGES:
            assert option_message(error, say_in(language), command, spec)
        return
    assert 1 <= len(runs) <= 4 and all(0 <= run.seed <= MAX_SEED for run in runs)
    for run in runs:
        if "width" in run.inputs:
            low, high = spec.ranges["size"]
            assert low <= run.inputs["width"] <= high and low <= run.inputs["height"] <= high
        if "steps" in run.inputs:
            assert spec.ranges["steps"][0] <= run.inputs["steps"] <= spec.ranges["steps"][1]
        assert set(run.inputs) <= {"width", "height", "steps", "negative", "batch"}
    assert {name for name, _ in used} <= set(SHOWN)


def test_typed_options_win_over_defaults_and_defaults_apply_only_where_they_can():
    defaults = [("ar", "2:1"), ("steps", "30"), ("neg", "fog")]
    chosen, used = choose([("size", "512x512")], defaults, SPECS["sd3"])
    assert chosen == {"size": (512, 512), "steps": 30, "neg": "fog"}  # --size typed: the default --ar gives way
    assert used == [("size", "512x512"), ("steps", "30"), ("neg", "fog")]
    chosen, used = choose([], defaults, SPECS["f"])  # f: steps 1-8, no negative prompt
    assert chosen == {"size": (1456, 720)} and used == [("ar", "2:1")]
    assert choose([], defaults, SPECS["demoedit"]) == ({}, [])


def test_an_option_given_twice_is_refused():
    for typed, shown in (([("seed", "1"), ("seed", "2")], "seed"), ([("ar", "1:1"), ("size", "512x512")], "ar/--size")):
        with pytest.raises(OptionError) as raised:
            choose(typed, [], SPECS["demo"])
        assert raised.value.key == "option_twice" and raised.value.params["name"] == shown


def test_the_unknown_option_message_lists_what_the_command_takes():
    with pytest.raises(OptionError) as raised:
        choose([("neg", "x")], [], SPECS["f"])
    assert option_message(raised.value, say_in("en"), "f", SPECS["f"]) == \
        "/f has no option --neg. It takes: --seed, --ar, --size, --steps, --n."
    assert "--seed, --ar, --size, --steps, --n" in option_message(raised.value, say_in("de"), "f", SPECS["f"])


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("command", sorted(SPECS))
def test_help_describes_each_offered_option_in_every_language(command, language):
    lines = option_lines(SPECS[command], say_in(language))
    assert [line.split()[0] for line in lines] == [f"--{n}" for n in SHOWN if n in ("seed", *SPECS[command].ranges)
                                                   or (n == "ar" and "size" in SPECS[command].ranges)]
    assert all("None" not in line for line in lines)


def test_help_shows_the_ranges_and_defaults():
    assert option_lines(SPECS["f"], say_in("en"))[1:4] == [
        "--ar W:H — aspect ratio, from 1:4 to 4:1, about as many pixels as 1024×1024",
        "--size WxH — width and height, each from 256 to 2048 (default 1024x1024)",
        "--steps N — sampling steps, from 1 to 8 (default 4)"]


def test_help_of_a_graph_sized_by_its_model_shows_the_model_s_own_size():
    """/img's Native Size node makes an SD 1.x checkpoint's picture 512x512, whatever the Input says."""
    assert option_lines(SPECS["img"], say_in("en"))[1:3] == [
        "--ar W:H — aspect ratio, from 1:4 to 4:1, about as many pixels as the model's own size",
        "--size WxH — width and height, each from 64 to 2048 (default: the model's own size, "
        "512x512 for an SD 1.x checkpoint, 1024x1024 for SDXL and newer)"]


def test_defaults_are_checked_against_the_widest_ranges():
    chosen, _ = choose([("steps", "500"), ("n", "4"), ("ar", "21:9")], [], WIDEST)
    assert chosen["steps"] == 500 and chosen["n"] == 4
    with pytest.raises(OptionError):
        choose([("n", "5")], [], WIDEST)


def test_help_of_a_published_128_px_graph_offers_its_own_size_and_sensible_ratios():
    from comfyui_courier.tests.jobs.test_options import published_at

    assert option_lines(published_at(128, 128), say_in("en"))[1:3] == [
        "--ar W:H — aspect ratio, from 1:4 to 4:1, about as many pixels as 128×128",
        "--size WxH — width and height, each from 64 to 2048 (default 128x128)"]
