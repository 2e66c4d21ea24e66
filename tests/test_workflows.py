"""The shipped command workflows (workflows/api/) are well-formed API-format graphs.

No ComfyUI needed: the node schemas of the core nodes the workflows use are
summarised below (taken from ComfyUI v0.3.64's /object_info); our own nodes'
schemas are that ComfyUI's answer too (tests/support/pack_object_info.json). tests/integration/test_workflows_real.py
checks the same graphs against a real ComfyUI.
"""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comfyui_courier.jobs.options import command_options, declared
from comfyui_courier.jobs.seed import shipped_workflow
from comfyui_courier.jobs.workflow import JOB_INPUT, OUTPUT_NODE, fill_job, nodes_of, requires_image
from comfyui_courier.tests.support.fake_comfyui import PACK_OBJECT_INFO

API_DIR = Path(__file__).resolve().parents[1] / "workflows" / "api"
MANIFEST = json.loads((API_DIR / "commands.json").read_text(encoding="utf-8"))

COMMAND_ORDER = ["f", "qwen", "dev", "sd3", "wan", "demo", "demoedit", "upscale", "img"]
IMAGE_COMMANDS = {"qwen", "demoedit", "upscale"}  # the ones the bot must give an image (Input require_image)
CARD_COMMANDS = {"demo"}  # consume the Input's image output too, but only for its prompt card
MODEL_FREE = {"demo", "demoedit", "upscale"}
CHOSEN_MODEL = {"img"}  # the user picks the checkpoint (--model): the graph's file is a stand-in, no manifest model
LATENT_COMMANDS = ["f", "dev", "sd3", "wan"]  # sized by the Input's width/height

INPUT, OUTPUT = "CourierTelegramInput", "CourierTelegramOutput"
PROMPT, IMAGE, MASK, SEED, WIDTH, HEIGHT, CHAT_ID, USER_ID, STEPS, NEGATIVE, BATCH = range(11)
STEPPED = {"f", "dev", "sd3", "qwen", "img"}  # --steps: the sampler's steps come from the Input (not wan's 2 passes)
NEGATIVE_PROMPTED = {"sd3", "wan", "img"}  # --neg: a real negative prompt (FLUX and qwen run at cfg 1: none)
BATCHED = {"f", "dev", "sd3"}  # --n as one latent batch; wan (a batch would join the videos) and the rest: n jobs

