"""The model options without a bot: decimals, names and repeatable options in the one grammar, which file
a typed name means, and the graph a job runs (checkpoint, LoRA chain, cfg, img2img, native size)."""

import pytest

from comfyui_courier.bot.options import choose, layered, option_lines, option_message, split_options
from comfyui_courier.core import i18n
from comfyui_courier.jobs import model_graph
from comfyui_courier.jobs.model_names import job_graph, kinds, resolve
from comfyui_courier.jobs.options import OptionError, command_options, declared
from comfyui_courier.jobs.seed import seed_manifest, shipped_workflow
from comfyui_courier.jobs.workflow import nodes_of

IMG = shipped_workflow(seed_manifest()["img"])
SPEC = command_options(IMG)
CHECKPOINTS = ["tiny-sd15.safetensors", "twin-tiny-sd15.safetensors", "sdxl/juggernautXL_v9.safetensors",
               "sd_xl_base_1.0.safetensors"]


def chosen_of(text: str, defaults: str = "") -> dict:
    return choose(split_options(text)[1], split_options(defaults)[1], SPEC)[0]


def refusal(text: str) -> OptionError:
    with pytest.raises(OptionError) as raised:
        chosen_of(text)
    return raised.value


def test_a_declaration_takes_decimal_ranges_names_and_a_count():
    assert declared("cfg=1.5-12 strength=0.05-1 model lora=2") == {
        "cfg": (1.5, 12.0), "strength": (0.05, 1.0), "model": None, "lora": (1, 2)}
    assert declared("cfg strength lora") == {"cfg": (1.0, 30.0), "strength": (0.05, 1.0), "lora": (1, 4)}


@pytest.mark.parametrize(("text", "why"), [
    ("cfg=1.5.2", "decimal range"), ("steps=1.5-8", "whole number range"), ("lora=5", "within 1-4"),
    ("strength=0.5-2", "within 0-1"), ("model=3", "model takes no range"), ("lora=0.5", "whole number"),
])
def test_a_malformed_decimal_or_count_declaration_says_why(text, why):
    with pytest.raises(ValueError, match=why):
        declared(text)


def test_img_offers_the_model_options_and_its_declared_ranges():
    assert SPEC.ranges == {"size": (64, 2048), "steps": (1, 150), "n": (1, 4), "neg": None, "model": None,
                           "lora": (1, 4), "cfg": (0.0, 30.0), "strength": (0.05, 1.0)}


def test_model_options_are_offered_only_where_the_graph_has_their_nodes():
    demo = command_options(shipped_workflow(seed_manifest()["demo"]))
    assert not {"model", "lora", "cfg", "strength"} & set(demo.ranges)
    sd3 = model_graph.offered(shipped_workflow(seed_manifest()["sd3"]))  # its latent is no EmptyLatentImage
    assert sd3 == {"model": True, "lora": True, "cfg": True, "strength": False}


def test_decimals_names_and_repeated_loras_are_read():
    chosen = chosen_of("a cat --model tiny --lora tiny-lora:0.8 --lora detail --lora x:-1.5 --cfg 6.5 "
                       "--strength .5 --size 128x128")
    assert chosen == {"model": "tiny", "lora": (("tiny-lora", 0.8), ("detail", 1.0), ("x", -1.5)), "cfg": 6.5,
                      "strength": 0.5, "size": (128, 128)}


@pytest.mark.parametrize(("text", "key", "params"), [
    ("--cfg 31", "option_bad_decimal", {"name": "cfg", "low": "0", "high": "30", "value": "31"}),
    ("--cfg 1e3", "option_bad_decimal", {"name": "cfg", "low": "0", "high": "30", "value": "1e3"}),
    ("--cfg nan", "option_bad_decimal", {"name": "cfg", "low": "0", "high": "30", "value": "nan"}),
    ("--strength 0.01", "option_bad_decimal", {"name": "strength", "low": "0.05", "high": "1", "value": "0.01"}),
    ("--lora a:heavy", "option_bad_lora", {"value": "a:heavy", "low": "-10", "high": "10"}),
    ("--lora a:11", "option_bad_lora", {"value": "a:11", "low": "-10", "high": "10"}),
    ("--lora :0.5", "option_bad_lora", {"value": ":0.5", "low": "-10", "high": "10"}),
    ("--lora a --lora b --lora c --lora d --lora e", "option_too_many", {"name": "lora", "high": 4}),
    ("--model a --model b", "option_twice", {"name": "model"}),
    ("--size 32x32", "option_bad_size", {"value": "32x32", "low": 64, "high": 2048}),
    (f"--model {'m' * 201}", "option_bad_name", {"value": "m" * 23 + "…", "limit": 200}),
])
def test_a_bad_value_is_refused_with_its_reason(text, key, params):
    error = refusal(text)
    assert (error.key, error.params) == (key, params)
    for language in i18n.LANGUAGES:
        assert option_message(error, lambda k, **p: i18n.text(language, k, **p), "img", SPEC)  # noqa: B023


