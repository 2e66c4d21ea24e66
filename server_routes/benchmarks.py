"""GET /courier/benchmarks[?workflow=W&limit=N]: stored runs of the Benchmark node, newest first."""

from __future__ import annotations

from aiohttp import web

from ..gpu.storage import load_runs
from ..runtime import COURIER
from .api import STATUS, ApiError, endpoint, json_response, query_int, store_of

routes = web.RouteTableDef()

RUN_FIELDS = ("id", "created_at", "workflow", "device", "host", "comfyui_version", "torch_version",
              "repeats", "warmup", "wall_s", "stats", "peak_memory_bytes")  # per_node: see the node's report


@routes.get("/courier/benchmarks")
@endpoint(STATUS)
async def benchmark_runs(request: web.Request) -> web.Response:
    limit = query_int(request, "limit", default=20, minimum=1, maximum=200)
    workflow = request.query.get("workflow")
    if workflow is not None and len(workflow) > 256:
        raise ApiError(400, "bad_query", "'workflow' is longer than 256")
    runs = await load_runs(store_of(request.app[COURIER]).pool, workflow=workflow, limit=limit)
    return json_response({"runs": [{name: getattr(run, name) for name in RUN_FIELDS} for run in runs]})