# Core nodes used by the workflows: output types, and the types of their inputs
# that take links (ComfyUI v0.3.64). A workflow using a class missing here fails
# test_every_node_class_is_known: add the class when you add a workflow.
CORE_NODES = {
    "CheckpointLoaderSimple": (("MODEL", "CLIP", "VAE"), {}),
    "UNETLoader": (("MODEL",), {}),
    "DualCLIPLoader": (("CLIP",), {}),
    "CLIPLoader": (("CLIP",), {}),
    "VAELoader": (("VAE",), {}),
    "LoraLoaderModelOnly": (("MODEL",), {"model": "MODEL"}),
    "ModelSamplingSD3": (("MODEL",), {"model": "MODEL"}),
    "ModelSamplingAuraFlow": (("MODEL",), {"model": "MODEL"}),
    "CFGNorm": (("MODEL",), {"model": "MODEL"}),
    "CLIPTextEncode": (("CONDITIONING",), {"clip": "CLIP", "text": "STRING"}),
    "CLIPTextEncodeFlux": (("CONDITIONING",), {"clip": "CLIP", "clip_l": "STRING", "t5xxl": "STRING",
                                               "guidance": "FLOAT"}),
    "TextEncodeQwenImageEditPlus": (("CONDITIONING",), {"clip": "CLIP", "prompt": "STRING", "vae": "VAE",
                                                        "image1": "IMAGE", "image2": "IMAGE",
                                                        "image3": "IMAGE"}),
    "ConditioningZeroOut": (("CONDITIONING",), {"conditioning": "CONDITIONING"}),
    "EmptySD3LatentImage": (("LATENT",), {"width": "INT", "height": "INT", "batch_size": "INT"}),
    "EmptyLatentImage": (("LATENT",), {"width": "INT", "height": "INT", "batch_size": "INT"}),
    "EmptyHunyuanLatentVideo": (("LATENT",), {"width": "INT", "height": "INT", "length": "INT",
                                              "batch_size": "INT"}),
    "KSampler": (("LATENT",), {"model": "MODEL", "seed": "INT", "steps": "INT", "cfg": "FLOAT",
                               "positive": "CONDITIONING", "negative": "CONDITIONING",
                               "latent_image": "LATENT", "denoise": "FLOAT"}),
    "KSamplerAdvanced": (("LATENT",), {"model": "MODEL", "noise_seed": "INT", "steps": "INT", "cfg": "FLOAT",
                                       "positive": "CONDITIONING", "negative": "CONDITIONING",
                                       "latent_image": "LATENT", "start_at_step": "INT",
                                       "end_at_step": "INT"}),
    "VAEDecode": (("IMAGE",), {"samples": "LATENT", "vae": "VAE"}),
    "VAEEncode": (("LATENT",), {"pixels": "IMAGE", "vae": "VAE"}),
    "ImageScaleToTotalPixels": (("IMAGE",), {"image": "IMAGE", "megapixels": "FLOAT"}),
    "ImageInvert": (("IMAGE",), {"image": "IMAGE"}),
    "ImageScaleBy": (("IMAGE",), {"image": "IMAGE", "scale_by": "FLOAT"}),
    "ImageSharpen": (("IMAGE",), {"image": "IMAGE", "sharpen_radius": "INT", "sigma": "FLOAT",
                                  "alpha": "FLOAT"}),
    "CreateVideo": (("VIDEO",), {"images": "IMAGE", "audio": "AUDIO", "fps": "FLOAT"}),
    "SaveVideo": ((), {"video": "VIDEO", "filename_prefix": "STRING"}),
}
SAMPLERS = {"KSampler": "seed", "KSamplerAdvanced": "noise_seed"}
LATENT_SIZES = {"EmptySD3LatentImage", "EmptyHunyuanLatentVideo"}
# loader class -> (its model-file inputs, the ComfyUI models folder they name)
LOADERS = {
    "CheckpointLoaderSimple": (("ckpt_name",), "checkpoints"),
    "UNETLoader": (("unet_name",), "diffusion_models"),
    "DualCLIPLoader": (("clip_name1", "clip_name2"), "text_encoders"),
    "CLIPLoader": (("clip_name",), "text_encoders"),
    "VAELoader": (("vae_name",), "vae"),
    "LoraLoaderModelOnly": (("lora_name",), "loras"),
}


def _schema_types(name):
    spec = PACK_OBJECT_INFO[name]["input"]
    return {name: value[0] for part in ("required", "optional") for name, value in spec.get(part, {}).items()}


OUR_NODES = {
    INPUT: (tuple(PACK_OBJECT_INFO[INPUT]["output"]), _schema_types(INPUT)),
    OUTPUT: ((), _schema_types(OUTPUT)),
    "CourierNativeSize": (tuple(PACK_OBJECT_INFO["CourierNativeSize"]["output"]), _schema_types("CourierNativeSize")),
}
NODES = {**CORE_NODES, **OUR_NODES}


def load(name):
    return json.loads((API_DIR / MANIFEST[name]["file"]).read_text(encoding="utf-8"))


def is_link(value):
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int)


def links(workflow):
    """(consumer node id, input name, [source id, output index]) for every link."""
    return [(node_id, name, value) for node_id, node in workflow.items()
            for name, value in node["inputs"].items() if is_link(value)]


def input_id(workflow):
    (node_id,) = [i for i, n in workflow.items() if n["class_type"] == INPUT]
    return node_id


def consumers_of(workflow, output_index):
    source = input_id(workflow)
    return [(node_id, name) for node_id, name, (src, idx) in links(workflow)
            if src == source and idx == output_index]


commands = pytest.mark.parametrize("name", COMMAND_ORDER)


