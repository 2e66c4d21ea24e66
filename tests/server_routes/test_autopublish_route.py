"""POST /courier/commands with ``"auto": true`` against real PostgreSQL: a graph without Telegram nodes
is published with them put in, a dry run only says what was found, and hostile bodies are refused."""

import asyncio
import time

import pytest

from comfyui_courier.store import commands
from comfyui_courier.tests.jobs.test_autopublish import DEFAULT_SD, NODE_TYPES, TWO_ENCODERS, graph
from comfyui_courier.tests.server_routes.helpers import TOKEN, demo_graph


@pytest.fixture
async def api(courier_api, store):
    return await courier_api(store=store, node_types=NODE_TYPES)


async def auto(api, workflow=None, token=TOKEN, **body):
    return await api.send("POST", "/courier/commands", token=token,
                          json={"workflow": DEFAULT_SD if workflow is None else workflow, "auto": True, **body})


async def test_a_plain_graph_is_published_with_the_telegram_nodes_put_in(api, store):
    status, reply, _ = await auto(api, name="mine", description="My SD graph")
    assert status == 201, reply
    assert reply["found"]["prompt"]["node"] == "6" and reply["found"]["problem"] is None
    assert [o["name"] for o in reply["command"]["options"]] == ["seed", "ar", "size", "steps", "n", "neg"]
    assert (reply["command"]["nodes"], reply["command"]["requires_image"]) == (8, False)
    stored = (await commands.get_command(store.pool, "mine")).workflow
    assert stored["10"]["class_type"] == "CourierTelegramInput" and stored["10"]["inputs"]["command"] == "mine"
    assert stored["9"]["class_type"] == "CourierTelegramOutput"
    assert stored["9"]["inputs"]["filename_prefix"] == "courier/mine"
    assert stored["6"]["inputs"]["text"] == ["10", 0]
    status, exported, _ = await api.get("/courier/commands/mine/export")
    assert (status, exported) == (200, stored)  # what runs is what was published
    status, reply, _ = await auto(api, name="mine")
    assert (status, reply["error"]["code"]) == (409, "command_exists"), reply
    status, reply, _ = await auto(api, graph(**TWO_ENCODERS), name="mine", prompt="10", replace=True)
    assert (status, reply["found"]["prompt"]["node"]) == (200, "10"), reply


async def test_a_dry_run_says_what_it_found_and_stores_nothing(api, store):
    status, reply, _ = await auto(api, graph(**TWO_ENCODERS), dry_run=True)
    assert status == 200, reply
    found = reply["found"]
    assert (found["prompt"], found["problem"]["code"]) == (None, "two_prompts")
    assert [t["node"] for t in found["texts"]] == ["6", "7", "10"]
    assert "command" not in reply and await commands.list_commands(store.pool) == []
    status, reply, _ = await auto(api, graph(**TWO_ENCODERS), name="mine")
    assert (status, reply["error"]["code"]) == (400, "two_prompts"), reply
    assert "choose the prompt" in reply["error"]["message"]
    status, reply, _ = await auto(api, graph(**TWO_ENCODERS), dry_run=True, prompt="10")
    assert (status, reply["found"]["prompt"]["text"], reply["found"]["problem"]) == (200, "a style", None)
    status, reply, _ = await auto(api, graph(**TWO_ENCODERS), name="mine", prompt="10")
    assert status == 201, reply
    stored = (await commands.get_command(store.pool, "mine")).workflow
    assert stored["10"]["inputs"]["text"] == ["12", 0] and stored["6"]["inputs"]["text"] != ["12", 0]


async def test_choices_pick_the_picture_and_the_outputs(api, store):
    workflow = graph(**{"10": {"class_type": "LoadImage", "inputs": {"image": "a.png"}},
                        "11": {"class_type": "VAEEncode", "inputs": {"pixels": ["10", 0], "vae": ["4", 2]}},
                        "12": {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}},
                        "3": {**DEFAULT_SD["3"], "inputs": {**DEFAULT_SD["3"]["inputs"], "latent_image": ["11", 0]}}})
    status, reply, _ = await auto(api, workflow, name="edit", outputs=["9", "12"])
    assert status == 201, reply
    assert reply["command"]["requires_image"] is True
    assert [o["node"] for o in reply["found"]["outputs"]] == ["9", "12"]
    status, reply, _ = await auto(api, workflow, name="fixed", image=None)  # its LoadImage stays: input/a.png
    assert (status, reply["error"]["code"]) == (400, "file_input_refused"), reply
    workflow["10"]["inputs"]["image"] = "courier/a.png"  # a picture of Courier's own folder may stay
    status, reply, _ = await auto(api, workflow, name="fixed", image=None)
    assert (status, reply["command"]["requires_image"]) == (201, False), reply
    assert (await commands.get_command(store.pool, "fixed")).workflow["10"]["class_type"] == "LoadImage"


