"""Benchmark runs: GET /courier/benchmarks (stored runs, newest first), POST /courier/benchmarks/run."""

from __future__ import annotations

import contextlib

from aiohttp import web

from ..gpu.storage import load_runs
from ..jobs.ports import ChatError, DeliveryFailed
from ..jobs.submit import announcing
from ..runtime import COURIER
from .access import ADMIN, STATUS, Routes
from .api import ApiError, Field, check_body, json_response, query_int, query_text, read_json, store_of

routes = Routes()

RUN_FIELDS = ("id", "created_at", "workflow", "device", "host", "comfyui_version", "torch_version",
              "repeats", "warmup", "wall_s", "stats", "peak_memory_bytes")  # per_node: see the node's report


@routes.get("/courier/benchmarks", access=STATUS)
async def benchmark_runs(request: web.Request) -> web.Response:
    limit = query_int(request, "limit", default=20, minimum=1, maximum=200)
    workflow = query_text(request, "workflow", max_length=256)
    runs = await load_runs(store_of(request.app[COURIER]).pool, workflow=workflow, limit=limit)
    return json_response({"runs": [{name: getattr(run, name) for name in RUN_FIELDS} for run in runs]})


@routes.post("/courier/benchmarks/run", access=ADMIN)
async def run_benchmark(request: web.Request) -> web.Response:
    """Queue ``/bench`` for a stored command; the report and chart go to ``chat_id`` (an admin's chat)."""
    from ..jobs import bench, queueing  # the benchmark runner's imports: on first use only
    body = check_body(await read_json(request), {"command": Field(str, required=True, max_length=32),
                                                 "repeats": Field(int), "chat_id": Field(int, required=True)})
    courier = request.app[COURIER]
    if courier.bot is None:
        raise ApiError(503, "no_bot", "the bot is not running: results could not be delivered")
    pool, chat_id = store_of(courier).pool, body["chat_id"]
    asked = queueing.BenchRequest(body["command"].lstrip("/"), body.get("repeats", bench.DEFAULT_REPEATS))
    planned = await queueing.plan_benchmark(pool, courier.settings, asked, user_id=chat_id, language=None)
    if isinstance(planned, queueing.NotAdmin):
        raise ApiError(403, "not_admin", "chat_id must be an admin's: one of COURIER_ADMIN_USERS or the owner's")
    if isinstance(planned, queueing.UnknownCommand):
        raise ApiError(404, "unknown_command", f"no command named {body['command']!r}")
    if isinstance(planned, queueing.BadBenchmark):
        raise ApiError(400, "bad_benchmark", planned.reason)
    try:
        # Asked first: once queued, the dispatcher may start the job before the reply is tried.
        await courier.sink.check_chat(chat_id)
        queued = await queueing.queue_benchmark(pool, planned, user_id=chat_id, chat_id=chat_id)  # no cap: Queued
        position = await announce(courier, queued.job_id, planned, chat_id)
    except DeliveryFailed as exc:  # nothing queued, or the job is cancelled
        raise ApiError(502, "telegram_error", f"cannot message chat {chat_id}: {exc}") from None
    return json_response({"job_id": queued.job_id, "position": position}, status=202)


async def announce(courier, job_id: int, benchmark, chat_id: int) -> int | None:
    """Tell ``chat_id`` that ``benchmark`` is queued, in the settings' language (``submit.announcing``);
    the position said, None if the job is no longer queued."""
    async with announcing(store_of(courier).pool, job_id) as reply:
        if reply.position is not None:
            reply.message_id = await courier.sink.send_text(
                chat_id, benchmark.queued_text(courier.settings.language, reply.position))
    if reply.redundant:
        with contextlib.suppress(ChatError):
            await courier.sink.delete_message(chat_id, reply.message_id)
    return reply.position
