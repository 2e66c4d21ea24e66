"""The Host check ComfyUI lacks: against DNS rebinding, for every route of this ComfyUI.

A web page whose name resolves to 127.0.0.1 reaches ComfyUI with its own name in Host and
Origin, so ComfyUI's origin check passes it. This middleware, first on ComfyUI's app, lets a
request through only when its Host names loopback (``localhost``), is an IP address (no
rebinding without a name), is listed in ``COURIER_ALLOWED_HOSTS`` (a LAN name), or is a
``.anon`` name while this host runs the hidden service (the gateway forwards its clients' Host).
Anything else, a missing Host included, gets 403.
"""

from __future__ import annotations

import ipaddress

from aiohttp import web

from ..logs import get_logger
from .api import ApiError, host_name

log = get_logger("routes")


def host_allowed(host: str | None, allowed: frozenset[str], anon: bool) -> bool:
    if not host:
        return False
    name = host_name(host).lower().rstrip(".")
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    return name == "localhost" or name in allowed or (anon and name.endswith(".anon"))


def host_guard(settings) -> web.middleware:
    """The middleware for ``settings`` (None when they failed to load: loopback names and addresses only)."""
    allowed = frozenset(settings.allowed_hosts) if settings is not None else frozenset()
    anon = settings is not None and settings.anyone_enabled

    @web.middleware
    async def guard(request: web.Request, handler):
        host = request.headers.get("Host")
        if host_allowed(host, allowed, anon):
            return await handler(request)
        log.warning("refused %s %s for Host %r (not this machine's name; see COURIER_ALLOWED_HOSTS)",
                    request.method, request.path, (host or "")[:80])
        return ApiError(403, "host_not_allowed",
                        f"this ComfyUI does not answer to the name {(host or '')[:80]!r}; add it to "
                        "COURIER_ALLOWED_HOSTS to allow it (browsers on a page under a foreign name are "
                        "refused against DNS rebinding)").response()

    return guard