@pytest.mark.parametrize("body,status,code,says", [
    ({"workflow": demo_graph(), "name": "x"}, 400, "has_telegram_nodes", "without auto"),
    ({"workflow": DEFAULT_SD}, 400, "bad_name", "give the command a name"),
    ({"workflow": DEFAULT_SD, "name": "help"}, 409, "reserved_name", "built-in"),
    ({"workflow": DEFAULT_SD, "name": "../x"}, 400, "bad_name", ""),
    ({"workflow": graph(**{"9": None}), "name": "x"}, 400, "no_output", "no output to send"),
    ({"workflow": DEFAULT_SD, "name": "x", "prompt": "3"}, 400, "bad_choice", "not a node with a text widget"),
    ({"workflow": DEFAULT_SD, "name": "x", "prompt": "../../etc/passwd" * 100}, 400, "bad_choice", "…"),
    ({"workflow": DEFAULT_SD, "name": "x", "image": "6"}, 400, "bad_choice", "not a LoadImage"),
    ({"workflow": DEFAULT_SD, "name": "x", "outputs": [{"node": "9"}]}, 400, "bad_choice", "saving nodes"),
    ({"workflow": DEFAULT_SD, "name": "x", "outputs": [["9"]]}, 400, "bad_choice", "saving nodes"),
    ({"workflow": DEFAULT_SD, "name": "x", "outputs": []}, 400, "bad_choice", "saving nodes"),
    ({"workflow": DEFAULT_SD, "name": "x", "outputs": "9"}, 400, "bad_body", "'outputs' must be an array"),
    ({"workflow": DEFAULT_SD, "name": "x", "image": 10}, 400, "bad_body", "'image' must be a string or null"),
    ({"workflow": DEFAULT_SD, "name": "x", "prompt": None}, 400, "bad_body", "'prompt' must be a string"),
    ({"workflow": DEFAULT_SD, "name": "x", "auto": "yes"}, 400, "bad_body", "'auto' must be true or false"),
    ({"workflow": {"1": "x"}, "name": "x"}, 400, "bad_workflow", "no class_type"),
    ({"workflow": {"1": {"class_type": "KSampler", "inputs": []}}, "name": "x"}, 400, "bad_workflow",
     "inputs must be an object"),
    ({"workflow": graph(**{"6": {"class_type": "CLIPTextEncode", "inputs": {"text": ["77", 0]}}}), "name": "x"},
     400, "bad_workflow", "missing node '77'"),
    ({"workflow": graph(**{"20": {"class_type": "EvilNode", "inputs": {}}}), "name": "x", "dry_run": True},
     400, "bad_workflow", "not installed on this ComfyUI: EvilNode"),
])
async def test_hostile_auto_bodies_are_refused_and_nothing_is_stored(api, store, body, status, code, says):
    body = {"auto": True, **body}
    reply_status, reply, _ = await api.send("POST", "/courier/commands", json=body)
    assert (reply_status, reply["error"]["code"]) == (status, code), reply
    assert says in reply["error"]["message"]
    assert await commands.list_commands(store.pool) == []


@pytest.mark.parametrize("extra", [{"prompt": "6"}, {"image": None}, {"outputs": ["9"]}, {"dry_run": True}])
async def test_choices_without_auto_are_refused(api, extra):
    status, reply, _ = await api.send("POST", "/courier/commands", json={"workflow": demo_graph(), **extra})
    assert (status, reply["error"]["code"]) == (400, "bad_body"), reply
    assert 'only go with "auto": true' in reply["error"]["message"]


async def test_a_dry_run_needs_the_admin_token_too(api):
    status, reply, _ = await auto(api, dry_run=True, token=None)
    assert (status, reply["error"]["code"]) == (401, "unauthorized"), reply


async def test_loops_and_long_chains_are_walked_in_bounded_time(api, store):
    looped = graph(**{"6": {"class_type": "ConditioningCombine", "inputs": {"conditioning_1": ["10", 0],
                                                                            "conditioning_2": ["6", 0]}},
                      "10": {"class_type": "ConditioningCombine", "inputs": {"conditioning_1": ["6", 0],
                                                                             "conditioning_2": ["10", 0]}}})
    status, reply, _ = await auto(api, looped, dry_run=True)  # no run of it could end: ComfyUI refuses it too
    assert (status, reply["error"]["code"]) == (400, "bad_workflow"), reply
    assert "cycle (#6 → #10 → #6)" in reply["error"]["message"]
    chain = graph(**{str(i): {"class_type": "ConditioningCombine",
                              "inputs": {"conditioning_1": [str(i + 1), 0], "conditioning_2": [str(i + 1), 0]}}
                     for i in range(100, 1990)} | {"1990": DEFAULT_SD["6"]})
    chain["3"]["inputs"]["positive"] = ["100", 0]
    started = time.monotonic()
    status, reply, _ = await asyncio.wait_for(auto(api, chain, name="long"), 30)
    assert status == 201, reply
    assert reply["found"]["prompt"]["node"] == "1990"
    assert time.monotonic() - started < 10
