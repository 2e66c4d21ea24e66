"""Publishing a graph without Telegram nodes (jobs/autopublish.py) on real graphs: ComfyUI's default
SD graph, the shipped commands with their Telegram nodes taken out, and the cases the dialog asks about."""

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comfyui_courier.jobs.autopublish import Unusable, analyze, rewritten, summary
from comfyui_courier.jobs.options import command_options, offered
from comfyui_courier.jobs.workflow import INPUT_NODE, OUTPUT_NODE, fill_job, input_node, nodes_of
from comfyui_courier.server_routes.publish import check_graph

API_DIR = Path(__file__).resolve().parents[2] / "workflows" / "api"
PROMPT, IMAGE, MASK, SEED, WIDTH, HEIGHT, STEPS, NEGATIVE, BATCH = 0, 1, 2, 3, 4, 5, 8, 9, 10

DEFAULT_SD = {  # ComfyUI's default graph in API format (ComfyUI's script_examples/basic_api_example.py)
    "3": {"class_type": "KSampler", "inputs": {
        "cfg": 8, "denoise": 1, "latent_image": ["5", 0], "model": ["4", 0], "negative": ["7", 0],
        "positive": ["6", 0], "sampler_name": "euler", "scheduler": "normal", "seed": 8566257, "steps": 20}},
    "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "v1-5-pruned-emaonly.safetensors"}},
    "5": {"class_type": "EmptyLatentImage", "inputs": {"batch_size": 1, "height": 512, "width": 512}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "masterpiece best quality girl"}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "bad hands"}},
    "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
    "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "ComfyUI", "images": ["8", 0]}},
}
NODE_TYPES = {node["class_type"] for node in DEFAULT_SD.values()} | {  # the test graphs' and the shipped ones'
    INPUT_NODE, OUTPUT_NODE, "ConditioningCombine", "LoadImage", "VAEEncode", "SetLatentNoiseMask", "PreviewImage",
    "ControlNetLoader", "ControlNetApplyAdvanced", "PrimitiveStringMultiline", "SaveAnimatedWEBP", "BasicGuider",
    "RandomNoise", "SamplerCustomAdvanced", "KSamplerSelect", "BasicScheduler", "ImageInvert"} | {
    node["class_type"] for path in API_DIR.glob("*.json") if path.name != "commands.json"
    for node in json.loads(path.read_text(encoding="utf-8")).values()}


def graph(**changes) -> dict:
    """DEFAULT_SD with nodes replaced or added (None removes one)."""
    changed = copy.deepcopy(DEFAULT_SD) | changes
    return {k: v for k, v in changed.items() if v is not None}


def links_to(workflow: dict, source: str) -> set[tuple[str, str, int]]:
    return {(node_id, name, value[1]) for node_id, node in workflow.items() for name, value in node["inputs"].items()
            if isinstance(value, list) and value[0] == source}


def published(workflow: dict, name: str = "mine", **choices) -> dict:
    """The rewritten graph, checked as the route checks a graph it publishes."""
    result = rewritten(workflow, analyze(workflow, **choices), name)
    check_graph(result, NODE_TYPES)
    return result


