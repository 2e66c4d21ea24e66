"""GET /courier/anyone (JSON) and /courier/anyone/qr.png: this server's hidden-service address."""

from __future__ import annotations

from aiohttp import web

from ..runtime import COURIER

routes = web.RouteTableDef()


def _address(request: web.Request) -> str | None:
    anyone = request.app[COURIER].anyone
    return anyone.onion_address if anyone is not None else None


@routes.get("/courier/anyone")
async def anyone_status(request: web.Request) -> web.Response:
    courier = request.app[COURIER]
    report = courier.health.report()["anyone"]
    address = _address(request)
    return web.json_response({**report, "onion_address": address,
                              "url": f"http://{address}/" if address else None})


@routes.get("/courier/anyone/qr.png")
async def anyone_qr(request: web.Request) -> web.Response:
    address = _address(request)
    if address is None:
        return web.json_response({"error": {"code": "no_address",
                                             "message": "this server is not published as a hidden service"}},
                                 status=404)
    from ..anyone.hidden_service import qr_png  # here: anon's controller library loads only when used

    return web.Response(body=qr_png(address), content_type="image/png",
                        headers={"Cache-Control": "no-store"})
