"""The Anyone network: anon supervision, ComfyUI as a hidden service, SOCKS transport to backends.

Host side: ``AnyoneService(settings, data_dir, local_backend, health)`` with
``await start()`` / ``await stop()``, ``.health()``, ``.onion_address``, ``.socks_url``.
Client side: ``make_connector(url, settings, socks_url)`` (or ``make_session``).
"""

from .errors import (
    AnyoneError,
    AnyoneUnavailable,
    ClientAuthError,
    OnionConnectError,
    PrivateModeViolation,
    UnsupportedAddress,
)
from .hidden_service import (
    exposure_warning,
    generate_client_auth,
    qr_png,
    write_client_credential,
)
from .service import AnyoneService
from .transport import (
    client_timeout,
    describe_proxy_error,
    host_kind,
    make_connector,
    make_session,
    telegram_proxy_url,
)

__all__ = [
    "AnyoneError", "AnyoneService", "AnyoneUnavailable", "ClientAuthError", "OnionConnectError",
    "PrivateModeViolation", "UnsupportedAddress", "client_timeout", "describe_proxy_error",
    "exposure_warning", "generate_client_auth", "host_kind", "make_connector", "make_session", "qr_png",
    "telegram_proxy_url", "write_client_credential",
]