def test_manifest_lists_the_commands_in_a_stable_order():
    assert list(MANIFEST) == COMMAND_ORDER


def test_manifest_files_are_exactly_the_workflows_on_disk():
    assert sorted(entry["file"] for entry in MANIFEST.values()) == sorted(
        p.name for p in API_DIR.glob("*.json") if p.name != "commands.json")


@commands
def test_manifest_entry_is_well_formed(name):
    entry = MANIFEST[name]
    assert re.fullmatch(r"[a-z0-9_]{1,32}", name), "not a valid Telegram bot command"
    assert set(entry) == {"file", "output", "options", "models"}  # the description is in the catalogs: command_<name>
    declared(entry["options"])  # well-formed
    assert entry["file"] == f"{name}.json"
    assert entry["output"] in ("image", "video")
    for model in entry["models"]:
        assert set(model) == {"name", "folder", "url"}
        assert model["name"].endswith(".safetensors") and "/" not in model["name"]
        assert model["folder"] in {"diffusion_models", "text_encoders", "vae", "checkpoints", "loras"}
        assert model["url"].startswith("https://huggingface.co/")
        assert model["name"] in model["url"]
    names = [m["name"] for m in entry["models"]]
    assert len(names) == len(set(names))
    assert (names == []) == (name in MODEL_FREE | CHOSEN_MODEL)


@commands
def test_workflow_is_api_format(name):
    workflow = load(name)
    assert workflow and isinstance(workflow, dict)
    for node_id, node in workflow.items():
        assert node_id.isdigit(), node_id
        assert set(node) <= {"class_type", "inputs", "_meta"}
        assert isinstance(node["class_type"], str) and isinstance(node["inputs"], dict)


@commands
def test_every_node_class_is_known(name):
    unknown = {n["class_type"] for n in load(name).values()} - set(NODES)
    assert not unknown, f"add {unknown} to CORE_NODES (with their schema from /object_info)"


@commands
def test_links_point_at_existing_outputs_of_the_right_type(name):
    workflow = load(name)
    for node_id, input_name, (source, index) in links(workflow):
        assert source in workflow, f"{node_id}.{input_name} -> missing node {source}"
        outputs = NODES[workflow[source]["class_type"]][0]
        assert index < len(outputs), f"{node_id}.{input_name} -> {source}[{index}]"
        assert 0 <= index < len(outputs), f"{node_id}.{input_name} -> {source}[{index}]"
        expected = NODES[workflow[node_id]["class_type"]][1].get(input_name)
        assert expected == outputs[index], (
            f"{node_id}.{input_name} wants {expected}, gets {outputs[index]} from {source}[{index}]")


@commands
def test_one_telegram_input_with_the_command_name(name):
    workflow = load(name)
    inputs = [n for n in workflow.values() if n["class_type"] == INPUT]
    assert len(inputs) == 1
    values = inputs[0]["inputs"]
    schema = PACK_OBJECT_INFO[INPUT]["input"]
    assert set(schema["required"]) <= set(values) <= set(schema["required"]) | set(schema["optional"])
    assert values["command"] == name
    assert values["image"] == ""  # the bot fills it per job
    assert all(not is_link(v) for v in values.values())
    assert isinstance(values["prompt"], str) and values["prompt"]


@commands
def test_result_goes_to_the_right_output_node(name):
    workflow = load(name)
    classes = [n["class_type"] for n in workflow.values()]
    assert "SaveImage" not in classes and "LoadImage" not in classes
    assert "PreviewImage" not in classes
    if MANIFEST[name]["output"] == "image":
        assert classes.count(OUTPUT) >= 1
        assert "SaveVideo" not in classes
    else:
        assert classes.count("SaveVideo") == 1
    for node in workflow.values():
        if node["class_type"] in (OUTPUT, "SaveVideo"):
            assert node["inputs"]["filename_prefix"] == f"courier/{name}"
        if node["class_type"] == OUTPUT:
            assert node["inputs"].get("keep_metadata", False) is False