def test_a_size_of_one_number_is_a_square():
    assert chosen_of("--size 128")["size"] == (128, 128)
    assert chosen_of("--size 100")["size"] == (96, 96)  # rounded to multiples of 8, as WxH


def test_a_declared_count_caps_the_repeats():
    spec = command_options({**IMG, "1": {**IMG["1"], "inputs": {**IMG["1"]["inputs"], "options": "lora=1"}}})
    with pytest.raises(OptionError, match="option_too_many"):
        choose([("lora", "a"), ("lora", "b")], [], spec)


def test_defaults_layer_under_typed_options_and_loras_come_from_one_source():
    user, command = split_options("--lora mine:0.5 --lora also --cfg 5")[1], split_options("--model x --cfg 9")[1]
    chosen = choose(split_options("a cat --steps 4")[1], layered(user, command), SPEC)[0]
    assert chosen == {"steps": 4, "lora": (("mine", 0.5), ("also", 1.0)), "cfg": 5.0, "model": "x"}
    typed = choose(split_options("--lora typed")[1], layered(user, command), SPEC)[0]
    assert typed["lora"] == (("typed", 1.0),) and typed["cfg"] == 5.0


def test_help_describes_the_model_options():
    lines = option_lines(SPEC, lambda k, **p: i18n.text("en", k, **p))
    assert "--cfg X — how closely the picture follows the prompt, from 0 to 30" in lines
    assert any(line.startswith("--lora name[:weight]") and "up to 4" in line for line in lines)
    assert any(line.startswith("--strength X") and "0.05 to 1" in line for line in lines)


@pytest.mark.parametrize(("typed", "meant"), [
    ("tiny", "tiny-sd15.safetensors"),  # the one it begins
    ("tiny-sd15.safetensors", "tiny-sd15.safetensors"),
    ("TWIN", "twin-tiny-sd15.safetensors"),
    ("juggernaut", "sdxl/juggernautXL_v9.safetensors"),  # the one it is part of; the folder does not count
    ("sdxl/jugg", "sdxl/juggernautXL_v9.safetensors"),
    ("sd_xl_base_1.0", "sd_xl_base_1.0.safetensors"),
])
def test_a_typed_name_means_the_file_it_names_begins_or_is_part_of(typed, meant):
    assert resolve("model", typed, CHECKPOINTS) == meant


def test_an_exact_name_with_its_folder_means_that_file_though_another_folder_has_its_namesake():
    names = ["tiny-sd15.safetensors", "sub/tiny-sd15.safetensors", "other/tiny-sd15.safetensors"]
    assert resolve("model", "tiny-sd15.safetensors", names) == "tiny-sd15.safetensors"
    assert resolve("model", "sub/tiny-sd15.safetensors", names) == "sub/tiny-sd15.safetensors"
    assert resolve("model", "SUB\\tiny-sd15.safetensors", names) == "sub/tiny-sd15.safetensors"  # Windows' separator
    with pytest.raises(OptionError) as raised:  # the folder left out: each folder's file is meant as much
        resolve("model", "tiny-sd15.safetensors", names[1:])
    assert raised.value.key == "model_ambiguous"


def test_a_name_of_several_files_or_none_is_refused_naming_the_close_ones():
    with pytest.raises(OptionError) as raised:
        resolve("model", "sd15", CHECKPOINTS)
    assert raised.value.key == "model_ambiguous"
    assert raised.value.params["matches"] == "tiny-sd15.safetensors, twin-tiny-sd15.safetensors"
    with pytest.raises(OptionError) as raised:
        resolve("model", "tinny-sd15", CHECKPOINTS)
    assert raised.value.key == "model_unknown" and "tiny-sd15.safetensors" in raised.value.params["matches"]
    with pytest.raises(OptionError) as raised:
        resolve("lora", "x", [])
    assert (raised.value.key, raised.value.params) == ("model_none", {"option": "lora"})
    text = i18n.text("en", "model_ambiguous", **{**raised.value.params, "name": "sd15", "matches": "a, b"})
    assert text == "--lora “sd15” matches several files: a, b. Type more of the name."


