"""What a database backend is: the calls the rest of the code uses (`Database`, satisfied by
app/db/sqlite/ and app/db/postgres.py) and the error either raises when it cannot serve."""
from contextlib import AbstractContextManager
from typing import Any, Protocol

# The longest a session of a hung or unreachable process may hold what it locked (PostgreSQL: the
# sessions' idle-in-transaction timeout and TCP keepalives, app/db/postgres.py). A watcher's lease
# is at least this long (WATCHER_LEASE_SECONDS), so a hung watcher's transaction never delays a
# standby past its lease.
HUNG_SESSION_SECONDS = 10


class DatabaseUnavailable(Exception):
    """The database cannot serve: gone, replaced by a file init-db did not make, read-only, an I/O
    error, locked past the busy timeout, a server that does not answer. The API answers it 503
    service_unavailable."""


class Database(Protocol):
    dialect: str  # "sqlite" or "postgresql": the few statements app/data/ writes twice
    errors: tuple  # the driver's exception classes: a database failure, not a bug of ours

    @staticmethod
    def is_unavailable(error: BaseException) -> bool:
        """Whether one of `errors` means the database cannot serve now (503), not a bug (500)."""

    def connection(self) -> Any:
        """The calling thread's connection for reads (rows by index and column name), kept until
        `release()`."""

    def transaction(self, *, sync_outside_lock: bool = False) -> AbstractContextManager:
        """A write transaction on a connection: committed when the block ends, rolled back on any
        exception."""

    def snapshot(self) -> AbstractContextManager:
        """A read-only transaction on the calling thread's connection: one snapshot for every read
        of the block, any write refused, rolled back at its end (`reconcile`)."""

    def release(self) -> None:
        """The end of a request: the calling thread's connection left outside any transaction."""

    def check(self) -> None:
        """For /healthz: DatabaseUnavailable unless the database answers with our schema and can
        take a write."""

    def init_schema(self, *, reset: bool = False, monitoring_seconds: int | None = None) -> tuple:
        """Create or upgrade the schema (init-db); (version before, version after).
        `monitoring_seconds`: PAYMENT_MONITORING_SECONDS, for what an upgrade watches."""

    def close_all(self) -> None:
        """Close every connection this process opened."""
