"""Exceptions of the anyone package, one tree::

    AnyoneError
    ├── PrivateModeViolation   a direct connection to a non-loopback host in private mode
    ├── AnyoneUnavailable      an .anon URL (or proxy_telegram) but no Anyone SOCKS port
    ├── UnsupportedAddress     .anyone/.onion: our anon would send the name to an exit
    ├── OnionConnectError      connecting through the SOCKS port failed (also an aiohttp.ClientConnectionError)
    ├── ClientAuthError        client authorization misconfigured
    ├── AnonStartError         anon did not come up far enough to be controlled
    └── PrivateNetworkError    the private test network did not come up
"""

import aiohttp


class AnyoneError(Exception):
    """Base of the anyone package's errors."""


class PrivateModeViolation(AnyoneError):
    """Private mode is on and a connection would leave this host outside the Anyone network."""


class AnyoneUnavailable(AnyoneError):
    """Traffic must go through Anyone but no SOCKS port is known."""


class UnsupportedAddress(AnyoneError):
    """A hidden-service name our pinned anon does not resolve (it would leak to an exit)."""


class OnionConnectError(AnyoneError, aiohttp.ClientConnectionError):
    """A connection through the Anyone SOCKS port failed; ``error_code`` is anon's SOCKS reply."""

    def __init__(self, message: str, error_code: int | None = None):
        super().__init__(message)
        self.error_code = error_code


class ClientAuthError(AnyoneError, ValueError):
    """Client authorization is misconfigured; the message says how to fix it."""


class AnonStartError(AnyoneError):
    """anon did not come up far enough to be controlled."""


class PrivateNetworkError(AnyoneError):
    """The private test network did not come up; the message names the log files."""
