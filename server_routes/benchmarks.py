"""Benchmark runs: GET /courier/benchmarks (stored runs, newest first), POST /courier/benchmarks/run."""

from __future__ import annotations

import functools

from aiohttp import web

from ..gpu.storage import load_runs
from ..jobs.ports import DeliveryFailed
from ..jobs.submit import announce, submit
from ..jobs.workflow import WorkflowError
from ..runtime import COURIER
from ..store import access, commands
from .api import (
    ADMIN,
    STATUS,
    ApiError,
    Field,
    check_body,
    endpoint,
    json_response,
    query_int,
    query_text,
    read_json,
    store_of,
)

routes = web.RouteTableDef()

RUN_FIELDS = ("id", "created_at", "workflow", "device", "host", "comfyui_version", "torch_version",
              "repeats", "warmup", "wall_s", "stats", "peak_memory_bytes")  # per_node: see the node's report


@routes.get("/courier/benchmarks")
@endpoint(STATUS)
async def benchmark_runs(request: web.Request) -> web.Response:
    limit = query_int(request, "limit", default=20, minimum=1, maximum=200)
    workflow = query_text(request, "workflow", max_length=256)
    runs = await load_runs(store_of(request.app[COURIER]).pool, workflow=workflow, limit=limit)
    return json_response({"runs": [{name: getattr(run, name) for name in RUN_FIELDS} for run in runs]})


@routes.post("/courier/benchmarks/run")
@endpoint(ADMIN)
async def run_benchmark(request: web.Request) -> web.Response:
    """Queue ``/bench`` for a stored command; the report and chart go to ``chat_id`` (an admin's chat)."""
    from ..core import i18n
    from ..jobs import bench as bench_job
    body = check_body(await read_json(request), {"command": Field(str, required=True, max_length=32),
                                                 "repeats": Field(int), "chat_id": Field(int, required=True)})
    courier = request.app[COURIER]
    if courier.bot is None:
        raise ApiError(503, "no_bot", "the bot is not running: results could not be delivered")
    pool = store_of(courier).pool
    if body["chat_id"] not in courier.settings.admin_users and body["chat_id"] not in await access.stored_admins(pool):
        raise ApiError(403, "not_admin", "chat_id must be an admin's: one of COURIER_ADMIN_USERS or the owner's")
    command = await commands.get_command(pool, body["command"].lstrip("/"))
    if command is None:
        raise ApiError(404, "unknown_command", f"no command named {body['command']!r}")
    repeats = body.get("repeats", bench_job.DEFAULT_REPEATS)
    try:
        bench_job.benchmark_prompt(command.workflow, name=command.name, repeats=repeats)
        params = bench_job.job_params(command.name, command.workflow, repeats, None)
    except (WorkflowError, ValueError) as exc:
        raise ApiError(400, "bad_benchmark", str(exc)) from None
    chat_id = body["chat_id"]

    async def post_status(position: int) -> int:
        return await courier.sink.send_text(chat_id, i18n.text(
            courier.settings.language, "bench_queued", name=command.name, warmup=params["warmup"],
            repeats=repeats, position=position))

    try:
        # Asked first: once queued, the dispatcher may start the job before the reply is tried.
        await courier.sink.check_chat(chat_id)
        job_id = await submit(pool, user_id=chat_id, chat_id=chat_id, command="bench", params=params)
        position = await announce(pool, job_id, post_status, functools.partial(courier.sink.delete_message, chat_id))
    except DeliveryFailed as exc:  # nothing queued, or the job is cancelled
        raise ApiError(502, "telegram_error", f"cannot message chat {chat_id}: {exc}") from None
    return json_response({"job_id": job_id, "position": position}, status=202)