def test_model_files_are_classified_by_the_input_that_offers_them():
    info = {"CheckpointLoaderSimple": {"input": {"required": {"ckpt_name": [["b.safetensors", "a.ckpt"]]}}},
            "LoraLoaderModelOnly": {"input": {"required": {"lora_name": ["COMBO", {"options": ["l.safetensors"]}]}}},
            "UpscaleModelLoader": {"input": {"required": {"model_name": [["x4.pth"]]}}}}
    assert kinds(info) == {"checkpoints": ["a.ckpt", "b.safetensors"], "loras": ["l.safetensors"]}


def test_the_job_graph_gets_the_checkpoint_a_lora_chain_and_cfg():
    graph = model_graph.apply(IMG, checkpoint="tiny-sd15.safetensors", loras=[("a.safetensors", 0.8),
                                                                             ("b.safetensors", 1.0)], cfg=4.5)
    (loader,) = nodes_of(graph, "CheckpointLoaderSimple")
    assert graph[loader]["inputs"]["ckpt_name"] == "tiny-sd15.safetensors"
    first, second = sorted(nodes_of(graph, "LoraLoader"), key=int)
    assert graph[first]["inputs"] | {} == {"model": [loader, 0], "clip": [loader, 1], "lora_name": "a.safetensors",
                                           "strength_model": 0.8, "strength_clip": 0.8}
    assert graph[second]["inputs"]["model"] == [first, 0] and graph[second]["inputs"]["clip"] == [first, 1]
    takers = [value for node in graph.values() for value in node["inputs"].values()
              if value in ([loader, 0], [loader, 1])]
    assert takers == [[loader, 0], [loader, 1]]  # only the chain takes the loader's MODEL and CLIP now
    (sampler,) = nodes_of(graph, "KSampler")
    assert graph[sampler]["inputs"]["model"] == [second, 0] and graph[sampler]["inputs"]["cfg"] == 4.5
    assert IMG[loader]["inputs"]["ckpt_name"] != "tiny-sd15.safetensors"  # the stored graph is untouched


def test_img2img_starts_the_sampler_from_the_picture_with_the_strength():
    graph = model_graph.apply(IMG, strength=0.5)
    (sampler,) = nodes_of(graph, "KSampler")
    (encode,) = nodes_of(graph, "VAEEncode")
    (decode,) = nodes_of(graph, "VAEDecode")
    (source,) = nodes_of(graph, "CourierTelegramInput")
    assert graph[sampler]["inputs"]["latent_image"] == [encode, 0] and graph[sampler]["inputs"]["denoise"] == 0.5
    assert graph[encode]["inputs"] == {"pixels": [source, 1], "vae": graph[decode]["inputs"]["vae"]}
    assert not nodes_of(graph, "EmptyLatentImage")


def test_a_chosen_size_turns_the_native_size_off():
    (native,) = nodes_of(IMG, "CourierNativeSize")
    assert IMG[native]["inputs"]["native"] is True
    assert model_graph.apply(IMG, sized=True)[native]["inputs"]["native"] is False
    assert model_graph.apply(IMG)[native]["inputs"]["native"] is True


def test_only_a_typed_size_turns_the_native_size_off_an_ar_keeps_the_model_s_pixel_count():
    (native,) = nodes_of(IMG, "CourierNativeSize")
    files = {"checkpoints": {"a.safetensors"}}
    by_ar = job_graph(IMG, chosen_of("--ar 2:1"), files, picture=False)
    assert by_ar[native]["inputs"]["native"] is True
    assert job_graph(IMG, chosen_of("--size 640"), files, picture=False, exact_size=True)[native]["inputs"][
        "native"] is False
    (loader,) = nodes_of(by_ar, "CheckpointLoaderSimple")
    assert by_ar[loader]["inputs"]["ckpt_name"] == "a.safetensors"  # no --model: the first there is
