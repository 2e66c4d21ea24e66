"""The shipped model commands against the fake ComfyUI: rejected exactly as a bare real ComfyUI rejects them.

tests/integration/test_workflows_real.py posts every model command's workflow to a real ComfyUI without
weights and asserts that validation fails with nothing but ``value_not_in_list`` on the loaders, naming
exactly the manifest's model files. The fake must answer the same, so this runs that very test (its
blocking urllib calls in a thread, the fake serving on this loop) against the fake.
"""

import asyncio
import json
from types import SimpleNamespace

import pytest

from comfyui_courier.tests.integration import test_workflows_real as real
from comfyui_courier.tests.support.fake_comfyui import FakeComfyUI


@pytest.fixture
async def fake():
    async with FakeComfyUI() as server:
        yield server


def test_the_fake_knows_every_node_class_of_the_shipped_workflows():
    nodes = FakeComfyUI().nodes
    for entry in real.MANIFEST.values():
        workflow = json.loads((real.API_DIR / entry["file"]).read_text(encoding="utf-8"))
        unknown = {node["class_type"] for node in workflow.values()} - set(nodes)
        assert not unknown, f"{entry['file']}: add {sorted(unknown)} to CORE_NODES (schema from /object_info)"


@pytest.mark.parametrize("name", real.MODEL_COMMANDS)
async def test_model_command_fails_only_for_its_missing_model_files(fake, name):
    await asyncio.to_thread(real.test_model_command_fails_only_for_its_missing_model_files,
                            SimpleNamespace(url=fake.url), name)
    (prompt,) = [r.json["prompt"] for r in fake.requests if r.method == "POST" and r.path == "/prompt"]
    if real.requires_image(real.job(name, prompt="", seed=0)):
        (node,) = [n for n in prompt.values() if n["class_type"] == real.INPUT]
        assert fake.has_input_file(node["inputs"]["image"])  # the upload reached the fake and the Input names it
