"""GET /courier/sessions[?limit=N]: per user, chats with a session, jobs by status, last activity."""

from __future__ import annotations

import dataclasses

from aiohttp import web

from ..runtime import COURIER
from ..store import sessions
from .access import STATUS, Routes
from .api import json_response, query_int, store_of

routes = Routes()


@routes.get("/courier/sessions", access=STATUS)
async def session_summaries(request: web.Request) -> web.Response:
    limit = query_int(request, "limit", default=100, minimum=1, maximum=1000)
    users = await sessions.session_summaries(store_of(request.app[COURIER]).pool, limit=limit)
    return json_response({"users": [dataclasses.asdict(user) for user in users]})