def test_the_default_sd_graph_gets_its_prompt_negative_seed_size_and_steps_from_the_telegram_input():
    original = copy.deepcopy(DEFAULT_SD)
    found = analyze(DEFAULT_SD)
    assert (found.prompt, found.negative, found.image, found.outputs, found.problem) == ("6", "7", None, ("9",), None)
    assert (found.seeds, found.size, found.steps) == (("3",), ("5",), ("3",))
    result = published(DEFAULT_SD)
    assert original == DEFAULT_SD  # the caller's graph is not touched
    source = input_node(result)
    assert source == "10"
    assert links_to(result, source) == {("6", "text", PROMPT), ("7", "text", NEGATIVE), ("3", "seed", SEED),
                                        ("3", "steps", STEPS), ("5", "width", WIDTH), ("5", "height", HEIGHT)}
    assert result[source]["inputs"] == {
        "command": "mine", "prompt": "masterpiece best quality girl", "seed": 8566257, "width": 512, "height": 512,
        "image": "", "require_image": False, "chat_id": "", "user_id": "", "steps": 20, "negative": "bad hands"}
    assert result["9"] == {"class_type": OUTPUT_NODE, "_meta": {"title": "Telegram Output (Courier)"},
                           "inputs": {"filename_prefix": "courier/mine", "images": ["8", 0], "keep_metadata": False}}
    assert {k: v for k, v in result.items() if k not in ("3", "5", "6", "7", "9", source)} == {
        k: DEFAULT_SD[k] for k in ("4", "8")}
    assert offered(command_options(result)) == ["seed", "ar", "size", "steps", "n", "neg"]
    job = fill_job(result, prompt="a cat", seed=5, options={"width": 768})
    assert job[source]["inputs"]["prompt"] == "a cat" and job[source]["inputs"]["width"] == 768


def test_the_summary_names_what_was_found_for_the_dialog():
    shown = summary(DEFAULT_SD, analyze(DEFAULT_SD))
    assert shown["prompt"] == {"node": "6", "class_type": "CLIPTextEncode", "title": None,
                               "text": "masterpiece best quality girl"}
    assert [t["node"] for t in shown["texts"]] == ["6", "7"] and shown["negative"]["text"] == "bad hands"
    assert shown["outputs"] == [{"node": "9", "class_type": "SaveImage", "title": None, "sent_as": "images"}]
    assert (shown["image"], shown["images"], shown["left_out"], shown["problem"]) == (None, [], [], None)
    assert (shown["seeds"], shown["size"], shown["steps"]) == (["3"], ["5"], ["3"])
    json.dumps(shown)
    titled = graph(**{"6": {**DEFAULT_SD["6"], "_meta": {"title": "Positive"},
                            "inputs": {**DEFAULT_SD["6"]["inputs"], "text": "x" * 500}}})
    prompt = summary(titled, analyze(titled))["prompt"]
    assert prompt["title"] == "Positive" and len(prompt["text"]) == 120 and prompt["text"].endswith("…")


TWO_ENCODERS = {
    "10": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": "a style"}},
    "11": {"class_type": "ConditioningCombine", "inputs": {"conditioning_1": ["6", 0], "conditioning_2": ["10", 0]}},
    "3": {**DEFAULT_SD["3"], "inputs": {**DEFAULT_SD["3"]["inputs"], "positive": ["11", 0]}},
}


def test_two_text_encoders_on_the_positive_side_need_a_choice():
    two = graph(**TWO_ENCODERS)
    found = analyze(two)
    assert found.prompt is None and found.problem.code == "two_prompts"
    assert "#6 CLIPTextEncode, #10 CLIPTextEncode" in str(found.problem)
    assert found.texts == ("6", "7", "10")
    with pytest.raises(Unusable, match="choose the prompt"):
        rewritten(two, found, "mine")
    result = published(two, prompt="10")
    assert ("10", "text", PROMPT) in links_to(result, "12")
    assert result["6"]["inputs"]["text"] == "masterpiece best quality girl"
    assert result["12"]["inputs"]["prompt"] == "a style"
    assert ("7", "text", NEGATIVE) in links_to(result, "12")
    negative_as_prompt = published(DEFAULT_SD, prompt="7")  # the user may pick any text node
    assert links_to(negative_as_prompt, "10") >= {("7", "text", PROMPT)}
    assert not [link for link in links_to(negative_as_prompt, "10") if link[2] == NEGATIVE]
    for choice in ("3", "99", "", "../x"):
        with pytest.raises(Unusable, match="not a node with a text widget") as raised:
            analyze(two, prompt=choice)
        assert raised.value.code == "bad_choice"


