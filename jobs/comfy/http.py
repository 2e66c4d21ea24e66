"""ComfyUI's REST verbs for one backend: one method per endpoint, typed arguments, parsed replies.

Every failure is a ``ComfyError`` (see ``jobs/errors.py``): a backend that cannot be
reached (or answers 502/503/504) is ``BackendUnavailable``, any other unexpected reply
``RequestFailed``. ``ws_connect`` opens the websocket through the same session;
``events.py`` reads it.
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp_socks import ProxyConnectionError, ProxyError, ProxyTimeoutError

from ...core.logs import get_logger
from ..errors import BackendUnavailable, PromptRejected, RequestFailed
from .records import HistoryEntry, QueueState, SystemStats

log = get_logger("backend")

UNREACHABLE = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, aiohttp.WSServerHandshakeError,
               asyncio.TimeoutError, OSError, ProxyError, ProxyConnectionError, ProxyTimeoutError)
"""What a request or a socket raises when the backend cannot be reached."""
WS_MAX_MSG_BYTES = 4 * 2**20  # aiohttp's default: a bigger frame closes the socket (1009)


class ComfyHttp:
    """One ComfyUI backend at ``base_url``, through one reused ``ClientSession``.

    ``connector`` (e.g. a SOCKS connector for ``.anon`` backends), or
    ``connector_factory`` to make it lazily inside the running loop, is owned by
    the client and closed by ``close()``. ``connect_timeout`` and ``read_timeout``
    bound each HTTP request; ``heartbeat`` pings the websocket to notice dead
    peers. ``headers`` go with every request and websocket (a hidden service's
    bot-host credential).
    """

    def __init__(self, base_url: str, *, connector: aiohttp.BaseConnector | None = None,
                 connector_factory: Callable[[], aiohttp.BaseConnector] | None = None,
                 connect_timeout: float = 60.0, read_timeout: float = 120.0, heartbeat: float = 30.0,
                 headers: Mapping[str, str] | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be http(s)://host:port, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        if connector is not None and connector_factory is not None:
            raise ValueError("pass connector or connector_factory, not both")
        self._connector = connector
        self._connector_factory = connector_factory
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
        self._heartbeat = heartbeat
        self._headers = dict(headers or {})
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        """Close the session and its connector."""
        if self._session is not None:
            await self._session.close()
        elif self._connector is not None:
            await self._connector.close()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            if self._connector is None and self._connector_factory is not None:
                self._connector = self._connector_factory()
            self._session = aiohttp.ClientSession(connector=self._connector, timeout=self._timeout,
                                                  headers=self._headers)
        return self._session

    def _unreachable(self, what: str, exc: BaseException | str) -> BackendUnavailable:
        reason = exc if isinstance(exc, str) else (str(exc) or type(exc).__name__)
        return BackendUnavailable(f"ComfyUI at {self.base_url} is not reachable ({what}): {reason}")

    async def _request(self, method: str, path: str, **kwargs: Any) -> tuple[int, bytes]:
        try:
            async with self._http().request(method, self.base_url + path, **kwargs) as resp:
                body = await resp.read()
        except UNREACHABLE as exc:
            raise self._unreachable(f"{method} {path}", exc) from exc
        if resp.status in (502, 503, 504):
            raise self._unreachable(f"{method} {path}", f"HTTP {resp.status}")
        return resp.status, body

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        status, body = await self._request(method, path, **kwargs)
        if status != 200:
            raise RequestFailed(f"{method} {path}: HTTP {status}", status, body[:500].decode(errors="replace"))
        try:
            return json.loads(body)
        except ValueError:
            raise RequestFailed(f"{method} {path}: reply is not JSON", status,
                                body[:500].decode(errors="replace")) from None

    async def _post(self, path: str, body: Mapping[str, Any]) -> None:
        status, reply = await self._request("POST", path, json=body)
        if status != 200:
            raise RequestFailed(f"POST {path}: HTTP {status}", status, reply[:500].decode(errors="replace"))

    # --- endpoints ---------------------------------------------------------------

    async def upload_image(self, data: bytes, filename: str, subfolder: str = "courier",
                           overwrite: bool = True) -> str:
        """``POST /upload/image`` into the input folder; returns the LoadImage name ``subfolder/name``."""
        if not filename or "/" in filename or "\\" in filename:
            raise ValueError(f"filename must be a plain file name, got {filename!r}")
        form = aiohttp.FormData()
        form.add_field("image", data, filename=filename,
                       content_type=mimetypes.guess_type(filename)[0] or "application/octet-stream")
        form.add_field("type", "input")
        form.add_field("subfolder", subfolder)
        form.add_field("overwrite", "true" if overwrite else "false")
        reply = await self._json("POST", "/upload/image", data=form)
        return f"{reply['subfolder']}/{reply['name']}" if reply.get("subfolder") else reply["name"]

    async def delete_files(self, files: list[Mapping[str, str]], prompt_ids: list[str]) -> dict:
        """``POST /courier/files/delete``, Courier's route on the backend: delete Courier's files there
        (``[{filename, subfolder, type}]``) and these prompts' history entries. Returns the counts
        ``{deleted, missing, refused, failed}``."""
        return await self._json("POST", "/courier/files/delete", json={"files": files, "prompt_ids": prompt_ids})

    async def queue_prompt(self, workflow: Mapping[str, Any], client_id: str, prompt_id: str | None = None) -> str:
        """``POST /prompt``; returns the prompt_id.

        :raises ValueError: ``workflow`` is not an API-format workflow
        :raises PromptRejected: ComfyUI refused it (validation errors)
        """
        if not isinstance(workflow, Mapping) or not workflow:
            raise ValueError("workflow must be a non-empty API-format dict {node_id: {class_type, inputs}}")
        if "nodes" in workflow and "links" in workflow:
            raise ValueError("this is a UI-format workflow; export it with 'Export (API)'")
        body = {"prompt": workflow, "client_id": client_id, "prompt_id": prompt_id or str(uuid.uuid4())}
        status, raw = await self._request("POST", "/prompt", json=body)
        try:
            reply = json.loads(raw)
        except ValueError:
            reply = None
        if status == 400 and isinstance(reply, dict) and "error" in reply:
            raise PromptRejected(reply)
        if status != 200 or not isinstance(reply, dict) or "prompt_id" not in reply:
            raise RequestFailed(f"POST /prompt: HTTP {status}", status, raw[:500].decode(errors="replace"))
        if reply.get("node_errors"):  # some outputs failed validation; ComfyUI runs the others
            log.warning("prompt %s queued without its invalid outputs: %s", reply["prompt_id"], reply["node_errors"])
        return str(reply["prompt_id"])

    async def queue(self) -> QueueState:
        """``GET /queue``."""
        return QueueState.parse(await self._json("GET", "/queue"))

    async def delete_queued(self, *prompt_ids: str) -> None:
        """``POST /queue {"delete": [...]}``: drop pending prompts (running ones are not touched)."""
        await self._post("/queue", {"delete": list(prompt_ids)})

    async def interrupt(self, prompt_id: str | None = None) -> None:
        """``POST /interrupt``: stop the running prompt (only if it is ``prompt_id``, when given)."""
        await self._post("/interrupt", {"prompt_id": prompt_id} if prompt_id else {})

    async def cancel(self, prompt_id: str) -> None:
        """Drop ``prompt_id`` whether it waits or runs."""
        await self.delete_queued(prompt_id)
        await self.interrupt(prompt_id)

    async def history(self, prompt_id: str) -> HistoryEntry | None:
        """``GET /history/{prompt_id}``; None while it is unknown or unfinished."""
        reply = await self._json("GET", f"/history/{quote(prompt_id, safe='')}")
        entry = reply.get(prompt_id)
        return None if entry is None else HistoryEntry.parse(prompt_id, entry)

    async def view(self, filename: str, subfolder: str = "", type: str = "output") -> bytes:
        """``GET /view``: a file's bytes from the output, input or temp folder."""
        status, body = await self._request("GET", "/view", params={"filename": filename, "subfolder": subfolder,
                                                                   "type": type})
        if status != 200:
            raise RequestFailed(f"GET /view {type}/{subfolder}/{filename}: HTTP {status}", status)
        return body

    async def system_stats(self) -> SystemStats:
        """``GET /system_stats``."""
        return SystemStats.parse(await self._json("GET", "/system_stats"))

    async def object_info(self, node_class: str | None = None) -> dict[str, dict]:
        """``GET /object_info[/{class}]``: node schemas by class name ({} for an unknown class)."""
        path = "/object_info" + (f"/{quote(node_class, safe='')}" if node_class else "")
        return await self._json("GET", path)

    async def ws_connect(self, client_id: str) -> aiohttp.ClientWebSocketResponse:
        """Open ``/ws?clientId=``; ``events.EventStream.open`` reads it.

        :raises BackendUnavailable:
        """
        try:
            return await self._http().ws_connect(f"{self.base_url}/ws", params={"clientId": client_id},
                                                 heartbeat=self._heartbeat, max_msg_size=WS_MAX_MSG_BYTES)
        except UNREACHABLE as exc:
            raise self._unreachable("websocket", exc) from exc
