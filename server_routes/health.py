"""GET /courier/health: version and the state of each service (to strangers: the states only)."""

from __future__ import annotations

from aiohttp import web

from ..runtime import COURIER
from .access import STATUS, Routes
from .api import json_response

routes = Routes()


async def states(request: web.Request) -> web.Response:
    """What anyone may read: each service's state, not why (a reason may name a server path)."""
    components = request.app[COURIER].health.report()
    return json_response({"components": {name: {"state": part["state"]} for name, part in components.items()}})


@routes.get("/courier/health", access=STATUS, stranger=states)
async def health(request: web.Request) -> web.Response:
    return json_response(request.app[COURIER].health_report())
