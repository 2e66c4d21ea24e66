"""How the bot reaches ComfyUI backends (and, optionally, Telegram): the client side.

* ``http://<56 chars>.anon`` goes through the Anyone SOCKS port with the name
  resolved by anon (socks5h): no local DNS lookup ever sees an ``.anon`` name.
* Loopback (127.0.0.0/8, ::1, localhost) is always direct.
* Anything else is direct, unless private mode is on: then it is refused with
  ``PrivateModeViolation`` rather than sent in clear through an exit.

``.anyone`` and ``.onion`` names are refused: the pinned anon 0.4.9.x knows only
the ``.anon`` suffix and would treat them as clearnet names, sending them to an
exit relay for DNS resolution (where they leak, and hang).

One connector per backend, kept for the backend's lifetime: connections are
kept alive, so requests ride one circuit instead of building a new one each
time. Each connector has its own random SOCKS credentials, which anon
(IsolateSOCKSAuth) maps to its own circuits, and takes new ones after a failed
connect, so simply retrying the request gets fresh circuits.
"""

from __future__ import annotations

import ipaddress
import secrets
from urllib.parse import urlsplit

import aiohttp
import aiohttp_socks
from aiohttp_socks import ProxyConnector, ProxyType

from .errors import (
    AnyoneError,
    AnyoneUnavailable,
    OnionConnectError,
    PrivateModeViolation,
    UnsupportedAddress,
)

KEEPALIVE_S = 60.0  # below aiohttp's server default of 75 s, so the server never closes first
ONION_CONNECT_S = 30.0  # a first connection fetches the descriptor and builds a rendezvous
DIRECT_CONNECT_S = 10.0
READ_S = 300.0

# SOCKS5 replies anon sends with ExtendedErrors (tor's proposal 304)
ONION_ERRORS = {
    0xF0: "onion service descriptor not found (wrong address, or the service is offline)",
    0xF1: "onion service descriptor is invalid",
    0xF2: "introduction to the onion service failed",
    0xF3: "rendezvous with the onion service failed",
    0xF4: "the onion service requires client authorization and we have no key for it",
    0xF5: "the onion service rejected our client authorization key",
    0xF6: "invalid onion address",
    0xF7: "introduction to the onion service timed out",
}


def host_kind(host: str) -> str:
    """``"anon"``, ``"loopback"`` or ``"remote"``; raises UnsupportedAddress for .anyone/.onion."""
    host = (host or "").lower().rstrip(".").strip("[]")
    if host.endswith(".anon"):
        return "anon"
    if host.endswith((".anyone", ".onion")):
        raise UnsupportedAddress(
            f"{host}: this anon (0.4.9.x) resolves only .anon hidden-service addresses; "
            "use the service's .anon address")
    if host == "localhost" or host.endswith(".localhost"):
        return "loopback"
    try:
        return "loopback" if ipaddress.ip_address(host).is_loopback else "remote"
    except ValueError:
        return "remote"


def socks_endpoint(socks_url: str) -> tuple[str, int]:
    """(host, port) of a ``socks5://`` or ``socks5h://`` URL (both resolve names remotely here)."""
    parts = urlsplit(socks_url)
    if parts.scheme not in ("socks5", "socks5h") or not parts.hostname or not parts.port:
        raise AnyoneError(f"not a SOCKS5 URL (socks5h://host:port): {socks_url!r}")
    return parts.hostname, parts.port


def _refuse_if_outside(host: str, private_mode: bool) -> None:
    kind = host_kind(host)
    if kind == "anon":
        raise AnyoneUnavailable(f"{host}: .anon addresses are reachable only through the Anyone SOCKS port")
    if kind == "remote" and private_mode:
        raise PrivateModeViolation(
            f"private mode: refusing a direct connection to {host}; backends must be "
            "loopback or .anon hidden services")


class DirectConnector(aiohttp.TCPConnector):
    """TCPConnector that checks every destination, redirects included, before connecting."""

    def __init__(self, *, private_mode: bool, **kwargs):
        super().__init__(**kwargs)
        self.private_mode = private_mode

    async def connect(self, req, traces, timeout):
        _refuse_if_outside(req.url.host, self.private_mode)
        return await super().connect(req, traces, timeout)


