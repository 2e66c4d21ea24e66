"""Benchmark: measures the workflow it sits in over warm-up + N runs.

How repeats work is told in ``gpu/session.py``, how a run is timed in
``gpu/recorder.py``. This module is the ComfyUI side: the progress bar,
queueing the runs through ``POST /prompt``, storing and rendering.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time

from comfy_api.v0_0_2 import io
from comfy_execution.graph_utils import ExecutionBlocker

from ..gpu import devices, machine, report, session, storage
from ..gpu.recorder import RunRecorder, RunResult
from ..gpu.runs import build_run

log = logging.getLogger("courier")


class Benchmark(io.ComfyNode):
    NODE_ID = "CourierBenchmark"

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id=cls.NODE_ID,
            display_name="Benchmark (Courier)",
            category="Courier/GPU",
            description=(
                "Measures this workflow: queue it once and it runs warm-up + repeats times (the first run is "
                "this one), then once more to report. It has no inputs, so it starts first in each run; "
                "connect report and chart to display nodes. Per-node times, sampler it/s and peak memory "
                "are recorded; the report is stored in Courier's database."),
            inputs=[  # names and order are fixed: saved editor graphs store widget values by position
                io.Int.Input("repeats", default=5, min=1, max=100, tooltip="Measured runs"),
                io.Int.Input("warmup", default=1, min=0, max=10,
                             tooltip="Runs before the measured ones (models load, caches fill)"),
                io.String.Input("workflow_name", optional=True, default="",
                                tooltip="Name in comparisons; empty = derived from the graph"),
                io.String.Input("host", optional=True, default="",
                                tooltip="Machine name in comparisons; empty = hostname"),
                io.Boolean.Input("save", optional=True, default=True,
                                 tooltip="Store the result in Courier's database"),
            ],
            outputs=[io.String.Output(display_name="report"), io.Image.Output(display_name="chart")],
            hidden=[io.Hidden.prompt, io.Hidden.unique_id, io.Hidden.extra_pnginfo],
            is_output_node=True,
        )

    @classmethod
    def fingerprint_inputs(cls, **kwargs):
        return float("nan")  # every queue is a new measurement, never a cached one

    @classmethod
    async def execute(cls, repeats, warmup, workflow_name="", host="", save=True) -> io.NodeOutput:
        prompt, unique_id = cls.hidden.prompt, cls.hidden.unique_id
        if sum(node.get("class_type") == cls.NODE_ID for node in prompt.values()) > 1:
            raise ValueError("one Benchmark node per workflow: each would queue its own runs")
        queued_copy = session.run_of(prompt, unique_id)
        if queued_copy is None:
            bench = session.open_session(
                workflow_name.strip() or session.workflow_fingerprint(prompt, skip=unique_id),
                host.strip() or socket.gethostname(), repeats, warmup, save)
            run = 0
        else:
            session_id, run = queued_copy
            bench = session.find_session(session_id)
            if bench is None:
                raise RuntimeError(f"benchmark session {session_id} is gone (ComfyUI restarted, or many "
                                   "benchmarks started since); queue the workflow again")
        _show_progress(unique_id, run, bench.total_runs)
        if run == bench.report_run:
            session.close_session(bench.id)
            return io.NodeOutput(*await _finish(bench))
        result = await _measure_run(unique_id, prompt)
        bench.runs[run] = result
        log.info("Courier benchmark %s: run %d/%d %.3f s%s", bench.id, run + 1, bench.total_runs,
                 result.total_s, " (warm-up)" if bench.is_warmup(run) else "")
        if queued_copy is None:
            await _queue_runs(prompt, unique_id, bench, cls.hidden.extra_pnginfo)
        return io.NodeOutput(ExecutionBlocker(None), ExecutionBlocker(None))  # the report run outputs


def _show_progress(node_id: str, run: int, total: int) -> None:
    import comfy.utils

    comfy.utils.ProgressBar(total, node_id=node_id).update_absolute(run, total)


async def _measure_run(node_id: str, prompt: dict) -> RunResult:
    """Time this prompt from now until its other nodes are done."""
    from comfy_execution.progress import add_progress_handler, get_progress_state
    from comfy_execution.utils import get_executing_context

    recorder = RunRecorder(node_id)
    memory = machine.PeakMemory()
    memory.start()
    started = time.perf_counter()
    add_progress_handler(recorder)
    try:
        await recorder.until_idle()
    finally:
        get_progress_state().unregister_handler(recorder.name)
    total = time.perf_counter() - started
    peaks = memory.stop()
    used = _devices(prompt)
    cuda_peaks = [peaks["cuda"][d.index or 0] for d in used
                  if d.type == "cuda" and (d.index or 0) in peaks["cuda"]]
    context = get_executing_context()
    return RunResult(
        total_s=total, nodes=recorder.node_times(), cached=recorder.cached,
        ran_before=recorder.ran_before,
        peak_memory_bytes=max(cuda_peaks) if cuda_peaks else peaks["rss"],
        memory_kind="cuda" if cuda_peaks else f"rss since {peaks['rss_since']}",
        devices=[str(d) for d in used], prompt_id=context.prompt_id if context else "")


def _devices(prompt: dict) -> list:
    """ComfyUI's main device, then those the workflow's Device Assign nodes chose."""
    import comfy.model_management as mm
    import torch

    found = [mm.get_torch_device()] + [torch.device(d) for d in devices.assigned_devices(prompt)]
    return list(dict.fromkeys(found))


async def _queue_runs(prompt: dict, node_id: str, bench: session.Session, extra_pnginfo) -> None:
    """Queue the session's other runs and its report run, for the same editor tab (client_id)."""
    import aiohttp
    from server import PromptServer

    server = PromptServer.instance
    url = _courier(server).local_backend
    common = {"client_id": server.client_id} if server.client_id else {}
    extra = {"extra_pnginfo": extra_pnginfo} if extra_pnginfo else {}
    queued: list[str] = []
    async with aiohttp.ClientSession() as http:
        try:
            for copy in session.queued_prompts(prompt, node_id, bench):
                body = {"prompt": copy, "extra_data": extra, **common}
                async with http.post(f"{url}/prompt", json=body) as reply:
                    answer = await reply.json(content_type=None)
                    if reply.status != 200:
                        raise RuntimeError(f"ComfyUI refused a benchmark run: {answer}")
                queued.append(answer["prompt_id"])
        except BaseException:
            if queued:  # no half sessions left in the queue
                await http.post(f"{url}/queue", json={"delete": queued})
            session.close_session(bench.id)
            raise


async def _finish(bench: session.Session) -> tuple:
    import numpy as np
    import torch

    used = dict.fromkeys(d for r in bench.measured() for d in r.devices)
    run = build_run(bench, " + ".join(machine.device_name(d) for d in used), machine.versions())
    text = report.benchmark_report(run)
    if bench.save:
        text += "\n" + await _save(run)
    pixels = np.asarray(report.benchmark_chart(run), dtype=np.float32) / 255.0
    return (text, torch.from_numpy(pixels)[None])


async def _save(run) -> str:
    """Store the run on the server's event loop, where the database pool lives."""
    from server import PromptServer

    server = PromptServer.instance
    store = _courier(server).store
    if store is None:
        return "not stored: Courier's database is not running"
    future = asyncio.run_coroutine_threadsafe(storage.save_run(store.pool, run), server.loop)
    try:
        stored = await asyncio.wrap_future(future)
    except Exception as exc:  # the measurement is still worth showing
        log.exception("Courier benchmark: storing the run failed")
        return f"not stored: {exc}"
    return f"stored as benchmark run {stored.id}"


def _courier(server):
    from ..runtime import COURIER

    return server.app[COURIER]
