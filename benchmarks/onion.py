"""What the Anyone network costs: private-network bring-up and the onion path's added latency.

    python benchmarks/onion.py [--requests 50] [--budget 300]

Brings up the private Anyone network on 127.0.0.1 (anyone/privnet.py), publishes a
loopback ``/system_stats`` server as a hidden service with AnyoneService (the
production code: client authorization on, the filtering gateway in front), and
times GET /system_stats through our transport, once through the onion path (the
service's own anon is the client: it holds the ``bot-host`` key the first start
provisions) and once direct, each on one kept-alive connection after a warm-up
request. Figures, as JSON lines on stdout:

- ``privnet_bringup_s``: network up, client bootstrapped (goal <= 60).
- ``onion_added_rtt_ms``: median onion GET minus median direct GET, the gateway's
  loopback hop included (goal <= 25; a new connection per request costs ~70 ms
  here, so this proves reuse).
- ``onion_demo_job_added_ms`` (needs COMFYUI_DIR, else skipped with a note; goal <= 100, as in the README):
  a real ComfyUI with the pack publishes itself as a hidden service on the private
  network (``COURIER_ANYONE=1``, joined through ``test-network.torrc``); two bots run
  in this process (python-telegram-bot against the Bot API emulator, the dispatcher,
  an embedded PostgreSQL each), one with that ComfyUI as ``http://127.0.0.1:PORT``, one
  with its ``http://<id>.anon`` address (private mode, our own anon, holding the client
  key that ComfyUI provisioned, copied as an operator would). ``/demo`` jobs
  alternate between them, one at a time, after a warm-up job each; a job's time is
  user message injected -> result document at the Bot API, minus ComfyUI's own
  execution time (its execution_start -> execution_success stamps, which do not
  depend on the path). The figure is the median onion job minus the median direct job;
  ``onion_demo_step_<step>_added_ms`` splits it by step (``_trace.py``).

    COMFYUI_DIR=/path/to/ComfyUI python benchmarks/onion.py [--requests 50] [--jobs 20]

Needs the anon binary (``python <pack folder> install-anon``). Everything is
bounded by --budget; the network's logs are kept when it fails to come up.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    REPO_ROOT,
    Deadline,
    OutOfTime,
    ended_job,
    figure,
    is_done,
    load_pack,
    load_runner,
    note,
    write_figures,
)
from _trace import Trace
from aiohttp import ClientError, TraceConfig, web

REACH_S = 60
ADDRESS_S = 120  # ComfyUI's anon: launch, bootstrap, keys
ADMIN_TOKEN = "onion-bench-token"  # a hidden service shows its address only to the token
JOB_S = 120
USER = 4242


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


async def timed_gets(url: str, settings, socks_url: str | None, count: int,
                     headers: dict | None = None) -> tuple[list[float], int]:
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
        session = make_session(url, settings, socks_url, trace_configs=[trace], headers=headers)
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


async def published_address(comfy, deadline: Deadline) -> str:
    """The .anon address ComfyUI's pack shows at GET /courier/anyone once anon is up."""
    until = time.monotonic() + min(ADDRESS_S, deadline.remaining())
    while True:
        status = await asyncio.to_thread(comfy.get_json, "/courier/anyone", token=ADMIN_TOKEN)
        if status["state"] == "ok" and status["onion_address"]:
            return status["onion_address"]
        if time.monotonic() > until:
            raise RuntimeError(f"ComfyUI published no hidden service in {ADDRESS_S} s: {status}")
        await asyncio.sleep(0.25)


async def start_bot(emulator, backend: str, data_dir: Path, anyone_env: dict):
    """A Courier in this process (bot + dispatcher + embedded PostgreSQL) for one backend URL."""
    from comfyui_courier.core.config import load_settings
    from comfyui_courier.runtime import Courier

    bot = emulator.add_bot()
    settings = load_settings(None, {"TELEGRAM_BOT_TOKEN": bot.token, "COURIER_TELEGRAM_API_URL": emulator.url,
                                    "COURIER_ALLOWED_USERS": str(USER), "COURIER_BACKENDS": backend,
                                    **anyone_env})
    courier = Courier(settings, data_dir, None)
    await courier.start()
    await courier.booted()
    if courier.anyone is not None:
        await courier.anyone.wait_ready(60)
    if courier.health.state("dispatcher") != "ok":
        await courier.stop()
        raise RuntimeError(f"Courier for {backend} did not start: {courier.health_report()}")
    return courier, bot


