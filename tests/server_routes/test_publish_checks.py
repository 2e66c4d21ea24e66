"""POST /courier/commands against real PostgreSQL: publishing says which model files each backend lacks
and asks before it stores a graph that no backend can run; a graph whose links go round is refused.

ComfyUI's own validation needs ComfyUI: ``tests/integration/test_publish_validation_real.py``.
"""

import pytest

from comfyui_courier.store import backends, commands
from comfyui_courier.tests.jobs.test_autopublish import DEFAULT_SD, NODE_TYPES, graph

FIRST, SECOND, UNCHECKED = "http://127.0.0.1:9201", "http://user:pw@127.0.0.1:9202", "http://127.0.0.1:9203"
CHECKPOINT = DEFAULT_SD["4"]["inputs"]["ckpt_name"]
LACKED = {"name": CHECKPOINT, "folder": "checkpoints", "url": None}


@pytest.fixture
async def api(courier_api, store):
    await backends.register_backends(store.pool, [FIRST, SECOND, UNCHECKED])
    await backends.record_check(store.pool, FIRST, models=["other.safetensors"])
    await backends.record_check(store.pool, SECOND, models=[])
    return await courier_api({"COURIER_BACKENDS": f"{FIRST},{SECOND},{UNCHECKED}"}, store=store,
                             node_types=NODE_TYPES)


async def publish(api, **body):
    return await api.send("POST", "/courier/commands", json={"workflow": DEFAULT_SD, "auto": True, **body})


async def test_a_graph_no_backend_can_run_is_published_only_when_confirmed(api, store):
    status, reply, _ = await publish(api, name="mine")
    assert (status, reply["error"]["code"]) == (409, "models_missing"), reply
    assert reply["models"] == [{"url": FIRST, "ready": False, "missing": [LACKED]},
                               {"url": "http://127.0.0.1:9202", "ready": False, "missing": [LACKED]},
                               {"url": UNCHECKED, "ready": None, "missing": []}]
    assert f"{FIRST}: {CHECKPOINT} (checkpoints)" in reply["error"]["message"] and "pw" not in str(reply)
    assert await commands.list_commands(store.pool) == []
    status, reply, _ = await publish(api, name="mine", confirm_missing=True)
    assert status == 201, reply
    assert [backend["ready"] for backend in reply["models"]] == [False, False, None]
    assert (await commands.get_command(store.pool, "mine")) is not None


async def test_a_graph_one_backend_can_run_is_published_with_what_the_others_lack(api, store):
    await backends.record_check(store.pool, SECOND, models=[CHECKPOINT])
    status, reply, _ = await publish(api, name="mine")
    assert status == 201, reply
    assert reply["models"][:2] == [{"url": FIRST, "ready": False, "missing": [LACKED]},
                                   {"url": "http://127.0.0.1:9202", "ready": True, "missing": []}]


async def test_links_that_go_round_are_refused_before_anything_is_stored(api, store):
    cycle = graph(**{"3": {**DEFAULT_SD["3"], "inputs": {**DEFAULT_SD["3"]["inputs"], "latent_image": ["10", 0]}},
                     "10": {"class_type": "VAEEncode", "inputs": {"pixels": ["8", 0], "vae": ["4", 2]}}})
    status, reply, _ = await publish(api, workflow=cycle, name="mine", confirm_missing=True)
    assert (status, reply["error"]["code"]) == (400, "bad_workflow"), reply
    assert "cycle (#3 → #10 → #8 → #3)" in reply["error"]["message"]
    assert await commands.list_commands(store.pool) == []
