"""Connections to PostgreSQL: the asyncpg pool and single connections, with our JSON codecs."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import asyncpg

from .errors import DatabaseUnavailable

CONNECT_TIMEOUT_S = 10.0
_SERVER_SETTINGS = {"application_name": "comfyui-courier"}


async def create_pool(dsn: str, *, min_size: int = 1, max_size: int = 10) -> asyncpg.Pool:
    """An asyncpg pool on ``dsn``; raises DatabaseUnavailable if it cannot connect."""
    try:
        return await asyncpg.create_pool(dsn, min_size=min_size, max_size=max_size, init=_init, reset=_keep_session,
                                         timeout=CONNECT_TIMEOUT_S, server_settings=_SERVER_SETTINGS)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError, asyncio.TimeoutError) as exc:
        raise _unavailable(dsn, exc) from exc


async def connect(dsn: str) -> asyncpg.Connection:
    """One connection outside the pool (e.g. for LISTEN); raises DatabaseUnavailable."""
    try:
        conn = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_S, server_settings=_SERVER_SETTINGS)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError, asyncio.TimeoutError) as exc:
        raise _unavailable(dsn, exc) from exc
    await _init(conn)
    return conn


async def _keep_session(conn: asyncpg.Connection) -> None:
    """A connection goes back to the pool without asyncpg's reset query (UNLISTEN, RESET ALL...),
    one round trip less per use: pooled connections keep no session state (LISTEN has a
    connection of its own, locks last a transaction). asyncpg still rolls back a transaction
    left open and drops listener callbacks."""


async def _init(conn: asyncpg.Connection) -> None:
    """json/jsonb travel as Python objects."""
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(typename, schema="pg_catalog", encoder=json.dumps, decoder=json.loads)


def redact(url: str) -> str:
    """``url`` with its password (in the user part or the query) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query)
        password = parts.password
    except ValueError:
        return "<unparsable database URL>"
    netloc = parts.netloc
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    if any(k == "password" for k, _ in query):
        hidden = [(k, "***" if k == "password" else v) for k, v in query]
        parts = parts._replace(query=urlencode(hidden, safe="*/"))
    return urlunsplit(parts._replace(netloc=netloc))


def _unavailable(dsn: str, exc: BaseException) -> DatabaseUnavailable:
    shown = redact(dsn)
    if shown.startswith("<"):
        return DatabaseUnavailable(f"cannot reach PostgreSQL: {shown} ({type(exc).__name__})")
    reason = f"{type(exc).__name__}: {exc}"
    parts = urlsplit(dsn)
    for secret in [parts.password or "", *(v for k, v in parse_qsl(parts.query) if k == "password")]:
        for form in {secret, unquote(secret)} - {""}:
            reason = reason.replace(form, "***")
    return DatabaseUnavailable(f"cannot reach PostgreSQL at {shown} ({reason})")