@commands
def test_every_node_feeds_an_output(name):
    workflow = load(name)
    reached, todo = set(), [i for i, n in workflow.items() if n["class_type"] in (OUTPUT, "SaveVideo")]
    while todo:
        node_id = todo.pop()
        if node_id not in reached:
            reached.add(node_id)
            todo += [v[0] for v in workflow[node_id]["inputs"].values() if is_link(v)]
    assert reached == set(workflow), f"dangling nodes: {set(workflow) - reached}"


@commands
def test_only_image_commands_consume_the_input_image(name):
    """The Input's image output is the user's image, or (none given) a card showing the prompt.

    A graph that consumes it may want either, so the Input's ``require_image`` says
    which: ``demo`` renders the card, ``qwen`` and ``demoedit`` need the user's image.
    """
    workflow = load(name)
    consumes = bool(consumers_of(workflow, IMAGE))
    assert consumes == (name in IMAGE_COMMANDS | CARD_COMMANDS)
    assert requires_image(workflow) is (name in IMAGE_COMMANDS)
    assert not consumers_of(workflow, MASK)


@pytest.mark.parametrize("name", [n for n in COMMAND_ORDER if n not in MODEL_FREE])
def test_prompt_and_seed_come_from_the_telegram_input(name):
    workflow = load(name)
    assert consumers_of(workflow, PROMPT), "the prompt must reach a text encoder"
    # every sampler that adds noise takes the job's seed (a second WAN pass adds none)
    seeded = {(node_id, SAMPLERS[n["class_type"]]) for node_id, n in workflow.items()
              if n["class_type"] in SAMPLERS and n["inputs"].get("add_noise", "enable") == "enable"}
    assert seeded and seeded <= set(consumers_of(workflow, SEED))


@pytest.mark.parametrize("name", sorted(MODEL_FREE))
def test_model_free_commands_sample_nothing(name):
    """They run on CPU in seconds: no sampler, no loader, and the prompt only reaches the card."""
    classes = {n["class_type"] for n in load(name).values()}
    assert not classes & (set(SAMPLERS) | set(LOADERS) | LATENT_SIZES)
    assert not consumers_of(load(name), PROMPT) and not consumers_of(load(name), SEED)


@pytest.mark.parametrize("name", LATENT_COMMANDS)
def test_latent_size_comes_from_the_telegram_input(name):
    workflow = load(name)
    source = input_id(workflow)
    sized = [node for node in workflow.values() if node["class_type"] in LATENT_SIZES]
    assert sized
    for node in sized:
        assert node["inputs"]["width"] == [source, WIDTH]
        assert node["inputs"]["height"] == [source, HEIGHT]


def test_only_the_text_commands_start_from_an_empty_latent():
    """The others take their size from the picture (``qwen``, the ``demo`` commands)."""
    assert [n for n in COMMAND_ORDER if any(node["class_type"] in LATENT_SIZES for node in load(n).values())] == \
        LATENT_COMMANDS


def test_text_prompt_fills_both_flux_encoders():
    for name in ("f", "dev"):
        workflow = load(name)
        source = input_id(workflow)
        (encoder,) = [n for n in workflow.values() if n["class_type"] == "CLIPTextEncodeFlux"]
        assert encoder["inputs"]["clip_l"] == encoder["inputs"]["t5xxl"] == [source, PROMPT]


def test_dev_is_schnell_with_the_dev_model_and_its_settings():
    schnell, dev = load("f"), load("dev")
    assert {n["class_type"] for n in schnell.values()} == {n["class_type"] for n in dev.values()}

    def only(workflow, cls):
        (node,) = [n for n in workflow.values() if n["class_type"] == cls]
        return node["inputs"]

    assert only(dev, "UNETLoader")["unet_name"] == "flux1-dev.safetensors"
    assert only(dev, INPUT)["steps"] == 20
    assert only(dev, "CLIPTextEncodeFlux")["guidance"] == 3.5
    assert only(schnell, INPUT)["steps"] == 4