def test_a_load_image_becomes_the_user_s_picture():
    img2img = graph(**{
        "10": {"class_type": "LoadImage", "inputs": {"image": "example.png"}},
        "11": {"class_type": "VAEEncode", "inputs": {"pixels": ["10", 0], "vae": ["4", 2]}},
        "12": {"class_type": "SetLatentNoiseMask", "inputs": {"samples": ["11", 0], "mask": ["10", 1]}},
        "3": {**DEFAULT_SD["3"], "inputs": {**DEFAULT_SD["3"]["inputs"], "latent_image": ["12", 0], "denoise": 0.6}},
        "5": None})
    found = analyze(img2img)
    assert (found.prompt, found.image, found.size, found.problem) == ("6", "10", (), None)
    result = rewritten(img2img, found, "mine")
    assert "10" not in result
    source = input_node(result)
    assert links_to(result, source) >= {("11", "pixels", IMAGE), ("12", "mask", MASK)}
    assert result[source]["inputs"]["require_image"] is True
    assert not {"width", "height"} & {link[1] for link in links_to(result, source)}
    assert "size" not in offered(command_options(result))  # the picture sets the size, not --size
    assert summary(img2img, found)["image"] == {"node": "10", "class_type": "LoadImage", "title": None}
    kept = rewritten(img2img, analyze(img2img, image=None), "mine")  # the picture stays the graph's own
    assert kept["10"] == img2img["10"] and kept[input_node(kept)]["inputs"]["require_image"] is False


def test_two_load_images_need_a_choice_and_an_image_graph_needs_no_prompt():
    two = graph(**{"10": {"class_type": "LoadImage", "inputs": {"image": "a.png"}},
                   "11": {"class_type": "LoadImage", "inputs": {"image": "b.png"}},
                   "12": {"class_type": "ImageInvert", "inputs": {"image": ["10", 0]}},
                   "13": {"class_type": "SaveImage", "inputs": {"images": ["12", 0], "filename_prefix": "x"}}})
    assert analyze(two).problem.code == "two_images"
    assert analyze(two, image="11").problem is None and analyze(two, image=None).problem is None
    with pytest.raises(Unusable, match="not a LoadImage"):
        analyze(two, image="12")
    picture_only = {"1": {"class_type": "LoadImage", "inputs": {"image": "a.png"}},
                    "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
                    "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "x"}}}
    result = published(picture_only, name="invert")
    assert links_to(result, "4") == {("2", "image", IMAGE)} and result["3"]["inputs"]["images"] == ["2", 0]
    passed_on = published({"1": picture_only["1"], "3": {**picture_only["3"], "inputs": {"images": ["1", 0]}}})
    assert passed_on["3"]["inputs"]["images"] == ["4", IMAGE]  # the Output takes the user's picture itself


def test_previews_are_outputs_only_when_nothing_saves():
    with_preview = graph(**{"10": {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}}})
    found = analyze(with_preview)
    assert (found.savers, found.outputs) == (("9", "10"), ("9",))
    assert summary(with_preview, found)["left_out"] == [{"node": "10", "class_type": "PreviewImage", "title": None}]
    assert "10" not in rewritten(with_preview, found, "mine")
    only_preview = graph(**{"9": {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}}})
    assert published(only_preview)["9"]["class_type"] == OUTPUT_NODE
    both = published(with_preview, outputs=["9", "10"])
    assert nodes_of(both, OUTPUT_NODE) == ["9", "10"]
    for outputs in (["3"], [], ["9", "77"]):
        with pytest.raises(Unusable, match="outputs must name saving nodes") as raised:
            analyze(with_preview, outputs=outputs)
        assert raised.value.code == "bad_choice"


