"""Threat row: holder of a leaked client key (or anyone, with client authorization off), through the gateway.

The hidden service's gateway (anyone/gateway.py) runs in this process on 127.0.0.1 in front of a real
ComfyUI 0.3.64 with the pack, as anon would reach it (the onion path itself: tests/anyone/test_end_to_end.py).
``BOT`` is the credential of a bot host whose job runs; ``OTHER`` that of another credential holder (a
second bot host, or whoever has its leaked files). A client key without a credential gets nothing.
"""

import asyncio
import io
import json
import random
import uuid

import aiohttp
import pytest
from PIL import Image

from comfyui_courier.anyone.gateway import gateway_app
from comfyui_courier.anyone.gateway_policy import CREDENTIAL_HEADER, Policy, digest
from comfyui_courier.jobs.comfy.client import ComfyClient
from comfyui_courier.jobs.seed import (
    SEED_DIR,
    seed_manifest,
    sendable_node_types,
    shipped_workflow,
)
from comfyui_courier.jobs.workflow import fill_job
from comfyui_courier.tests.support.http import serve_app

BOT, OTHER = "bot-host-credential", "other-credential"
JOB_S = 120
WAIT_S = 10


@pytest.fixture
async def gateway(comfyui):
    """(gateway URL, ComfyUI) with the two credentials and the shipped node types."""
    policy = Policy(credentials=frozenset((digest(BOT), digest(OTHER))), node_types=sendable_node_types)
    async with serve_app(gateway_app(comfyui.url, policy=policy)) as url:
        yield url, comfyui


def demo_graph(job: str) -> dict:
    return fill_job(shipped_workflow(seed_manifest()["demo"], SEED_DIR), prompt="leak test", seed=1, job=job)


async def test_a_client_key_without_the_credential_gets_403_for_everything(gateway):
    url, _ = gateway
    async with aiohttp.ClientSession() as session:
        for method, path in (("GET", "/system_stats"), ("GET", "/object_info"), ("GET", "/queue"),
                             ("GET", "/history/x"), ("GET", "/view?filename=a.png&subfolder=courier"),
                             ("POST", "/prompt"), ("POST", "/interrupt"), ("POST", "/courier/files/delete"),
                             ("GET", "/courier/health"), ("GET", "/ws?clientId=x")):
            async with session.request(method, url + path, json={}) as reply:
                assert reply.status == 403, (method, path, reply.status)


async def test_the_attacks_of_a_credential_holder_are_refused_and_a_bot_job_still_works(gateway):
    url, comfy = gateway
    private = comfy.base_directory / "output" / "operator-private.png"
    private.parent.mkdir(parents=True, exist_ok=True)
    private.write_bytes(b"\x89PNG private render")
    async with ComfyClient(url, headers={CREDENTIAL_HEADER: BOT}) as bot:
        job = str(uuid.uuid4())
        async with bot.follow(job):  # the bot's socket is open (its clientId claimed) while its prompt waits
            await bot.queue_prompt(demo_graph(job), bot.client_id, job)
            async with aiohttp.ClientSession(headers={CREDENTIAL_HEADER: OTHER}) as attacker:
                async def status(method, path, **kwargs) -> int:
                    async with attacker.request(method, url + path, **kwargs) as reply:
                        await reply.read()
                        return reply.status

                assert await status("GET", "/view", params={"filename": private.name, "type": "output"}) == 403
                assert await status("GET", "/view", params={"filename": private.name, "subfolder": "",
                                                            "type": "output"}) == 403
                form = aiohttp.FormData()
                form.add_field("image", b"overwritten", filename=private.name, content_type="image/png")
                form.add_field("type", "output")
                form.add_field("overwrite", "true")
                assert await status("POST", "/upload/image", data=form) == 403
                form = aiohttp.FormData()
                form.add_field("image", b"overwritten", filename="../operator-private.png",
                               content_type="image/png")
                form.add_field("type", "output")
                form.add_field("subfolder", "courier")
                form.add_field("overwrite", "true")
                assert await status("POST", "/upload/image", data=form) == 403
                assert private.read_bytes() == b"\x89PNG private render"
                foreign = {"1": {"class_type": "SaveLatent", "inputs": {}}}
                assert await status("POST", "/prompt", json={"prompt": foreign, "client_id": "a",
                                                             "prompt_id": "a1"}) == 403
                spam = demo_graph("a2")
                output = next(n for n in spam.values() if n["class_type"] == "CourierTelegramOutput")
                output["inputs"]["send_to_chat"] = "4242"
                assert await status("POST", "/prompt", json={"prompt": spam, "client_id": "a",
                                                             "prompt_id": "a2"}) == 403
                assert await status("POST", "/prompt", json={"prompt": demo_graph("a3"), "client_id": "a",
                                                             "prompt_id": "a3", "extra_data": {"x": 1}}) == 403
                assert await status("POST", "/prompt", data=b"[" * (2 * 2**20 + 1),
                                    headers={"Content-Type": "application/json"}) == 413
                assert await status("GET", "/history") == 403
                async with attacker.get(f"{url}/queue") as reply:
                    queue = await reply.json()
                assert reply.status == 200
                assert queue == {"queue_running": [], "queue_pending": []}  # the bot's prompt, id included, left out
                refused = demo_graph(job)  # ComfyUI would refuse it (400): a required input missing
                next(iter(refused.values()))["inputs"].clear()
                assert await status("POST", "/prompt", json={"prompt": refused, "client_id": "a",
                                                             "prompt_id": job}) == 409
                assert await status("POST", "/queue", json={"clear": True}) == 403
                assert await status("POST", "/queue", json={"delete": [job]}) == 403
                assert await status("POST", "/interrupt", json={}) == 403
                assert await status("POST", "/interrupt", json={"prompt_id": job}) == 403
                assert await status("GET", "/ws", params={"clientId": bot.client_id}) == 403
                async with (aiohttp.ClientSession() as stranger,  # the leaked key alone
                            stranger.post(f"{url}/courier/files/delete",
                                          json={"files": [], "prompt_ids": [job]}) as reply):
                    assert reply.status == 403
        result = await asyncio.wait_for(bot.run_prompt(demo_graph(str(uuid.uuid4()))), JOB_S)
        assert result.files and all(file.subfolder.startswith("courier") for file in result.files)
        first = result.files[0]
        assert (await bot.view(first.filename, first.subfolder, first.type)).startswith(b"\x89PNG")
        entry = await bot.history(result.prompt_id)
        assert entry is not None and entry.status_str == "success"
        async with (aiohttp.ClientSession(headers={CREDENTIAL_HEADER: OTHER}) as attacker,
                    attacker.get(f"{url}/history/{result.prompt_id}") as reply):
            seen = await reply.json()  # another's prompt: nothing
        assert (reply.status, seen) == (200, {})
        await bot.cancel(result.prompt_id)  # its own prompt: delete and interrupt pass (nothing left to stop)
        assert await bot.delete_files([{"filename": first.filename, "subfolder": first.subfolder,
                                        "type": first.type}], [result.prompt_id]) == {
            "deleted": 1, "missing": 0, "refused": 0, "failed": 0}


