"""Queueing use cases shared by the bot and the HTTP routes: ``plan_benchmark`` and
``queue_benchmark`` (``/bench`` and ``POST /courier/benchmarks/run``).

They check, build the job's params and queue it, and return what happened as a value; the
adapters (``bot/admin/bench.py``, ``server_routes/benchmarks.py``) parse their own input and
turn the value into a chat reply or an HTTP response. Between the plan and the queueing an
adapter may do what only it can (the route asks Telegram whether the chat exists).
"""

from __future__ import annotations

import dataclasses

from ..core import i18n
from ..core.config import Settings
from ..store import access, commands
from ..store import backends as backend_table
from . import bench
from .backends import shown_url
from .submit import Submission, submit
from .workflow import WorkflowError


@dataclasses.dataclass(frozen=True)
class BenchRequest:
    """A benchmark asked for: of stored command ``command``, ``repeats`` measured runs, on the backend
    ``backend`` names (its id, ``#2``, or its URL as shown; None: whichever claims the job)."""

    command: str
    repeats: int = bench.DEFAULT_REPEATS
    backend: str | None = None


@dataclasses.dataclass(frozen=True)
class NotAdmin:
    """Benchmarks are queued for admins only: their results go to the admin's chat."""


@dataclasses.dataclass(frozen=True)
class UnknownCommand:
    name: str


@dataclasses.dataclass(frozen=True)
class UnknownBackend:
    """No backend is the one named; ``listed``: those there are."""

    ref: str
    listed: list[backend_table.Backend]


@dataclasses.dataclass(frozen=True)
class BackendOff:
    """The backend named drains or is not reachable: its job would wait until an admin or it acts."""

    backend: backend_table.Backend


@dataclasses.dataclass(frozen=True)
class BadBenchmark:
    """The command's workflow cannot run as a benchmark job (or ``repeats`` is out of range)."""

    reason: str


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A benchmark job ready to queue: its command's name, params, and the backend it must run on."""

    name: str
    params: dict
    backend: backend_table.Backend | None

    def queued_text(self, language: str, position: int) -> str:
        """The "Queued" reply both adapters send (``submit.announcing``), in ``language``."""
        text = i18n.text(language, "bench_queued", name=self.name, warmup=self.params["warmup"],
                         repeats=self.params["repeats"], position=position)
        if self.backend is not None:
            text += "\n" + i18n.text(language, "bench_on_backend", id=self.backend.id, url=shown_url(self.backend.url))
        return text


BenchRefusal = NotAdmin | UnknownCommand | UnknownBackend | BackendOff | BadBenchmark


async def plan_benchmark(pool, settings: Settings, request: BenchRequest, *, user_id: int,
                         language: str | None) -> Benchmark | BenchRefusal:
    """The job ``request`` asks ``user_id`` (an admin) to queue, with its report in ``language`` (None:
    the settings'); refused if the workflow cannot run as a job now, not on the backend later."""
    if user_id not in settings.admin_users and user_id not in await access.stored_admins(pool):
        return NotAdmin()
    command = await commands.get_command(pool, request.command)
    if command is None:
        return UnknownCommand(request.command)
    backend = None
    if request.backend is not None:
        listed = await backend_table.list_backends(pool)
        backend = find_backend(listed, request.backend)
        if backend is None:
            return UnknownBackend(request.backend, listed)
        if backend.draining or not backend.healthy:
            return BackendOff(backend)
    try:
        bench.benchmark_prompt(command.workflow, name=command.name, repeats=request.repeats)
        params = bench.job_params(command.name, command.workflow, request.repeats, language,
                                  backend=backend.url if backend else None)
    except (WorkflowError, ValueError) as exc:
        return BadBenchmark(str(exc))
    return Benchmark(command.name, params, backend)


async def queue_benchmark(pool, benchmark: Benchmark, *, user_id: int, chat_id: int, **how) -> Submission:
    """Queue ``benchmark`` for ``user_id`` in ``chat_id``; ``how``: ``submit``'s other arguments (the
    bot's cap and update). Its reply is the adapter's (``submit.announcing``)."""
    return await submit(pool, user_id=user_id, chat_id=chat_id, command="bench", params=benchmark.params, **how)


def find_backend(listed: list[backend_table.Backend], ref: str) -> backend_table.Backend | None:
    """The backend ``ref`` names: its id (``2`` or ``#2``), or its URL as ``/backends`` shows it, with or
    without the scheme (``127.0.0.1:8188``)."""
    wanted = ref.removeprefix("#").lower().rstrip("/")
    for backend in listed:
        shown = shown_url(backend.url).lower().rstrip("/")
        if wanted in (str(backend.id), shown, shown.split("://", 1)[-1]):
            return backend
    return None