@pytest.mark.parametrize("workflow,code,says", [
    (graph(**{"9": None}), "no_output", "no output to send"),
    (graph(**{"9": {"class_type": "SaveImage", "inputs": {"images": "not a link", "filename_prefix": "x"}}}),
     "no_output", "SaveImage"),
    ({"1": {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0}},
      "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0]}}}, "no_sampler", "found no sampler"),
    (graph(**{"6": {"class_type": "CustomPromptNode", "inputs": {"clip": ["4", 1], "words": "x"}},
              "7": {"class_type": "CustomPromptNode", "inputs": {"clip": ["4", 1], "words": "y"}}}),
     "no_prompt", "positive input of #3 KSampler"),
])
def test_what_cannot_be_published_says_why(workflow, code, says):
    found = analyze(workflow)
    assert found.problem.code == code and says in str(found.problem), found.problem
    assert summary(workflow, found)["problem"] == {"code": code, "message": str(found.problem)}


def test_savers_and_the_load_image_are_never_the_prompt():
    odd = graph(**{"9": {**DEFAULT_SD["9"], "inputs": {**DEFAULT_SD["9"]["inputs"], "text": "a caption"}},
                   "10": {"class_type": "LoadImage", "inputs": {"image": "a.png", "prompt": "x"}}})
    assert analyze(odd).texts == ("6", "7")
    with pytest.raises(Unusable, match="not a node with a text widget"):
        analyze(odd, prompt="9")


def test_a_graph_with_telegram_nodes_is_published_as_it_is():
    demo = json.loads((API_DIR / "demo.json").read_text(encoding="utf-8"))
    with pytest.raises(Unusable, match="without auto") as raised:
        analyze(demo)
    assert raised.value.code == "has_telegram_nodes"


def test_a_string_primitive_feeding_the_encoder_counts_as_its_text_widget():
    primitive = graph(**{"10": {"class_type": "PrimitiveStringMultiline", "inputs": {"value": "from a primitive"}},
                         "6": {"class_type": "CLIPTextEncode", "inputs": {"clip": ["4", 1], "text": ["10", 0]}}})
    found = analyze(primitive)
    assert found.prompt == "6"
    result = published(primitive)
    assert result["6"]["inputs"]["text"] == ["11", PROMPT] and result["11"]["inputs"]["prompt"] == "from a primitive"


def test_only_the_positive_side_of_a_controlnet_is_the_prompt():
    controlnet = graph(**{
        "10": {"class_type": "LoadImage", "inputs": {"image": "pose.png"}},
        "11": {"class_type": "ControlNetLoader", "inputs": {"control_net_name": "pose.safetensors"}},
        "12": {"class_type": "ControlNetApplyAdvanced", "inputs": {
            "positive": ["6", 0], "negative": ["7", 0], "control_net": ["11", 0], "image": ["10", 0],
            "strength": 1.0, "start_percent": 0.0, "end_percent": 1.0}},
        "3": {**DEFAULT_SD["3"], "inputs": {**DEFAULT_SD["3"]["inputs"], "positive": ["12", 0],
                                            "negative": ["12", 1]}}})
    found = analyze(controlnet)
    assert (found.prompt, found.negative, found.image) == ("6", "7", "10")


def test_custom_sampling_with_a_guider_random_noise_and_an_animation():
    flux = {
        "1": {"class_type": "UNETLoader", "inputs": {"unet_name": "flux1-dev.safetensors", "weight_dtype": "default"}},
        "2": {"class_type": "DualCLIPLoader", "inputs": {"clip_name1": "clip_l.safetensors",
                                                         "clip_name2": "t5xxl_fp16.safetensors", "type": "flux"}},
        "3": {"class_type": "CLIPTextEncodeFlux", "inputs": {"clip": ["2", 0], "clip_l": "a fox", "t5xxl": "a fox",
                                                             "guidance": 3.5}},
        "4": {"class_type": "BasicGuider", "inputs": {"model": ["1", 0], "conditioning": ["3", 0]}},
        "5": {"class_type": "RandomNoise", "inputs": {"noise_seed": 42}},
        "6": {"class_type": "KSamplerSelect", "inputs": {"sampler_name": "euler"}},
        "7": {"class_type": "BasicScheduler", "inputs": {"model": ["1", 0], "scheduler": "simple", "steps": 28,
                                                         "denoise": 1.0}},
        "8": {"class_type": "EmptySD3LatentImage", "inputs": {"width": 1024, "height": 768, "batch_size": 4}},
        "9": {"class_type": "SamplerCustomAdvanced", "inputs": {"noise": ["5", 0], "guider": ["4", 0],
                                                                "sampler": ["6", 0], "sigmas": ["7", 0],
                                                                "latent_image": ["8", 0]}},
        "10": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},
        "11": {"class_type": "VAEDecode", "inputs": {"samples": ["9", 0], "vae": ["10", 0]}},
        "12": {"class_type": "SaveAnimatedWEBP", "inputs": {"images": ["11", 0], "filename_prefix": "x", "fps": 500,
                                                            "lossless": False, "quality": 80, "method": "default"}},
    }
    result = published(flux, name="fox")
    assert links_to(result, "13") == {("3", "clip_l", PROMPT), ("3", "t5xxl", PROMPT), ("5", "noise_seed", SEED),
                                      ("7", "steps", STEPS), ("8", "width", WIDTH), ("8", "height", HEIGHT)}
    assert result["13"]["inputs"].items() >= {"prompt": "a fox", "seed": 42, "steps": 28, "width": 1024,
                                              "height": 768}.items()
    assert result["12"]["inputs"] == {"filename_prefix": "courier/fox", "images": ["11", 0], "keep_metadata": False,
                                      "images_as": "animation", "fps": 120.0}