async def timed_job(emulator, courier, bot, text: str, trace: Trace, path: str,
                    deadline: Deadline) -> tuple[float, float]:
    """One /demo job: (ms from the user's message to the result document, ComfyUI's execution ms). The
    latter is read from the job's row once it has ended (``ended_job``), after its "Done", whichever
    message carries it (a quick job's is the result photo's caption).

    :raises TimeoutError: no result within ``JOB_S``; ``OutOfTime``: no end of its row
    """
    trace.begin(path)
    started = time.perf_counter()
    message = bot.inject_text(USER, text)
    document = await bot.wait_for_call("sendDocument", timeout=JOB_S, where=lambda c: (
        c.result.get("reply_to_message", {}).get("message_id") == message["message_id"]))
    total_ms = (document.received_at - started) * 1000  # the emulator's receipt, not this task's wake-up
    trace.mark("document", at=document.received_at)
    await emulator.wait_for(lambda: any(is_done(c) and c.received_at > started for c in bot.outbox), timeout=JOB_S)
    row = await ended_job(courier.store.pool, USER, f"the row of {text!r} to end", deadline, timeout=JOB_S)
    return total_ms, float(row["result"]["execution_ms"] or 0.0)


def share_client_key(comfy_data_dir: Path, bot_data_dir: Path) -> None:
    """Give the bot the client key and the credential ComfyUI's first start provisioned (its ``bot-host``),
    as an operator would."""
    from comfyui_courier.anyone.hidden_service import (
        BOT_HOST,
        CREDENTIAL,
        CREDENTIALS,
        write_bot_credential,
        write_client_credential,
    )

    source = comfy_data_dir / "anyone"
    line = (source / "client_auth" / f"{BOT_HOST}.auth_private").read_text()
    write_client_credential(bot_data_dir / "anyone" / "client_auth", "comfy", line)
    write_bot_credential(bot_data_dir / "anyone" / CREDENTIALS, "comfy",
                         (source / CREDENTIALS / f"{BOT_HOST}{CREDENTIAL}").read_text())


async def demo_jobs(net, anon: Path, jobs: int, deadline: Deadline, trace: Trace) -> dict[str, list[float]]:
    """/demo jobs on one real ComfyUI, alternating direct and onion; bot-side ms per path."""
    from comfyui_courier.emulator.botapi import BotApiEmulator

    runner = load_runner()
    anyone_env = {"COURIER_ANYONE": "1", "COURIER_ANYONE_AGREE_TO_TERMS": "1", "COURIER_ANON_BINARY": str(anon)}
    comfy = runner.ComfyUIProcess(os.environ["COMFYUI_DIR"], runner.scratch_directory("onion-bench-comfyui-"),
                                  env={**anyone_env, "COURIER_ADMIN_TOKEN": ADMIN_TOKEN})
    comfy.prepare()
    net.write_test_network(comfy.user_directory / "courier")
    couriers, data_dirs = [], []
    times: dict[str, list[float]] = {"direct": [], "onion": []}
    try:
        await asyncio.to_thread(comfy.start)
        address = await published_address(comfy, deadline)
        note(f"ComfyUI {comfy.url} is published as http://{address}/")
        async with BotApiEmulator() as emulator:
            paths = {}
            for path, backend, env in (("direct", comfy.url, {}),
                                       ("onion", f"http://{address}", {**anyone_env, "COURIER_PRIVATE_MODE": "1"})):
                data_dir = Path(tempfile.mkdtemp(prefix=f"onion-bench-{path}-"))
                data_dirs.append(data_dir)
                if env:
                    net.write_test_network(data_dir)
                    share_client_key(comfy.user_directory / "courier", data_dir)
                paths[path] = await start_bot(emulator, backend, data_dir, env)
                couriers.append(paths[path][0])
            for index in range(jobs + 1):  # job 0 of each path warms it up (descriptor, rendezvous) and is not counted
                if not deadline.allows(30):
                    note(f"time budget reached after {index - 1} jobs per path")
                    break
                try:
                    for path, (courier, bot) in paths.items():
                        total_ms, execution_ms = await timed_job(emulator, courier, bot, f"/demo {path} {index}",
                                                                 trace, path, deadline)
                        if index:
                            times[path].append(total_ms - execution_ms)
                        else:
                            trace.drop()
                except (TimeoutError, OutOfTime) as error:  # a job that failed is told, not "over the budget"
                    note(f"/demo {index} did not finish ({error or 'no result in time'}): the figures are those "
                         "of the jobs before it")
                    trace.drop()
                    break
            for courier in couriers:
                await courier.stop()
            couriers.clear()
    finally:
        for courier in couriers:
            await courier.stop()
        await asyncio.to_thread(comfy.stop)
        await asyncio.to_thread(comfy.kill_leftovers)
        for folder in (comfy.base_directory, *data_dirs):
            runner.remove_tree(folder)  # and, run as root, the database linked from it
    return times


