"""Publishing through a real ComfyUI's ``POST /courier/commands`` runs ComfyUI's own validation of the
graph (``execution.validate_prompt``) and refuses what its ``POST /prompt`` would refuse in every run,
with ComfyUI's reason; a model file it lacks is no refusal (the editor is asked instead)."""

import asyncio

import aiohttp
import pytest

from comfyui_courier.store import commands
from comfyui_courier.store.pool import create_pool
from comfyui_courier.tests.integration.test_comfyui import wait_for_health
from comfyui_courier.tests.jobs.test_autopublish import DEFAULT_SD, graph

pytestmark = pytest.mark.timeout(240)

TOKEN = "publish-validation-token-4321"


def sampler(**inputs) -> dict:
    return {**DEFAULT_SD["3"], "inputs": {**DEFAULT_SD["3"]["inputs"], **inputs}}


REFUSED = {  # (graph, code, what the message says): the graphs of issue 29
    "cycle": (graph(**{"3": sampler(latent_image=["10", 0]),
                       "10": {"class_type": "VAEEncode", "inputs": {"pixels": ["8", 0], "vae": ["4", 2]}}}),
              "bad_workflow", "cycle (#3 → #10 → #8 → #3)"),
    "slot99": (graph(**{"8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 99], "vae": ["4", 2]}}}),
               "comfyui_refused", "VAEDecode (node 8), input samples: links to output 99 of KSampler (node 3), "
                                  "which has 1 (0 to 0)"),
    "steps": (graph(**{"3": sampler(steps=10**9)}), "comfyui_refused",
              "KSampler (node 3), input steps: Value 1000000000 bigger than max of 10000"),
}


async def test_what_comfyui_refuses_is_not_published_and_a_missing_model_is_no_refusal(
        comfyui_factory, pg_database):
    server = comfyui_factory(start=False, env={"COURIER_DATABASE_URL": pg_database, "COURIER_ADMIN_TOKEN": TOKEN})
    await asyncio.to_thread(server.start)
    health = await asyncio.to_thread(wait_for_health, server, "database")
    assert health["components"]["database"]["state"] == "ok", health
    replies = {}
    async with aiohttp.ClientSession() as http:
        for name, workflow in [*((name, case[0]) for name, case in REFUSED.items()), ("fine", DEFAULT_SD)]:
            async with http.post(f"{server.url}/courier/commands", headers={"Authorization": f"Bearer {TOKEN}"},
                                 json={"workflow": workflow, "auto": True, "name": name,
                                       "confirm_missing": True}) as reply:
                replies[name] = (reply.status, await reply.json())
    for name, (_, code, says) in REFUSED.items():
        status, reply = replies[name]
        assert (status, reply["error"]["code"]) == (400, code), (name, reply)
        assert says in reply["error"]["message"], (name, reply)
    assert replies["slot99"][1]["error"]["message"].startswith("ComfyUI refuses this graph")
    status, reply = replies["fine"]  # its checkpoint is on no backend: confirmed, it is published
    assert status == 201, reply
    pool = await create_pool(pg_database)
    try:
        assert [command.name for command in await commands.list_commands(pool) if command.source != "seed"] == ["fine"]
    finally:
        await pool.close()