def stripped(shipped: dict) -> dict:
    """A shipped command's graph as a user would have built it: the Telegram Input's values written
    into the widgets it fed, a LoadImage for its picture, SaveImage/SaveVideo for Telegram Output."""
    workflow = copy.deepcopy(shipped)
    source = input_node(workflow)
    values = workflow.pop(source)["inputs"]
    by_output = {PROMPT: values.get("prompt", "a prompt"), SEED: values["seed"], WIDTH: values["width"],
                 HEIGHT: values["height"], STEPS: values.get("steps", 20), NEGATIVE: values.get("negative", ""),
                 BATCH: values.get("batch", 1)}
    for node in workflow.values():
        for name, value in node["inputs"].items():
            if isinstance(value, list) and value[0] == source:
                node["inputs"][name] = ["900", value[1] - 1] if value[1] in (IMAGE, MASK) else by_output[value[1]]
    if any(isinstance(v, list) and v[0] == "900" for node in workflow.values() for v in node["inputs"].values()):
        workflow["900"] = {"class_type": "LoadImage", "inputs": {"image": "example.png"}}
    for node_id in nodes_of(workflow, OUTPUT_NODE):
        saved = "images" if "images" in workflow[node_id]["inputs"] else "video"
        workflow[node_id] = {"class_type": "SaveImage" if saved == "images" else "SaveVideo",
                             "inputs": {saved: workflow[node_id]["inputs"][saved], "filename_prefix": "ComfyUI"}}
    return workflow


SHIPPED = sorted(path.stem for path in API_DIR.glob("*.json") if path.name != "commands.json")
NOT_FOUND_AGAIN = {  # links of a shipped graph that a plain graph does not tell: the Input's batch, and
    ("f", "27", "batch_size"), ("dev", "27", "batch_size"), ("sd3", "53", "batch_size"),
    ("img", "5", "width"), ("img", "5", "height")}  # the size the pack's native-size node starts from
