"""GET /courier/health: version and the state of each service."""

from __future__ import annotations

from aiohttp import web

from ..runtime import COURIER

routes = web.RouteTableDef()


@routes.get("/courier/health")
async def health(request: web.Request) -> web.Response:
    return web.json_response(request.app[COURIER].health_report())
