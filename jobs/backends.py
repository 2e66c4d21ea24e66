"""Health checks of the backends one dispatcher serves, recorded in the backends table.

Every ``INTERVAL_S`` each backend is asked ``/system_stats``; an unreachable one is marked
unhealthy, and the job claim (``store/sql/jobs.sql``: ``claim_job``) stops giving it jobs
until a check succeeds again. On recovery and every ``MODELS_REFRESH_S`` its ``/object_info``
is read too, for the model files its loaders offer (and their kinds, for /img and /models): a
job naming a model file goes only to a backend that has it. A backend that is not among this
dispatcher's and that no host has seen answer for ``STALE_S`` (a ComfyUI of an earlier run, long
gone) is marked down at each round: no host probes it, so it would otherwise look healthy for ever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..core.logs import get_logger
from ..store import StoreError, backends
from .comfy.client import ComfyClient
from .errors import ComfyError, is_model_file
from .model_names import choices, kinds

log = get_logger("backends")

INTERVAL_S = 5.0
TIMEOUT_S = 10.0
MODELS_REFRESH_S = 60.0
STALE_S = 600.0


def shown_url(url: str) -> str:
    """``url`` without credentials (``http://user:pass@host``), to show to admins."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def shown_error(url: str, error: str | None) -> str | None:
    """A backend's error with its URL shown as ``shown_url`` does."""
    return error.replace(url.rstrip("/"), shown_url(url).rstrip("/")) if error else None


def models_offered(object_info: Mapping[str, Any]) -> list[str]:
    """The model file names offered as choices of some node's input (a loader's ``ckpt_name``...)."""
    names = set()
    for schema in object_info.values():
        for section in (schema.get("input") or {}).values():  # required, optional, hidden
            for spec in section.values() if isinstance(section, dict) else ():
                names.update(o for o in choices(spec) if isinstance(o, str) and is_model_file(o))
    return sorted(names)


class HealthChecks:
    """Checks ``clients`` when asked (``check_all``); ``on_recovered()`` when one takes jobs again."""

    def __init__(self, pool, clients: list[ComfyClient], on_recovered: Callable[[], object]):
        self.pool = pool
        self.clients = clients
        self.on_recovered = on_recovered
        self._models_read_at: dict[str, float] = {}

    async def check_all(self) -> None:
        await asyncio.gather(*(self.check(client) for client in self.clients))
        try:
            for url in await backends.mark_stale(self.pool, [client.base_url for client in self.clients], STALE_S):
                log.info("backend %s marked down: no host serves it, and it has not answered for %.0f minutes",
                         shown_url(url), STALE_S / 60)
        except StoreError:
            log.exception("marking stale backends down failed")

    async def check(self, client: ComfyClient) -> None:
        url = client.base_url
        try:
            models, by_kind = await asyncio.wait_for(self._probe(client), TIMEOUT_S)
        except (ComfyError, asyncio.TimeoutError) as exc:
            await self.mark_down(url, str(exc) or f"no answer within {TIMEOUT_S:.0f} s")
            return
        try:
            if await backends.record_check(self.pool, url, models=models, kinds=by_kind):
                log.info("backend %s answers again", shown_url(url))
                self.on_recovered()
        except StoreError:
            log.exception("recording the health of %s failed", shown_url(url))

    async def mark_down(self, url: str, error: str) -> None:
        """Stop claims on ``url`` until a check succeeds (a worker calls this when a job lost it)."""
        self._models_read_at.pop(url, None)  # read them again once it is back
        try:
            await backends.record_check(self.pool, url, error=shown_error(url, error))
        except StoreError:
            log.exception("recording the health of %s failed", shown_url(url))

    async def _probe(self, client: ComfyClient) -> tuple[list[str] | None, dict[str, list[str]] | None]:
        """Ask the backend; its model list and the files by kind when due (None: keep the recorded ones)."""
        await client.system_stats()
        read_at = self._models_read_at.get(client.base_url)
        if read_at is not None and time.monotonic() - read_at < MODELS_REFRESH_S:
            return None, None
        info = await client.object_info()
        self._models_read_at[client.base_url] = time.monotonic()
        return models_offered(info), kinds(info)
