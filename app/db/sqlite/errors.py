"""When the SQLite backend cannot serve: its own DatabaseUnavailable, and which of SQLite's errors
mean "cannot serve now" (a 503) rather than a statement that is wrong (a bug, 500)."""
import sqlite3

from app.db import interface

# SQLite's primary result codes that mean the database cannot serve now, rather than a bug in a
# statement: busy/locked past the timeout, read-only, I/O error, corrupt, full, cannot open, not a
# database, locking protocol.
UNAVAILABLE_CODES = frozenset(
    getattr(sqlite3, name) for name in (
        "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_CORRUPT",
        "SQLITE_FULL", "SQLITE_CANTOPEN", "SQLITE_NOTADB", "SQLITE_PROTOCOL",
    )
)

# Of those, the ones that pass: another writer held the database past the busy timeout.
TRANSIENT_CODES = frozenset((sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED))


class DatabaseUnavailable(interface.DatabaseUnavailable, sqlite3.OperationalError):
    """interface.DatabaseUnavailable (a 503), raised by this backend's own checks; also an sqlite3
    error as SQLite's own "database is locked" is, so a caller catching one catches both."""


def is_unavailable(error: BaseException) -> bool:
    """Whether an sqlite3 error says the database cannot serve now (503), not that a statement is
    wrong (a bug, 500)."""
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in UNAVAILABLE_CODES


def is_lasting(error: BaseException) -> bool:
    """Whether an sqlite3 error says the database cannot serve now and will not by itself
    (read-only, an I/O error, not a database): unavailable, and not busy or locked."""
    return (is_unavailable(error)
            and getattr(error, "sqlite_errorcode", 0) & 0xFF not in TRANSIENT_CODES)
