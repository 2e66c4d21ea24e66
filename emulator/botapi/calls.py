"""A Bot API request as the emulator records it (``Call``), and the tables of the methods it answers.

Each module that answers Bot API methods keeps one ``Verbs`` table, filled by its decorator as
aiohttp's ``RouteTableDef`` is (``@verbs("sendMessage", outbound=True)``); ``methods`` joins the
tables. Telegram matches method names case-insensitively, so the tables are keyed in lower case.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .wire import ApiError, Upload

if TYPE_CHECKING:
    from .bot import EmulatedBot


@dataclasses.dataclass
class Call:
    """One Bot API request, as the emulator read and answered it."""

    method: str
    """The method's Bot API spelling (``sendMessage``), whatever case the client used."""
    params: dict[str, Any]
    """Parameters, typed: Integer → int, Boolean → bool, JSON-serialized objects → dict/list."""
    files: dict[str, Upload]
    outbound: bool
    """Whether the method acts in a chat (send, edit, delete, answer, chat action)."""
    status: int | None = None
    """HTTP status answered; None while in flight, and for good when the call was hung."""
    result: Any = None
    failure: ApiError | None = None
    note: str | None = None
    """The ``description`` Telegram adds to some successes ("Webhook was set")."""
    received_at: float = dataclasses.field(default_factory=time.perf_counter)
    """When the request reached the emulator (``time.perf_counter``)."""

    @property
    def ok(self) -> bool:
        return self.status == 200

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "params": self.params, "status": self.status, "result": self.result,
                "error": self.failure.description if self.failure else None,
                "files": {name: {"filename": f.filename, "content_type": f.content_type, "size": len(f.data)}
                          for name, f in self.files.items()}}


@dataclasses.dataclass(frozen=True)
class Method:
    name: str
    handler: Callable[[EmulatedBot, Call], Awaitable[Any]]
    outbound: bool


class Verbs(dict[str, Method]):
    """The Bot API methods one module answers, by lower-case name."""

    def __call__(self, name: str, *, outbound: bool = False) -> Callable:
        """Registers the decorated ``async def (bot, call)`` as method ``name``; ``outbound``: it acts in a chat."""
        def register(handler: Callable) -> Callable:
            self[name.lower()] = Method(name, handler, outbound)
            return handler
        return register


def joined(*tables: Verbs) -> dict[str, Method]:
    """One table of every method of ``tables``; a method answered twice is a mistake."""
    methods: dict[str, Method] = {}
    for table in tables:
        if twice := methods.keys() & table.keys():
            raise ValueError(f"Bot API methods answered twice: {sorted(twice)}")
        methods.update(table)
    return methods
