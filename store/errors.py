"""The store's exception tree: catch ``StoreError``; the database's own error is in ``__cause__``."""

import traceback
from pathlib import Path

import asyncpg

_LOST = (asyncpg.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError, asyncpg.InterfaceError,
         asyncpg.InternalClientError)
"""What asyncpg raises when the server is restarting or went away mid-query (a connection it
broke may still be in the middle of its last operation: InternalClientError)."""


class StoreError(Exception):
    """Base class of every error the store raises."""


class DatabaseUnavailable(StoreError):
    """PostgreSQL cannot be reached; the message shows the URL with its password redacted."""


class EmbeddedError(StoreError):
    """The embedded PostgreSQL server could not be set up, started or stopped."""


class MigrationError(StoreError):
    """The database schema cannot be brought to this version of Courier."""


def is_outage(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error that led to it, says PostgreSQL is unreachable (down, restarting):
    asyncpg's connection errors, or a refused connection or timeout raised inside asyncpg (a
    backend's refused connection is not an outage of the database)."""
    while exc is not None:
        if isinstance(exc, (DatabaseUnavailable, *_LOST)) or (isinstance(exc, (OSError, TimeoutError))
                                                              and _raised_in_asyncpg(exc)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _raised_in_asyncpg(exc: BaseException) -> bool:
    return any("asyncpg" in Path(frame.f_code.co_filename).parts for frame, _ in traceback.walk_tb(exc.__traceback__))