ALSO_FOUND = {  # a seed widget the shipped graph leaves as it is (wan's second pass adds no noise)
    ("wan", "78", "noise_seed"), ("qwen", "110", "prompt")}  # and qwen's empty negative, for --neg


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_command_without_its_telegram_nodes_is_found_again(name):
    shipped = json.loads((API_DIR / f"{name}.json").read_text(encoding="utf-8"))
    plain = stripped(shipped)
    result = published(plain, name=name)
    new, old = input_node(result), input_node(shipped)
    found_again = {(node, input_name) for node, input_name, _ in links_to(result, new)}
    expected = {(node, input_name) for node, input_name, _ in links_to(shipped, old)}
    expected = {link for link in expected if (name, *link) not in NOT_FOUND_AGAIN}
    assert found_again == expected | {link[1:] for link in ALSO_FOUND if link[0] == name}, name
    assert {(n, i, o) for n, i, o in links_to(result, new)} >= {
        (n, i, o) for n, i, o in links_to(shipped, old) if (name, n, i) not in NOT_FOUND_AGAIN
        and o not in (IMAGE, MASK)}  # the picture comes from the user, or is the demo's prompt card
    assert nodes_of(result, OUTPUT_NODE) == nodes_of(plain, "SaveImage") + nodes_of(plain, "SaveVideo")
    assert "900" not in result


CLASSES = ("KSampler", "CLIPTextEncode", "ConditioningCombine", "LoadImage", "SaveImage", "PreviewImage",
           "EmptyLatentImage", "VAEDecode", "SaveAnimatedWEBP", "ControlNetApplyAdvanced", "RandomNoise")
INPUT_NAMES = ("positive", "negative", "text", "seed", "noise_seed", "steps", "scheduler", "width", "height",
               "images", "video", "image", "conditioning", "conditioning_1", "fps", "start_at_step")
VALUES = st.one_of(st.integers(-2, 2**65), st.booleans(), st.text(max_size=5), st.floats(allow_nan=False),
                   st.none(), st.lists(st.integers(), max_size=2))


@st.composite
def graphs(draw):
    """ComfyUI's default graph with nodes added and inputs changed at random (links to any node, or none)."""
    workflow = copy.deepcopy(DEFAULT_SD)
    ids = list(workflow) + draw(st.lists(st.sampled_from(["10", "11", "12", "a", "5:1"]), max_size=4, unique=True))
    link = st.tuples(st.sampled_from([*ids, "99"]), st.integers(0, 2)).map(list)
    for node_id in ids:
        if node_id not in workflow:
            workflow[node_id] = {"class_type": draw(st.sampled_from(CLASSES)), "inputs": {}}
        workflow[node_id]["inputs"] |= draw(st.dictionaries(st.sampled_from(INPUT_NAMES), st.one_of(VALUES, link),
                                                            max_size=3 if node_id in DEFAULT_SD else 6))
    return workflow


@settings(max_examples=400, deadline=None, database=None)  # no .hypothesis folder in the pack
@given(workflow=graphs(), choice=st.sampled_from([{}, {"prompt": "1"}, {"image": None}, {"outputs": ["1"]}]))
def test_any_graph_is_found_in_or_refused_with_a_reason(workflow, choice):
    """Whatever the graph: Unusable with a code, or a problem, or a graph with one Telegram Input whose
    links all lead to nodes that are there (the route's check refuses links a saver's removal broke)."""
    try:
        found = analyze(workflow, **choice)
    except Unusable as exc:
        assert exc.code == "bad_choice"
        return
    json.dumps(summary(workflow, found))
    if found.problem is not None:
        assert found.problem.code in ("no_output", "no_sampler", "no_prompt", "two_prompts", "two_images")
        return
    result = rewritten(workflow, found, "mine")
    assert len(nodes_of(result, INPUT_NODE)) == 1 and nodes_of(result, OUTPUT_NODE)
    source = nodes_of(result, INPUT_NODE)[0]
    if found.prompt is not None:
        assert [source, PROMPT] in result[found.prompt]["inputs"].values()
    removed = set(workflow) - set(result)
    assert removed <= set(found.savers) | {found.image}
    for node in result.values():
        for value in node["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[1], int) and value[0] not in result:
                assert value[0] in removed or value[0] not in workflow
