"""GET /courier/jobs[?user_id=N]: the live queue -- running jobs, then queued ones in claim order, per user."""

from __future__ import annotations

from aiohttp import web

from ..runtime import COURIER
from ..store import jobs
from .access import STATUS, Routes
from .api import json_response, query_int, store_of

routes = Routes()

BIGINT_MAX = 2**63 - 1
JOB_FIELDS = ("id", "user_id", "chat_id", "command", "status", "position", "attempts", "backend",
              "progress", "error", "created_at", "started_at",
              "starts_in_s")  # not params: they hold the users' prompts; starts_in_s: as the chat is told


@routes.get("/courier/jobs", access=STATUS)
async def queue(request: web.Request) -> web.Response:
    user_id = query_int(request, "user_id", minimum=-BIGINT_MAX, maximum=BIGINT_MAX)
    listed = await jobs.list_queue(store_of(request.app[COURIER]).pool, user_id=user_id)
    return json_response({"jobs": [{name: getattr(job, name) for name in JOB_FIELDS} for job in listed],
                          "users": per_user(listed)})


def per_user(listed: list[jobs.Job]) -> list[dict]:
    """``[{user_id, running, queued, next_position}]``, the user whose job comes first first."""
    users: dict[int, dict] = {}
    for job in listed:
        entry = users.setdefault(job.user_id, {"user_id": job.user_id, "running": 0, "queued": 0,
                                               "next_position": None})
        entry[job.status] += 1
        if job.position is not None and entry["next_position"] is None:
            entry["next_position"] = job.position
    return sorted(users.values(), key=lambda u: (u["running"] == 0, u["next_position"] or 0))