def photo(size: int) -> bytes:
    """A real PNG of about ``size`` bytes: random noise does not compress."""
    side = int((size / 3) ** 0.5)
    buffer = io.BytesIO()
    Image.frombytes("RGB", (side, side), random.Random(size).randbytes(side * side * 3)).save(buffer, "PNG")
    return buffer.getvalue()


async def pieces(data: bytes, count: int, pause_s: float):
    """``data`` as a chunked body in ``count`` pieces ``pause_s`` apart (anon hands bodies over in cells)."""
    size = -(-len(data) // count)
    for start in range(0, len(data), size):
        yield data[start:start + size]
        await asyncio.sleep(pause_s)


async def test_bodies_reach_comfyui_whole_however_they_arrive(gateway):
    """1 MB and 10 MB pictures (the bot's upload, and one sent in slow pieces) and a prompt in two pieces
    0.3 s apart pass the gateway whole; a body past the limit gets 413."""
    url, comfy = gateway
    async with ComfyClient(url, headers={CREDENTIAL_HEADER: BOT}) as bot:
        for size in (2**20, 10 * 2**20):
            sent = photo(size)
            name = await bot.upload_image(sent, f"photo-{size}.png")
            assert name == f"courier/photo-{size}.png"
            assert await bot.view(f"photo-{size}.png", "courier", "input") == sent
        form = aiohttp.FormData()
        form.add_field("image", photo(2**20), filename="slow.png", content_type="image/png")
        form.add_field("type", "input")
        form.add_field("subfolder", "courier")
        body = form()
        whole = io.BytesIO()

        class Sink:
            async def write(self, data):
                whole.write(data)

        await body.write(Sink())
        async with aiohttp.ClientSession(headers={CREDENTIAL_HEADER: BOT, "Content-Type": body.content_type}) as s:
            async with s.post(f"{url}/upload/image", data=pieces(whole.getvalue(), 8, 0.1)) as reply:
                assert (reply.status, await reply.json()) == (200, {"name": "slow.png", "subfolder": "courier",
                                                                    "type": "input"})
            job = str(uuid.uuid4())
            prompt = json.dumps({"prompt": demo_graph(job), "client_id": bot.client_id, "prompt_id": job}).encode()
            async with s.post(f"{url}/prompt", data=pieces(prompt, 2, 0.3),
                              headers={"Content-Type": "application/json"}) as reply:
                assert (reply.status, (await reply.json())["prompt_id"]) == (200, job)
            await bot.cancel(job)
            async with s.post(f"{url}/upload/image", data=pieces(b"x" * (32 * 2**20 + 1), 32, 0),
                              headers={"Content-Type": "multipart/form-data; boundary=b"}) as reply:
                assert reply.status == 413
    assert (comfy.base_directory / "input" / "courier" / "slow.png").stat().st_size > 2**20 * 0.9