@commands
def test_manifest_models_match_the_loaders(name):
    workflow = load(name)
    found = {}
    for node in workflow.values():
        keys, folder = LOADERS.get(node["class_type"], ((), None))
        for key in keys:
            found[node["inputs"][key]] = folder
    declared = {m["name"]: m["folder"] for m in MANIFEST[name]["models"]}
    if name in CHOSEN_MODEL:
        assert list(found.values()) == ["checkpoints"] and not declared
        return
    assert found == declared


ODD = st.sampled_from(["\x00", "\ud800", "\u200b", "\U0001f600", "é", "\n", '"', "\\"])
ODD_TEXT = st.text() | st.lists(ODD | st.text(max_size=4), max_size=12).map("".join)
JOB_VALUES = st.fixed_dictionaries({"prompt": ODD_TEXT, "seed": st.integers(), "image": ODD_TEXT,
                                    "chat_id": st.integers() | ODD_TEXT, "user_id": st.integers() | ODD_TEXT,
                                    "job": ODD_TEXT})


@commands
@settings(max_examples=500, deadline=None, database=None)  # no .hypothesis folder in the pack
@given(values=JOB_VALUES)
def test_filling_a_job_sets_exactly_the_inputs_values(name, values):
    workflow = load(name)
    original = json.dumps(workflow)
    filled = fill_job(workflow, **values)
    assert json.dumps(workflow) == original  # filled on a copy
    assert json.loads(json.dumps(filled, allow_nan=False)) == filled  # what POST /prompt sends
    source, outputs = input_id(workflow), nodes_of(workflow, OUTPUT_NODE)
    assert {k: v for k, v in filled.items() if k != source and k not in outputs} == \
        {k: v for k, v in workflow.items() if k != source and k not in outputs}
    for node in (source, *outputs):
        assert {k: v for k, v in filled[node].items() if k != "inputs"} == \
            {k: v for k, v in workflow[node].items() if k != "inputs"}
    assert set(filled[source]["inputs"]) == set(workflow[source]["inputs"])
    job = values.pop("job")
    expected = {**workflow[source]["inputs"], **values, "chat_id": str(values["chat_id"]),
                "user_id": str(values["user_id"])}
    assert filled[source]["inputs"] == expected
    for node in outputs:  # a new value each job: ComfyUI's cache never stands in for the node
        assert filled[node]["inputs"] == {**workflow[node]["inputs"], JOB_INPUT: job}


@commands
def test_every_declared_option_reaches_the_graph(name):
    """No option the manifest declares is dropped as useless: each sets something the graph uses."""
    spec = command_options(shipped_workflow(MANIFEST[name]))
    assert set(spec.ranges) == set(declared(MANIFEST[name]["options"]))


@commands
def test_steps_negative_and_batch_come_from_the_telegram_input(name):
    workflow = load(name)
    samplers = {node_id for node_id, n in workflow.items() if n["class_type"] in SAMPLERS}
    assert {node_id for node_id, _ in consumers_of(workflow, STEPS)} == (samplers if name in STEPPED else set())
    negatives = consumers_of(workflow, NEGATIVE)
    assert bool(negatives) == (name in NEGATIVE_PROMPTED)
    assert all(workflow[node_id]["class_type"] == "CLIPTextEncode" for node_id, _ in negatives)
    batched = consumers_of(workflow, BATCH)
    assert bool(batched) == (name in BATCHED)
    assert all(workflow[node_id]["class_type"] in LATENT_SIZES and key == "batch_size" for node_id, key in batched)
    assert command_options(shipped_workflow(MANIFEST[name])).batch == (name in BATCHED)


@pytest.mark.parametrize("name", sorted(STEPPED))
def test_the_input_keeps_each_sampler_s_default_steps(name):
    defaults = {"f": 4, "qwen": 4, "dev": 20, "sd3": 20, "img": 20}
    assert load(name)[input_id(load(name))]["inputs"]["steps"] == defaults[name]


def test_wan_keeps_its_negative_prompt_as_the_input_s_default():
    workflow = load("wan")
    assert workflow[input_id(workflow)]["inputs"]["negative"].startswith("色调艳丽")