async def run(args, deadline: Deadline) -> None:
    load_pack()
    logging.getLogger("courier.anyone").setLevel(logging.ERROR)  # anon's test-network warnings
    from comfyui_courier.anyone.gateway_policy import CREDENTIAL_HEADER
    from comfyui_courier.anyone.hidden_service import BOT_HOST, CREDENTIAL, CREDENTIALS
    from comfyui_courier.anyone.install import find_anon
    from comfyui_courier.anyone.privnet import PrivateNetwork
    from comfyui_courier.anyone.service import AnyoneService
    from comfyui_courier.core.config import Settings

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
        token = (service.dir / CREDENTIALS / f"{BOT_HOST}{CREDENTIAL}").read_text().split()[1]
        onion, onion_connections = await timed_gets(onion_url, settings, service.socks_url, args.requests,
                                                    {CREDENTIAL_HEADER: token})
        direct, _ = await timed_gets(backend, settings, None, args.requests)
        note(f"GET /system_stats x{args.requests}: onion median {statistics.median(onion):.2f} ms "
             f"(p90 {statistics.quantiles(onion, n=10)[-1]:.2f}, {onion_connections} new connection(s)), "
             f"direct median {statistics.median(direct):.3f} ms")
        figure("onion_added_rtt_ms", statistics.median(onion) - statistics.median(direct), "ms")
        if os.environ.get("COMFYUI_DIR"):
            await service.stop()
            service = None
            trace = Trace()
            trace.install()
            jobs = await demo_jobs(net, anon, args.jobs, deadline, trace)
            if jobs["onion"] and jobs["direct"]:
                note(f"/demo x{len(jobs['onion'])} per path, bot-side ms (job minus ComfyUI execution): "
                     f"onion median {statistics.median(jobs['onion']):.1f} (min {min(jobs['onion']):.1f}, "
                     f"max {max(jobs['onion']):.1f}), direct median {statistics.median(jobs['direct']):.1f} "
                     f"(min {min(jobs['direct']):.1f}, max {max(jobs['direct']):.1f})")
                figure("onion_demo_job_added_ms",
                       statistics.median(jobs["onion"]) - statistics.median(jobs["direct"]), "ms")
                note("median ms per step, onion / direct (benchmarks/_trace.py):")
                # a path with no fully traced job has no steps: then there is nothing to pair
                for (step, what, onion, _), (_, _, direct, _) in zip(trace.steps("onion"), trace.steps("direct"),
                                                                     strict=False):
                    note(f"  {onion:8.2f} / {direct:8.2f}  to {step}: {what}")
                    figure(f"onion_demo_step_{step}_added_ms", onion - direct, "ms")
            else:
                note("onion_demo_job_added_ms: no job completed within the budget")
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
    parser.add_argument("--jobs", type=int, default=20, help="timed /demo jobs per path (default 20)")
    parser.add_argument("--budget", type=float, default=480, help="total seconds allowed (default 480)")
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
