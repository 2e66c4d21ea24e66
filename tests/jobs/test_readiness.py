"""Readiness of commands (jobs/readiness.py): the model files a graph names, against a backend's models."""

from types import SimpleNamespace

from comfyui_courier.jobs.readiness import (
    ModelFile,
    Readiness,
    known_models,
    missing_everywhere,
    needed_files,
    readiness,
)
from comfyui_courier.jobs.seed import seed_manifest, shipped_workflow

MANIFEST = seed_manifest()


def test_a_shipped_graph_needs_the_files_of_its_manifest_with_their_urls():
    for name, entry in MANIFEST.items():
        needed = needed_files(shipped_workflow(entry))
        assert needed == sorted((ModelFile(m["name"], m["folder"], m["url"]) for m in entry["models"]),
                                key=lambda file: file.name), name


def test_a_command_whose_jobs_choose_the_checkpoint_needs_not_its_stand_in():
    graph = shipped_workflow(MANIFEST["img"])  # --model: the job's checkpoint is one the backends have
    assert any(node["inputs"].get("ckpt_name") for node in graph.values())
    assert needed_files(graph) == []
    fixed = {**graph, **{key: {**node, "inputs": {**node["inputs"], "options": ""}}
                         for key, node in graph.items() if node["class_type"] == "CourierTelegramInput"}}
    assert [file.folder for file in needed_files(fixed)] == ["checkpoints"]  # no --model: its own file


def test_a_published_graph_needs_its_loaders_files_once_without_a_url():
    graph = {
        "1": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "mine.safetensors"}},
        "2": {"class_type": "LoraLoader", "inputs": {"lora_name": "style.safetensors", "model": ["1", 0],
                                                     "strength_model": 0.8}},
        "3": {"class_type": "LoraLoader", "inputs": {"lora_name": "style.safetensors", "model": ["2", 0]}},
        "4": {"class_type": "SomePackLoader", "inputs": {"model": "x.gguf", "mode": "fast"}},
        "5": {"class_type": "VAELoader", "inputs": {"vae_name": "ae.safetensors"}},  # one a shipped command names
        "6": {"class_type": "LoadImage", "inputs": {"image": "courier/in.png"}},
        "7": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ""}},
    }
    ae_url = next(m["url"] for m in MANIFEST["f"]["models"] if m["name"] == "ae.safetensors")
    assert needed_files(graph) == [ModelFile("ae.safetensors", "vae", ae_url),
                                   ModelFile("mine.safetensors", "checkpoints", None),
                                   ModelFile("style.safetensors", "loras", None),
                                   ModelFile("x.gguf", "models", None)]


def test_ready_where_every_file_is_offered_and_the_missing_ones_named():
    needed = needed_files(shipped_workflow(MANIFEST["f"]))
    names = [file.name for file in needed]
    assert readiness(needed, names + ["other.safetensors"]) == Readiness(True, [])
    assert readiness(needed, names[1:]) == Readiness(False, needed[:1])
    assert readiness(needed, []) == Readiness(False, needed)
    assert readiness(needed, None) == Readiness(None, [])  # models not read yet
    assert readiness([], []) == Readiness(True, [])  # /demo: ready anywhere


def test_missing_everywhere_only_when_every_known_backend_lacks_a_file():
    needed = needed_files(shipped_workflow(MANIFEST["qwen"]))
    names = [file.name for file in needed]
    assert missing_everywhere(needed, [[], names[:2]])
    assert not missing_everywhere(needed, [[], names])  # one backend has them all
    assert not missing_everywhere(needed, [])  # nothing known: no reason to think it cannot run
    assert not missing_everywhere([], [[]])  # a command without model files


def test_known_models_of_a_backend_row():
    assert known_models(SimpleNamespace(checked_at=None, models=[])) is None
    assert known_models(SimpleNamespace(checked_at=1, models=["a.safetensors"])) == ["a.safetensors"]
