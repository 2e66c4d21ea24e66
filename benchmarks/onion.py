"""What the Anyone network costs: private-network bring-up and the onion path's added latency.

    python benchmarks/onion.py [--requests 50] [--budget 300]

Brings up the private Anyone network on 127.0.0.1 (anyone/privnet.py), publishes a
loopback ``/system_stats`` server as a hidden service with AnyoneService (the
production code), and times GET /system_stats through our transport, once
through the onion path and once direct, each on one kept-alive connection
after a warm-up request. Figures, as JSON lines on stdout:

- ``privnet_bringup_s``: network up, client bootstrapped (goal <= 60).
- ``onion_added_rtt_ms``: median onion GET minus median direct GET (goal <= 25;
  a new connection per request costs ~70 ms here, so this proves reuse).
- ``onion_demo_job_added_ms``: needs COMFYUI_DIR and is not measured yet (said on stderr).

Needs the anon binary (``python <pack folder> install-anon``). Everything is
bounded by --budget; the network's logs are kept when it fails to come up.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO_ROOT, Deadline, figure, note, write_figures
from aiohttp import ClientError, TraceConfig, web

REACH_S = 60


def load_pack():
    """The pack as package ``comfyui_courier``, loaded by path like ComfyUI does."""
    if "comfyui_courier" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "comfyui_courier", REPO_ROOT / "__init__.py", submodule_search_locations=[str(REPO_ROOT)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["comfyui_courier"] = module
        spec.loader.exec_module(module)
    return sys.modules["comfyui_courier"]


async def stats_server() -> tuple[web.AppRunner, str]:
    async def system_stats(request):
        return web.json_response({"system": {"os": "posix", "comfyui_version": "benchmark"}, "devices": []})

    app = web.Application()
    app.router.add_get("/system_stats", system_stats)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"


async def timed_gets(url: str, settings, socks_url: str | None, count: int) -> tuple[list[float], int]:
    """``count`` GETs on one session after a warm-up; (milliseconds each, connections opened)."""
    from comfyui_courier.anyone import make_session

    connections = 0

    async def opened(*_):
        nonlocal connections
        connections += 1

    trace = TraceConfig()
    trace.on_connection_create_end.append(opened)
    deadline = time.monotonic() + REACH_S
    while True:  # warm-up: the first request fetches the descriptor and builds the rendezvous
        session = make_session(url, settings, socks_url, trace_configs=[trace])
        try:
            async with session.get(f"{url}/system_stats") as reply:
                reply.raise_for_status()
                await reply.read()
            break
        except (ClientError, OSError, asyncio.TimeoutError):
            await session.close()
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
    connections = 0
    times = []
    async with session:
        for _ in range(count):
            began = time.perf_counter()
            async with session.get(f"{url}/system_stats") as reply:
                await reply.read()
            times.append((time.perf_counter() - began) * 1000)
    return times, connections


async def run(args, deadline: Deadline) -> None:
    load_pack()
    logging.getLogger("courier.anyone").setLevel(logging.ERROR)  # anon's test-network warnings
    from comfyui_courier.anyone.install import find_anon
    from comfyui_courier.anyone.privnet import PrivateNetwork
    from comfyui_courier.anyone.service import AnyoneService
    from comfyui_courier.config import Settings

    anon = find_anon(os.environ.get("COURIER_ANON_BINARY", ""))
    if anon is None or not anon.is_file():
        sys.exit("anon binary not found: run `python <pack folder> install-anon` or set COURIER_ANON_BINARY")
    workdir = Path(tempfile.mkdtemp(prefix="courier-onion-bench-"))
    net = PrivateNetwork(anon, workdir / "privnet")
    server, backend = await stats_server()
    service = None
    try:
        began = time.monotonic()
        await net.start()
        figure("privnet_bringup_s", time.monotonic() - began, "s")
        note("bring-up phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in net.phases.items()))
        settings = Settings(anyone_enabled=True, anyone_agree_to_terms=True, anon_binary=str(anon),
                            private_mode=True)
        service = AnyoneService(settings, workdir / "data", backend, network_options=net.network_options())
        await service.start()
        await service.wait_ready(min(60.0, deadline.remaining()))
        onion_url = f"http://{service.onion_address}"
        onion, onion_connections = await timed_gets(onion_url, settings, net.socks_url, args.requests)
        direct, _ = await timed_gets(backend, settings, None, args.requests)
        note(f"GET /system_stats x{args.requests}: onion median {statistics.median(onion):.2f} ms "
             f"(p90 {statistics.quantiles(onion, n=10)[-1]:.2f}, {onion_connections} new connection(s)), "
             f"direct median {statistics.median(direct):.3f} ms")
        figure("onion_added_rtt_ms", statistics.median(onion) - statistics.median(direct), "ms")
        if os.environ.get("COMFYUI_DIR"):
            note("onion_demo_job_added_ms: not measured yet (the /demo job path through Anyone comes later)")
        else:
            note("onion_demo_job_added_ms: skipped, COMFYUI_DIR is not set")
    except BaseException:
        note(f"logs kept in {workdir}")
        raise
    finally:
        if service is not None:
            await service.stop()
        await net.stop()
        await server.cleanup()
    shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50, help="timed GETs per path (default 50)")
    parser.add_argument("--budget", type=float, default=300, help="total seconds allowed (default 300)")
    parser.add_argument("--out", default=str(REPO_ROOT / "artifacts" / "benchmarks" / "onion.json"),
                        help="also write the figures here as JSON")
    args = parser.parse_args()
    deadline = Deadline(args.budget)
    try:
        asyncio.run(asyncio.wait_for(run(args, deadline), args.budget))
    except asyncio.TimeoutError:
        note(f"onion benchmark: over its budget of {args.budget:.0f} s")
        return 1
    write_figures(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
