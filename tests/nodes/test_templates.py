"""workflows/*.json: the weight-free seed commands in the editor's (UI) format, for ComfyUI's template browser.

Each must be the same graph as its API-format seed in workflows/api/: same nodes, same links,
and our nodes' widget values in the order ComfyUI's /object_info gives their inputs (the editor's order).
"""

import json
from pathlib import Path

import pytest

from comfyui_courier.tests.support.fake_comfyui import PACK_OBJECT_INFO

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
MANIFEST = json.loads((WORKFLOWS / "api" / "commands.json").read_text(encoding="utf-8"))
TEMPLATES = sorted(p.stem for p in WORKFLOWS.glob("*.json"))
SEEDED_WIDGET = "control_after_generate"  # the editor stores seed's "randomize" right after it


def widget_names(class_type: str) -> list[str]:
    info = PACK_OBJECT_INFO[class_type]
    names = []
    for part in ("required", "optional"):
        for name in info["input_order"].get(part, []):
            kind, *options = info["input"][part][name]
            if isinstance(kind, list) or kind in ("STRING", "INT", "FLOAT", "BOOLEAN", "COMBO"):
                names.append(name)
                if options and options[0].get(SEEDED_WIDGET):
                    names.append(SEEDED_WIDGET)
    return names


def test_the_weight_free_seeds_are_templates():
    assert TEMPLATES == ["demo", "demoedit"]


@pytest.mark.parametrize("name", TEMPLATES)
def test_template_is_the_seed_in_ui_format(name):
    ui = json.loads((WORKFLOWS / f"{name}.json").read_text(encoding="utf-8"))
    api = json.loads((WORKFLOWS / "api" / f"{name}.json").read_text(encoding="utf-8"))
    assert ui["version"] == 0.4 and "nodes" in ui and "links" in ui
    nodes = {str(node["id"]): node for node in ui["nodes"]}
    assert {i: n["type"] for i, n in nodes.items()} == {i: n["class_type"] for i, n in api.items()}
    ui_links = {(str(link[3]), nodes[str(link[3])]["inputs"][link[4]]["name"], str(link[1]), link[2])
                for link in ui["links"]}
    api_links = {(i, name, value[0], value[1]) for i, n in api.items() for name, value in n["inputs"].items()
                 if isinstance(value, list)}
    assert ui_links == api_links
    for node_id, node in nodes.items():
        if node["type"] in PACK_OBJECT_INFO:
            values = dict(zip(widget_names(node["type"]), node["widgets_values"], strict=True))
            seeded = {k: v for k, v in api[node_id]["inputs"].items() if not isinstance(v, list)}
            assert {k: values[k] for k in seeded} == seeded
            if node["type"] == "CourierTelegramInput":  # published from the editor, it offers what the seed does
                assert values["options"] == MANIFEST[name]["options"]
