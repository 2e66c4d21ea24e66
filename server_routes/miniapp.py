"""GET /courier/miniapp/: the Mini App form's static files (``miniapp/``), for ``try`` and for an
operator with HTTPS in front of this server (``COURIER_MINIAPP_URL`` names where the page is).

``PUBLIC``: the same few files for everyone, holding nothing secret and calling nothing of ours (the
page's data is in its URL's fragment, which browsers do not send). Only the files named in ``FILES``
are served; a request names one of them, never a path.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from .access import PUBLIC, Routes
from .api import ApiError

routes = Routes()

MINIAPP_DIR = Path(__file__).resolve().parent.parent / "miniapp"
FILES = {"": "index.html", "index.html": "index.html", "app.js": "app.js", "app.css": "app.css"}
"""Request name -> file of ``MINIAPP_DIR``."""
HEADERS = {"Cache-Control": "no-cache", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"}


@routes.get("/courier/miniapp/{name:[^/]*}", access=PUBLIC)
async def miniapp_file(request: web.Request) -> web.StreamResponse:
    name = FILES.get(request.match_info["name"])
    if name is None:
        raise ApiError(404, "not_found", "no such file of the Mini App")
    return web.FileResponse(MINIAPP_DIR / name, headers=HEADERS)
