"""What the hidden service's gateway spends checking a request (anyone/gateway_policy.py), in µs.

    python benchmarks/gateway_checks.py [--repeats 2000] [--budget 60]

For each shipped command's filled graph (as the bot sends it), the whole check of its
``POST /prompt``: route match, credential (constant-time, among three), body read and JSON
parse, node types, ``send_to_chat``, and whether ComfyUI already knows the prompt id (``GET /queue``
and ``GET /history/<id>`` of a loopback stand-in with an empty queue: a real ComfyUI's answer takes
longer, as its queue does); and of a ``GET /view`` of a file the caller owns. The requests are built
in memory, so this is the check alone, not the proxying.
Figures (JSON lines): ``gateway_check_prompt_us_<command>`` and ``gateway_check_view_us``, medians.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import uuid

from _common import REPO_ROOT, Deadline, load_pack, median_figure, note, write_figures


def request(app, method: str, path: str, headers: dict, body: bytes = b""):
    from aiohttp import StreamReader
    from aiohttp.base_protocol import BaseProtocol
    from aiohttp.test_utils import make_mocked_request

    loop = asyncio.get_running_loop()
    payload = StreamReader(BaseProtocol(loop), 2**16, loop=loop)
    payload.feed_data(body)
    payload.feed_eof()
    return make_mocked_request(method, path, headers={**headers, "Content-Length": str(len(body))},
                               payload=payload, app=app)


async def checked_us(app, method: str, path: str, headers: dict, body: bytes = b"") -> float:
    from comfyui_courier.anyone.gateway import POLICY
    from comfyui_courier.anyone.gateway_policy import Forward, route

    policy = app[POLICY]
    made = request(app, method, path, headers, body)
    began = time.perf_counter()
    rule = route(method, made.rel_url.raw_path)
    caller = policy.caller(made)
    decided = await rule(made, caller, policy)
    spent = (time.perf_counter() - began) * 1e6
    assert isinstance(decided, Forward), decided.text
    if decided.release is not None:
        decided.release()
    return spent


@contextlib.asynccontextmanager
async def gateway(policy):
    """The gateway app, started (its upstream session open), in front of a stand-in ComfyUI that knows no
    prompt: ``{"queue_running": [], "queue_pending": []}`` and ``{}`` for every history id."""
    from aiohttp import web

    from comfyui_courier.anyone.gateway import gateway_app

    async def empty_queue(request):
        return web.json_response({"queue_running": [], "queue_pending": []})

    async def no_history(request):
        return web.json_response({})

    comfy = web.Application()
    comfy.router.add_get("/queue", empty_queue)
    comfy.router.add_get("/history/{id}", no_history)
    comfy_runner = web.AppRunner(comfy, access_log=None)
    await comfy_runner.setup()
    site = web.TCPSite(comfy_runner, "127.0.0.1", 0)
    await site.start()
    app = gateway_app(f"http://127.0.0.1:{comfy_runner.addresses[0][1]}", policy=policy)
    runner = web.AppRunner(app)
    await runner.setup()  # opens the upstream session (cleanup_ctx)
    try:
        yield app
    finally:
        await runner.cleanup()
        await comfy_runner.cleanup()


async def run(args, deadline: Deadline) -> None:
    load_pack()
    from comfyui_courier.anyone.gateway_policy import CREDENTIAL_HEADER, Policy, digest
    from comfyui_courier.jobs.seed import sendable_node_types

    tokens = [f"credential-{i}" for i in range(3)]
    policy = Policy(credentials=frozenset(map(digest, tokens)), node_types=sendable_node_types)
    headers = {CREDENTIAL_HEADER: tokens[-1], "Content-Type": "application/json"}
    policy.owned.wrote(digest(tokens[-1]), ("output", "courier", "demo_00001_.png"))
    async with gateway(policy) as app:
        await checks(app, args, deadline, headers)


async def checks(app, args, deadline: Deadline, headers: dict) -> None:
    """Each figure in an equal share of what is left of the budget, from the checks that fit in it
    (``median_figure``: partial if cut short), so one slow command leaves the others their time."""
    from comfyui_courier.jobs.seed import seed_manifest, shipped_workflow
    from comfyui_courier.jobs.workflow import fill_job

    graphs = {command: fill_job(shipped_workflow(entry), prompt="a lighthouse at dusk", seed=1, job="j")
              for command, entry in seed_manifest().items()}
    for index, (command, graph) in enumerate(graphs.items()):
        share = Deadline(deadline.remaining() / (len(graphs) + 1 - index))  # the view's share comes last
        times = []
        while len(times) < args.repeats and not share.expired():
            body = json.dumps({"prompt": graph, "client_id": "bot", "prompt_id": str(uuid.uuid4())}).encode()
            times.append(await checked_us(app, "POST", "/prompt", headers, body))
        note(f"/{command}: {len(graph)} nodes, {len(times)} checks")
        median_figure(f"gateway_check_prompt_us_{command}", times, args.repeats, "us")
    views = [await checked_us(app, "GET", "/view?filename=demo_00001_.png&subfolder=courier&type=output",
                              headers) for _ in range(args.repeats) if not deadline.expired()]
    median_figure("gateway_check_view_us", views, args.repeats, "us")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2000, help="checks per figure (default 2000)")
    parser.add_argument("--budget", type=float, default=60, help="total seconds allowed (default 60)")
    parser.add_argument("--out", default=str(REPO_ROOT / "artifacts" / "benchmarks" / "gateway_checks.json"),
                        help="also write the figures here as JSON")
    args = parser.parse_args()
    deadline = Deadline(args.budget)
    asyncio.run(run(args, deadline))
    write_figures(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
