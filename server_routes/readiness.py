"""``GET /courier/readiness``: which commands are ready on which backend, and what the others lack.

For each backend this host serves, each command's model files (``jobs/readiness.py``) against the
models its last health check recorded; a command not ready there lists the files it misses, each
with its folder and, for a shipped command's file, where to download it. ``ready`` is null for a
backend not checked yet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping

from aiohttp import web

from ..jobs.backends import shown_url
from ..jobs.readiness import ModelFile, known_models, needed_files, readiness
from ..runtime import COURIER
from ..store import backends as backend_table
from ..store import commands
from .access import STATUS, Routes
from .api import json_response, store_of

routes = Routes()


@routes.get("/courier/readiness", access=STATUS)
async def command_readiness(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    pool = store_of(courier).pool
    offered = await backend_offers(pool, courier.backends())
    listed = []
    for command in await commands.list_commands(pool):
        needed = needed_files(command.workflow)
        listed.append({"name": command.name, "enabled": command.enabled,
                       "files": [dataclasses.asdict(file) for file in needed],
                       "backends": per_backend(needed, offered)})
    return json_response({"backends": [shown_url(url) for url in offered], "commands": listed})


async def backend_offers(pool, urls: Iterable[str]) -> dict[str, Collection[str] | None]:
    """Each backend's model files as its last health check recorded them (None: not checked yet)."""
    urls = [url.rstrip("/") for url in urls]  # as the dispatcher registers them
    rows = {row.url: row for row in await backend_table.list_backends(pool, urls)}
    return {url: known_models(rows[url]) if url in rows else None for url in urls}


def per_backend(needed: list[ModelFile], offered: Mapping[str, Collection[str] | None]) -> list[dict]:
    """``needed`` on each backend of ``offered``: ``{url, ready, missing}``, the url without credentials."""
    return [{"url": shown_url(url), **dataclasses.asdict(readiness(needed, models))} for url, models in offered.items()]
