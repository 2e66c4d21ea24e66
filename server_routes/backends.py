"""The ComfyUI servers jobs run on: ``GET /courier/backends`` asks each for /system_stats now and
adds its row of the backends table; ``PATCH /courier/backends/{id}`` drains or undrains one, or
sets its capacity.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

from aiohttp import web

from ..jobs.backends import shown_error, shown_url
from ..jobs.errors import ComfyError
from ..runtime import COURIER, Courier
from ..store import backends as table
from .access import ADMIN, STATUS, Routes, is_loopback_host
from .api import ApiError, Field, check_body, json_response, read_json, store_of

routes = Routes()

PROBE_TIMEOUT_S = 5.0
MAX_CAPACITY = 64
PATCH_BODY = {"draining": Field(bool), "capacity": Field(int)}
ROW_FIELDS = ("id", "capacity", "healthy", "draining", "running", "models", "checked_at", "last_seen_at",
              "last_error")  # errors are stored with the URL shown as shown_url does


@routes.get("/courier/backends", access=STATUS)
async def backends(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    entries = await probe_backends(courier)
    if courier.store is not None:  # the dispatcher registers each backend as its client's base_url
        urls = [url.rstrip("/") for url in courier.backends()]
        rows = {row.url: row for row in await table.list_backends(courier.store.pool, urls)}
        for url, entry in zip(urls, entries, strict=True):
            entry["state"] = _row(rows[url]) if url in rows else None
    return json_response({"backends": entries})


@routes.patch("/courier/backends/{id:[0-9]{1,18}}", access=ADMIN)
async def change_backend(request: web.Request) -> web.Response:
    """Drain (``{"draining": true}``: it finishes what it runs, takes nothing new), undrain, or set
    ``capacity`` (prompts each host keeps on it at once; dispatchers read it when they start)."""
    body = check_body(await read_json(request), PATCH_BODY)
    if not body:
        raise ApiError(400, "bad_body", "send 'draining' or 'capacity'")
    capacity = body.get("capacity")
    if capacity is not None and not 1 <= capacity <= MAX_CAPACITY:
        raise ApiError(400, "bad_body", f"'capacity' must be between 1 and {MAX_CAPACITY}")
    pool = store_of(request.app[COURIER]).pool
    backend_id = int(request.match_info["id"])
    if await table.set_backend(pool, backend_id, draining=body.get("draining"), capacity=capacity) is None:
        raise ApiError(404, "no_such_backend", f"there is no backend {backend_id}")
    (row,) = [row for row in await table.list_backends(pool) if row.id == backend_id]
    return json_response({"backend": {"url": shown_url(row.url), **_row(row)}})


def _row(row: table.Backend) -> dict:
    return {name: getattr(row, name) for name in ROW_FIELDS}


async def probe_backends(courier: Courier) -> list[dict]:
    """``[{url, kind, reachable, comfyui_version, devices, error}]`` through the dispatcher's clients.

    Without a running dispatcher nothing is asked (``reachable`` is null and ``error`` says why).
    """
    if courier.dispatcher is None:
        reason = courier.health.report()["dispatcher"]["reason"]
        return [_entry(url, None, f"not checked: the dispatcher is not running ({reason})")
                for url in courier.backends()]
    return list(await asyncio.gather(*(_probe(client) for client in courier.dispatcher.clients)))


async def _probe(client) -> dict:
    try:
        stats = await asyncio.wait_for(client.system_stats(), PROBE_TIMEOUT_S)
    except asyncio.TimeoutError:
        return _entry(client.base_url, False, f"no answer within {PROBE_TIMEOUT_S:.0f} s")
    except ComfyError as exc:
        return _entry(client.base_url, False, str(exc))
    return {**_entry(client.base_url, True, None), "comfyui_version": stats.comfyui_version,
            "devices": [{"name": d.name, "type": d.type, "vram_total": d.vram_total, "vram_free": d.vram_free}
                        for d in stats.devices]}


def _entry(url: str, reachable: bool | None, error: str | None) -> dict:
    """The URL is shown without credentials (``http://user:pass@host``), in errors too."""
    host = urlsplit(url).hostname or ""
    if host.endswith(".anon"):
        kind = "anon"
    elif is_loopback_host(host):
        kind = "loopback"
    else:
        kind = "remote"
    return {"url": shown_url(url), "kind": kind, "reachable": reachable, "comfyui_version": None, "devices": [],
            "error": shown_error(url, error)}
