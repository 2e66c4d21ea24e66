"""What the query modules share: their named SQL (``Queries``) and one way to a connection."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

import asyncpg

from .errors import StoreError, is_outage

SQL_DIR = Path(__file__).parent / "sql"
_HEADER = re.compile(r"^-- ([a-z0-9_]+) --$", re.MULTILINE)


class Sql(NamedTuple):
    """One named query as PostgreSQL runs it."""

    text: str
    names: tuple[str, ...]
    """Its named parameters, in the order of ``$1``, ``$2``, …; empty for a query written with those."""


class Queries:
    """The named SQL of one query module, from its own file: ``sql/<module>.sql`` (``sql/store.sql``
    for the package itself). Each module reads it once, at import (``query = Queries(__name__)``),
    then runs ``query("name")``, or ``query.bind("name", **values)`` for a query with named
    parameters. A name its file lacks is a KeyError naming both."""

    def __init__(self, module: str):
        self.path = SQL_DIR / f"{module.rpartition('.')[2]}.sql"
        self._sql = parse(self.path)

    def __call__(self, name: str) -> str:
        """The SQL of a query written with ``$1``, ``$2``, …: its arguments go in that order."""
        sql = self._get(name)
        if sql.names:
            raise TypeError(f"query {name!r} in {self.path.name} takes named parameters: use query.bind")
        return sql.text

    def bind(self, name: str, /, **values: object) -> tuple:
        """``(sql, *arguments)`` of a query written with ``:name`` parameters, from ``values`` by
        name (to unpack into ``conn.fetch``); a parameter missing or one it lacks is a TypeError."""
        sql = self._get(name)
        if not sql.names:
            raise TypeError(f"query {name!r} in {self.path.name} takes $1, $2, …: use query({name!r})")
        missing, unknown = [n for n in sql.names if n not in values], sorted(set(values) - set(sql.names))
        if missing or unknown:
            raise TypeError(f"query {name!r} in {self.path.name}: "
                            + "; ".join(f"{what} {', '.join(names)}" for what, names
                                        in (("missing", missing), ("unknown", unknown)) if names))
        return (sql.text, *(values[n] for n in sql.names))

    def _get(self, name: str) -> Sql:
        try:
            return self._sql[name]
        except KeyError:
            raise KeyError(f"no query {name!r} in {self.path.name}") from None


def parse(path: Path) -> dict[str, Sql]:
    """The queries of one file by name: each starts with a ``-- name --`` line (what comes before
    the first is the file's own comment). A query names its parameters ``:name`` or numbers them
    ``$1``, never both (a ValueError)."""
    parts = _HEADER.split(path.read_text(encoding="utf-8"))
    queries = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        try:
            queries[name] = _numbered(body.strip().rstrip(";"))
        except ValueError as exc:
            raise ValueError(f"query {name!r} in {path.name}: {exc}") from None
    return queries


_TOKEN = re.compile(r"""'(?:[^']|'')*'|"(?:[^"]|"")*"|--[^\n]*|/\*.*?\*/|::|(?<![\w:]):([a-z_][a-z0-9_]*)|\$\d+""",
                    re.DOTALL)
"""What ``_numbered`` reads: string literals, quoted names, comments and casts (left alone), a
``:name`` parameter, a ``$n`` one."""


def _numbered(text: str) -> Sql:
    """``text`` with its ``:name`` parameters numbered ``$1``, ``$2``, … in order of first use (a name
    used twice is one parameter), outside strings and comments."""
    names: list[str] = []
    numbered = False

    def number(match: re.Match) -> str:
        nonlocal numbered
        name = match.group(1)
        if name is None:
            numbered = numbered or match.group(0).startswith("$")
            return match.group(0)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    text = _TOKEN.sub(number, text)
    if names and numbered:
        raise ValueError("both :name and $n parameters")
    return Sql(text, tuple(names))


def columns(kind: type, rows: list) -> dict[str, list]:
    """``rows`` (NamedTuples of ``kind``) as one list per field, by field name: the arrays of a
    statement that unnests them, for ``Queries.bind``."""
    return dict(zip(kind._fields, map(list, zip(*rows, strict=True)), strict=True)) if rows else \
        {field: [] for field in kind._fields}


