"""The seed's comparison table for any two devices or machines, from stored benchmark runs.

| method | path | access | query |
| --- | --- | --- | --- |
| GET | /courier/benchmarks/compare | status | ``old``, ``new`` (``<device>[@host]``), ``workflow``?, ``statistic``? |
| GET | /courier/benchmarks/compare.png | status | the same; the chart as PNG |

Rows: ``workflow, old, new, t_old, t_new, speedup_pct, ratio, reference``. ``speedup_pct`` is the
time saved, (t_old - t_new) / t_old in percent (the seed's way); ``ratio`` is t_old / t_new. The
seed's published rows (RTX 4090 vs 5090) follow with ``reference: true``. ``sides`` lists the
stored (device, host) pairs to choose from.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from ..gpu import compare_view
from ..gpu.compare import STATISTICS
from ..gpu.storage import load_runs
from ..runtime import COURIER
from .access import STATUS, Routes
from .api import ApiError, json_response, store_of

routes = Routes()

MAX_RUNS = 1000  # stored runs read per request, newest first
MAX_WORKFLOW_CHARS = 256
PARAMS = ("old", "new", "workflow", "statistic")


async def _comparison(request: web.Request):
    query = request.query
    unknown = sorted(set(query) - set(PARAMS))
    if unknown:
        raise ApiError(400, "bad_query", f"unknown parameter(s): {', '.join(map(repr, unknown))}; "
                                         f"use {', '.join(PARAMS)}")
    for name in PARAMS:
        if len(query.getall(name, [])) > 1:
            raise ApiError(400, "bad_query", f"give {name!r} once")
    for name in ("old", "new"):
        if name not in query:
            raise ApiError(400, "bad_query", f"{name!r} is required: <device> or <device>@<host>")
    statistic = query.get("statistic", "median")
    if statistic not in STATISTICS:
        raise ApiError(400, "bad_query", f"'statistic' must be one of {', '.join(STATISTICS)}")
    try:
        workflow = (compare_view.check_text("workflow", query["workflow"], MAX_WORKFLOW_CHARS)
                    if "workflow" in query else None)
    except compare_view.BadSide as exc:
        raise ApiError(400, "bad_query", str(exc)) from None
    runs = await load_runs(store_of(request.app[COURIER]).pool, workflow=workflow, limit=MAX_RUNS)
    known = {run.device for run in runs} | compare_view.reference_devices()
    try:
        old = compare_view.parse_side(query["old"], known, "old")
        new = compare_view.parse_side(query["new"], known, "new")
    except compare_view.BadSide as exc:
        raise ApiError(400, "bad_query", str(exc)) from None
    return compare_view.comparison(runs, old, new, workflow=workflow, statistic=statistic)


@routes.get("/courier/benchmarks/compare", access=STATUS)
async def compare(request: web.Request) -> web.Response:
    reply, _, _ = await _comparison(request)
    return json_response(reply)


@routes.get("/courier/benchmarks/compare.png", access=STATUS)
async def compare_png(request: web.Request) -> web.Response:
    _, table, reference = await _comparison(request)
    png = await asyncio.to_thread(compare_view.chart_png, table, reference)  # Pillow, off the loop
    return web.Response(body=png, content_type="image/png",
                        headers={"Cache-Control": "no-store"})
