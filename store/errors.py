"""The store's exception tree: catch ``StoreError``; the database's own error is in ``__cause__``."""


class StoreError(Exception):
    """Base class of every error the store raises."""


class DatabaseUnavailable(StoreError):
    """PostgreSQL cannot be reached; the message shows the URL with its password redacted."""


class EmbeddedError(StoreError):
    """The embedded PostgreSQL server could not be set up, started or stopped."""


class MigrationError(StoreError):
    """The database schema cannot be brought to this version of Courier."""
