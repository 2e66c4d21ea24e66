"""ComfyUI's websocket for one client: its frames read, and routed to whoever follows each prompt.

ComfyUI sends a prompt's frames only to the socket of the client that queued it, so a
client keeps one ``client_id`` and one socket (``SharedSocket``) for all its prompts:
each run ``follow``s its prompt ids and gets their frames from a ``Follower``, routed
here by ``prompt_id``. A dropped socket is reopened while anyone follows; followers
are told with a ``Gap`` (frames may be lost: ask ``/queue`` and ``/history``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import aiohttp

from ...core.logs import get_logger
from ..errors import BackendUnavailable
from .http import UNREACHABLE, ComfyHttp
from .records import Event, Gap, Preview, QueueItem, parse_preview

log = get_logger("backend")


class EventStream:
    """An open ``/ws?clientId=`` socket; iterating yields ``Event`` and ``Preview`` until it closes."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self._ws = ws

    @classmethod
    async def open(cls, http: ComfyHttp, client_id: str) -> EventStream:
        """Open ``/ws?clientId=`` on ``http``'s backend; use as ``async with await EventStream.open(...)``.

        :raises BackendUnavailable:
        """
        return cls(await http.ws_connect(client_id))

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._ws.close()

    def __aiter__(self) -> AsyncIterator[Event | Preview]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Event | Preview]:
        async for msg in self._ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                frame = json.loads(msg.data)
                yield Event(str(frame.get("type", "")), frame.get("data") or {})
            elif msg.type == aiohttp.WSMsgType.BINARY:
                preview = parse_preview(msg.data)
                if preview is not None:
                    yield preview
            elif msg.type == aiohttp.WSMsgType.ERROR:
                return


_DROPPED = object()  # the reader's word to its followers that the socket went down


class Follower:
    """The frames of some prompts from the client's shared websocket; see ``SharedSocket.follow``."""

    def __init__(self, socket: SharedSocket, prompt_ids: tuple[str, ...], adopt: bool):
        self.client_id = socket.client_id
        self.prompt_ids = set(prompt_ids)
        self.adopt = adopt  # also takes frames of prompts nobody follows (those a Benchmark node queues)
        self._socket = socket
        self._frames: asyncio.Queue = asyncio.Queue()
        self._down = False

    def owns(self, item: QueueItem) -> bool:
        """Whether a queue item is this follower's: one of its prompts, or (adopting) one of the
        client's that no other follower has."""
        if item.client_id != self.client_id:
            return False
        return item.prompt_id in self.prompt_ids or self.adopt and not any(
            item.prompt_id in other.prompt_ids for other in self._socket.followers)

    async def next(self) -> Event | Preview | Gap:
        """The next frame; a ``Gap`` every ``poll_interval`` while the socket is down and once it is back."""
        while True:
            try:
                item = await asyncio.wait_for(self._frames.get(),
                                              self._socket.poll_interval if self._down else None)
            except asyncio.TimeoutError:
                return Gap(reconnected=False)
            if item is _DROPPED:
                self._down = True
                continue
            if isinstance(item, Gap):
                self._down = False
            return item


class SharedSocket:
    """A client's one websocket (``/ws?clientId=client_id`` on ``http``'s backend) and its followers.

    While the socket is down it is reopened with backoff, from ``poll_interval`` seconds
    up to eight times that; followers get a ``Gap`` every ``poll_interval`` meanwhile.
    """

    def __init__(self, http: ComfyHttp, client_id: str, poll_interval: float):
        self.client_id = client_id
        self.poll_interval = poll_interval
        self.followers: list[Follower] = []
        self._http = http
        self._stream: EventStream | None = None  # None while down
        self._reader: asyncio.Task | None = None  # routes its frames; runs while the socket is wanted
        self._opening = asyncio.Lock()
        self._executing: str | None = None  # the prompt running now, as the frames tell (for previews)

    async def close(self) -> None:
        """Stop reading and close the socket."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self._stream is not None:
            await self._stream.close()

    @contextlib.asynccontextmanager
    async def follow(self, *prompt_ids: str, adopt: bool = False) -> AsyncIterator[Follower]:
        """Follow ``prompt_ids`` (queue them with ``client_id``).

        The socket opens on first use (BackendUnavailable if it cannot) and stays open; a
        dropped one is reopened while anyone follows. Subscribe before queueing, so no frame
        is missed.
        """
        follower = Follower(self, prompt_ids, adopt)
        async with self._opening:
            if self._reader is None or self._reader.done():
                self._stream = await EventStream.open(self._http, self.client_id)
                self._reader = asyncio.create_task(self._read())
        follower._down = self._stream is None
        self.followers.append(follower)
        try:
            yield follower
        finally:
            self.followers.remove(follower)

    async def _read(self) -> None:
        """Route the socket's frames; reopen it when it drops while anyone follows."""
        while True:
            try:
                async for item in self._stream:
                    self._route(item)
            except (*UNREACHABLE, ValueError) as exc:
                log.info("websocket to %s failed: %s", self._http.base_url, exc)
            stream, self._stream, self._executing = self._stream, None, None
            await stream.close()
            if not self.followers:  # nobody waits: the next run opens it again
                self._reader = None
                return
            log.warning("websocket to %s dropped while %d prompt(s) ran", self._http.base_url, len(self.followers))
            for follower in self.followers:
                follower._frames.put_nowait(_DROPPED)
            if not await self._reopen():
                return
            for follower in self.followers:
                follower._frames.put_nowait(Gap(reconnected=True))

    async def _reopen(self) -> bool:
        """Open the socket again, with backoff; False (the reader ends) once nobody follows."""
        delay = self.poll_interval
        while self._stream is None:
            await asyncio.sleep(delay)
            if not self.followers:
                self._reader = None
                return False
            try:
                self._stream = await EventStream.open(self._http, self.client_id)
            except BackendUnavailable:
                delay = min(delay * 2, self.poll_interval * 8)
        return True

    def _route(self, item: Event | Preview) -> None:
        """Hand a frame to whoever follows its prompt: ``status`` to all, a preview to the
        running prompt's follower, a frame of a prompt nobody follows to the adopting ones."""
        if isinstance(item, Preview):
            targets = self._owners(self._executing)
        elif item.type == "status":
            targets = self.followers
        else:
            prompt_id = item.data.get("prompt_id")
            if item.type in ("execution_start", "executing") and item.data.get("node", "") is not None:
                self._executing = prompt_id or self._executing
            elif item.type in ("executing", "execution_success", "execution_error", "execution_interrupted"):
                self._executing = None
            targets = self._owners(prompt_id or self._executing)  # no prompt_id: the node a new socket is told
        for follower in targets:
            follower._frames.put_nowait(item)

    def _owners(self, prompt_id: str | None) -> list[Follower]:
        if prompt_id is None:
            return []
        return ([f for f in self.followers if prompt_id in f.prompt_ids]
                or [f for f in self.followers if f.adopt])