class OnionConnector(ProxyConnector):
    """ProxyConnector for ``.anon`` hosts only (a redirect elsewhere is refused, not sent to an exit).

    A failed or timed-out connect switches to fresh SOCKS credentials, so the next attempt
    gets fresh circuits instead of a stuck one (an outdated descriptor after the service
    restarted, a rendezvous that never completes); kept-alive connections stay as they are.
    Failures raise ``OnionConnectError`` (an aiohttp.ClientConnectionError) with a readable
    reason instead of aiohttp_socks' bare Exception subclasses.
    """

    async def connect(self, req, traces, timeout):
        if host_kind(req.url.host) != "anon":
            raise AnyoneError(f"refusing {req.url.host}: this connection is for .anon hidden services only")
        try:
            return await super().connect(req, traces, timeout)
        except aiohttp_socks.ProxyConnectionError as exc:
            raise OnionConnectError(f"Anyone SOCKS port {self._proxy_host}:{self._proxy_port} "
                                    f"unreachable (is anon running?): {exc}") from exc
        except (aiohttp_socks.ProxyError, aiohttp_socks.ProxyTimeoutError) as exc:
            self._proxy_username = secrets.token_hex(8)
            raise OnionConnectError(f"{req.url.host}: {describe_proxy_error(exc)}",
                                    getattr(exc, "error_code", None)) from exc


def make_connector(url: str, settings, socks_url: str | None = None, **kwargs) -> aiohttp.BaseConnector:
    """The connector for one backend ``url``; keep it (and its session) for that backend.

    ``socks_url``: the Anyone SOCKS port (``AnyoneService.socks_url``); defaults to
    the ``anyone_socks_url`` setting. Extra ``kwargs`` go to the connector.
    """
    host = urlsplit(url).hostname or ""
    kwargs.setdefault("keepalive_timeout", KEEPALIVE_S)
    if host_kind(host) == "anon":
        proxy = socks_url or settings.anyone_socks_url
        if not proxy:
            raise AnyoneUnavailable(f"{url} is an .anon address but no Anyone SOCKS port is known: "
                                    "set COURIER_ANYONE=1 or COURIER_ANYONE_SOCKS")
        proxy_host, proxy_port = socks_endpoint(proxy)
        return OnionConnector(proxy_type=ProxyType.SOCKS5, host=proxy_host, port=proxy_port, rdns=True,
                              username=secrets.token_hex(8), password=secrets.token_hex(8), **kwargs)
    _refuse_if_outside(host, settings.private_mode)
    return DirectConnector(private_mode=settings.private_mode, **kwargs)


def client_timeout(url: str) -> aiohttp.ClientTimeout:
    """Timeouts for one backend: generous connect through Anyone, no cap on a whole request."""
    onion = host_kind(urlsplit(url).hostname or "") == "anon"
    connect = ONION_CONNECT_S if onion else DIRECT_CONNECT_S
    return aiohttp.ClientTimeout(total=None, sock_connect=connect, connect=connect, sock_read=READ_S)


def make_session(url: str, settings, socks_url: str | None = None, **kwargs) -> aiohttp.ClientSession:
    """A ClientSession for one backend (its own connector and timeouts); close it when done."""
    return aiohttp.ClientSession(connector=make_connector(url, settings, socks_url),
                                 timeout=client_timeout(url), **kwargs)


def describe_proxy_error(exc: BaseException) -> str:
    """A readable reason for a failed SOCKS connect, naming the onion-service cause if anon gave one."""
    code = getattr(exc, "error_code", None)
    if code is None:  # python-socks reports unknown reply codes only in the text
        text = str(exc)
        for candidate in ONION_ERRORS:
            if f"{candidate:#02X}" in text.upper():
                code = candidate
    return ONION_ERRORS.get(code, str(exc) or type(exc).__name__)


def telegram_proxy_url(settings, socks_url: str | None = None) -> str | None:
    """The proxy for python-telegram-bot when ``proxy_telegram`` is on, else None.

    Use as ``ApplicationBuilder().proxy(url).get_updates_proxy(url)``. httpx needs
    ``python-telegram-bot[socks]`` (socksio) for SOCKS. Random credentials give the
    bot's Telegram traffic circuits of its own.
    """
    if not settings.proxy_telegram:
        return None
    proxy = socks_url or settings.anyone_socks_url
    if not proxy:
        raise AnyoneUnavailable("proxy_telegram is on but no Anyone SOCKS port is known: "
                                "set COURIER_ANYONE=1 or COURIER_ANYONE_SOCKS")
    try:
        import socksio  # noqa: F401  (httpx's SOCKS support)
    except ImportError:
        raise AnyoneError('proxy_telegram needs SOCKS support in httpx: '
                          'pip install "python-telegram-bot[socks]"') from None
    host, port = socks_endpoint(proxy)
    return f"socks5h://{secrets.token_hex(8)}:{secrets.token_hex(8)}@{host}:{port}"
