"""The Host and Origin checks ComfyUI lacks, for every route of this ComfyUI (``/ws`` included).

ComfyUI compares a browser's ``Origin`` with the ``Host`` only when the Host resolves to loopback,
and Python's ``ipaddress`` does not call ``0.0.0.0``, ``::`` or ``::ffff:127.0.0.1`` loopback
although they reach this machine; it also lets ``Origin: null`` through. So a page of any site
could queue prompts and listen on ``/ws`` through those addresses, a LAN address or a sandboxed
frame. This middleware, first on ComfyUI's app, lets a request through only when:

- its Host names this machine: loopback (``localhost``), an IP address (no rebinding without a
  name), a name listed in ``COURIER_ALLOWED_HOSTS`` (a LAN name), or a ``.anon`` name while this
  host runs the hidden service (the gateway forwards its clients' Host); else 403
  ``host_not_allowed`` (DNS rebinding), a missing Host included;
- and, when it carries an ``Origin``, that origin is the page's own for that Host: the scheme
  this server speaks, the Host's name (addresses compared as addresses) and port (the scheme's
  default when one omits it), under every Host; else 403 ``origin_not_allowed``. The editor and
  the Courier panel are pages of this server, so their origin matches; programs (the bot, the
  gateway, curl) send none. ``null`` (a sandboxed frame, a ``data:`` or ``file:`` page, a redirect
  across sites) is never a page of this server, and anyone can make one: refused. The one exception
  is the origin an operator names with ComfyUI's ``--enable-cors-header ORIGIN`` (a frontend served
  elsewhere); its bare form (``*``, every site) opens nothing here, and the log says so.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import SplitResult, urlsplit

from aiohttp import web

from ..core.logs import get_logger
from .access import host_name
from .api import ApiError

log = get_logger("routes")

DEFAULT_PORTS = {"http": 80, "https": 443}


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


def origin_matches(origin: str, host: str, scheme: str) -> bool:
    """Whether ``origin`` (an ``Origin`` header) is the origin of a page at ``host`` over ``scheme``."""
    try:
        page, served = urlsplit(origin), urlsplit(f"{scheme}://{host}")
        ports = (page.port or DEFAULT_PORTS.get(page.scheme), served.port or DEFAULT_PORTS.get(scheme))
    except ValueError:  # a port out of range, an unclosed bracket
        return False
    return (page.scheme == scheme and _bare(page) and _bare(served) and ports[0] == ports[1]
            and _same_name(page.hostname, served.hostname))


def _bare(url: SplitResult) -> bool:
    """An origin has a scheme, a name and perhaps a port: nothing else."""
    return bool(url.hostname) and not (url.username or url.password or url.path or url.query or url.fragment)


def _same_name(one: str, other: str) -> bool:
    try:
        return ipaddress.ip_address(one) == ipaddress.ip_address(other)
    except ValueError:
        return one == other  # urlsplit gives names lower case


def host_guard(settings, cors_origin: str | None = None) -> web.middleware:
    """The middleware for ``settings`` (None when they failed to load: loopback names and addresses only);
    ``cors_origin`` is ComfyUI's ``--enable-cors-header`` value, an origin let in besides the server's own."""
    allowed = frozenset(settings.allowed_hosts) if settings is not None else frozenset()
    anon = settings is not None and settings.anyone_enabled
    if cors_origin == "*":
        log.warning("--enable-cors-header without an origin lets every site in to ComfyUI; Courier still refuses "
                    "pages of other origins: name the one to allow (--enable-cors-header https://app.example)")
    trusted = cors_origin.rstrip("/").lower() if cors_origin and cors_origin != "*" else None

    @web.middleware
    async def guard(request: web.Request, handler):
        host = request.headers.get("Host")
        if not host_allowed(host, allowed, anon):
            log.warning("refused %s %s for Host %r (not this machine's name; see COURIER_ALLOWED_HOSTS)",
                        request.method, request.path, (host or "")[:80])
            return ApiError(403, "host_not_allowed",
                            f"this ComfyUI does not answer to the name {(host or '')[:80]!r}; add it to "
                            "COURIER_ALLOWED_HOSTS to allow it (browsers on a page under a foreign name are "
                            "refused against DNS rebinding)").response()
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() != trusted and not origin_matches(origin, host, request.scheme):
            log.warning("refused %s %s: Origin %r is not this server's (Host %r)",
                        request.method, request.path, origin[:80], host[:80])
            return ApiError(403, "origin_not_allowed",
                            f"a page of {origin[:80]!r} may not call this ComfyUI at {host[:80]!r}: only its own "
                            "pages (whose Origin is this server's scheme, name and port) and programs without an "
                            "Origin header may").response()
        return await handler(request)

    return guard
