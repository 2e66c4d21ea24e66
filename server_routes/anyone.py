"""GET /courier/anyone (JSON) and /courier/anyone/qr.png: this server's hidden-service address.

Both name the ``.anon`` address and how the service is set up (client authorization, what it
exposes), so they follow the full health report's rule (``STATUS``): a browser on this machine or
the admin token; a stranger learns the service's state from ``/courier/health`` only.
"""

from __future__ import annotations

from aiohttp import web

from ..runtime import COURIER
from .access import STATUS, Routes
from .api import ApiError, json_response

routes = Routes()


def _address(request: web.Request) -> str | None:
    anyone = request.app[COURIER].anyone
    return anyone.onion_address if anyone is not None else None


@routes.get("/courier/anyone", access=STATUS)
async def anyone_status(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    report = courier.health.report()["anyone"]
    address = _address(request)
    return json_response({**report, "onion_address": address, "url": f"http://{address}/" if address else None})


@routes.get("/courier/anyone/qr.png", access=STATUS)
async def anyone_qr(request: web.Request) -> web.Response:
    address = _address(request)
    if address is None:
        raise ApiError(404, "no_address", "this server is not published as a hidden service")
    from ..anyone.hidden_service import qr_png  # here: anon's controller library loads only when used

    return web.Response(body=qr_png(address), content_type="image/png",
                        headers={"Cache-Control": "no-store"})
