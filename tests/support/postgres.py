"""PostgreSQL addresses for tests: another database on a server the fixtures started."""

from __future__ import annotations

from urllib.parse import quote


def dsn_for(server, database: str) -> str:
    """The DSN for ``database`` on ``server`` (an ``EmbeddedServer``, whose DSN names ``postgres``)."""
    return server.dsn.replace("/postgres?", f"/{quote(database)}?", 1)
