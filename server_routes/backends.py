"""GET /courier/backends: the ComfyUI servers jobs run on, each asked for /system_stats now."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

from aiohttp import web

from ..jobs.comfy_client import ComfyError
from ..runtime import COURIER, Courier
from .api import STATUS, is_loopback_host, endpoint, json_response

routes = web.RouteTableDef()

PROBE_TIMEOUT_S = 5.0


@routes.get("/courier/backends")
@endpoint(STATUS)
async def backends(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    return json_response({"backends": await probe_backends(courier)})


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
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    shown = urlunsplit(parts._replace(netloc=netloc))
    if host.endswith(".anon"):
        kind = "anon"
    else:
        kind = "loopback" if is_loopback_host(host) else "remote"
    return {"url": shown, "kind": kind, "reachable": reachable, "comfyui_version": None, "devices": [],
            "error": error.replace(url.rstrip("/"), shown.rstrip("/")) if error else None}