class Patient:
    """The pool, for one running job: while PostgreSQL is down (restarting), getting a connection is
    tried again until ``deadline()`` (monotonic; when the job's lease would run out), so a result
    rendered meanwhile is recorded once the database is back rather than rendered again.
    ``waiting()`` is called before each wait. Past the deadline the outage is raised as usual."""

    RETRY_S = (0.2, 2.0)  # first and longest wait

    def __init__(self, pool: asyncpg.Pool, deadline: Callable[[], float], waiting: Callable[[], object]):
        self.pool = pool
        self.deadline = deadline
        self.waiting = waiting

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        wait_s = self.RETRY_S[0]
        while True:
            try:
                conn = await self.pool.acquire()
                break
            except Exception as exc:
                if not is_outage(exc) or time.monotonic() + wait_s > self.deadline():
                    raise
            await self.waiting()
            await asyncio.sleep(wait_s)
            wait_s = min(wait_s * 2, self.RETRY_S[1])
        try:
            yield conn
        finally:
            await self.pool.release(conn)


Db = asyncpg.Connection | asyncpg.Pool | Patient
"""What every query function takes first: a connection (e.g. inside a transaction) or the pool."""


@contextlib.asynccontextmanager
async def acquire(db: Db) -> AsyncIterator[asyncpg.Connection]:
    """Yield ``db`` itself, or a connection from it if it is a pool; database errors become StoreError."""
    try:
        if isinstance(db, (asyncpg.Pool, Patient)):
            async with db.acquire() as conn:
                yield conn
        else:
            yield db
    except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as exc:
        raise StoreError(f"database error: {type(exc).__name__}: {exc}") from exc


GROUPED_AT_ONCE = 100
"""Calls one grouped statement serves at most (``Grouped``)."""


class Grouped:
    """Group commit for a statement that serves many calls at once: ``run(db, items)`` runs it for
    ``items`` (one per call) and returns one result per item, in order. The items go to ``run``
    sorted by ``user(item)``: two statements under way at once lock the users' rows in one order.

    Through a pool, the calls made while its statement is in flight wait for it and then go together
    in the next (up to ``GROUPED_AT_ONCE``): under a flood, one round trip and one commit serve
    many, and with one call at a time nothing waits. A statement that fails for another reason than
    an outage is tried again for each of its items alone: one bad item fails alone. On a connection
    (a transaction, say), each call runs at once."""

    def __init__(self, run: Callable[[Db, list], Awaitable[list]], user: Callable[[object], int]):
        self._statement = run
        self._user = user
        self._waiting: dict[asyncpg.Pool, list[tuple[object, asyncio.Future]]] = {}
        """The pools with calls under way (while none are, the pool has no entry)."""
        self._serving: set[asyncio.Task] = set()  # held here: the event loop holds tasks weakly

    async def call(self, db: Db, item):
        if not isinstance(db, asyncpg.Pool):
            return (await self.run(db, [item]))[0]
        future = asyncio.get_running_loop().create_future()
        waiting = self._waiting.get(db)
        if waiting is None:
            waiting = self._waiting[db] = []
            task = asyncio.create_task(self._serve(db, waiting), name="courier-grouped")
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
        waiting.append((item, future))
        return await future

    async def _serve(self, pool: asyncpg.Pool, waiting: list) -> None:
        try:
            while waiting:
                batch = waiting[:GROUPED_AT_ONCE]
                del waiting[:GROUPED_AT_ONCE]
                await self._run(pool, batch)
        finally:
            for _, future in waiting:  # cancelled (the event loop stops): so are they
                future.cancel()
            del self._waiting[pool]

    async def _run(self, pool: asyncpg.Pool, batch: list[tuple[object, asyncio.Future]]) -> None:
        items = [item for item, _ in batch]
        try:
            results = await self.run(pool, items)
        except Exception as exc:
            results = ([exc] * len(items) if len(items) == 1 or is_outage(exc)
                       else [await self._alone(pool, item) for item in items])
        except BaseException:
            for _, future in batch:
                future.cancel()
            raise
        for (_, future), result in zip(batch, results, strict=True):
            if future.done():  # its caller was cancelled: what it asked for is done all the same
                continue
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def _alone(self, pool: asyncpg.Pool, item):
        try:
            return (await self.run(pool, [item]))[0]
        except Exception as exc:
            return exc

    async def run(self, db: Db, items: list) -> list:
        """The statement for ``items``, given to it in the order of their users; results in ``items``' order."""
        order = sorted(range(len(items)), key=lambda index: self._user(items[index]))
        results = await self._statement(db, [items[index] for index in order])
        ordered: list = [None] * len(items)
        for index, result in zip(order, results, strict=True):
            ordered[index] = result
        return ordered
