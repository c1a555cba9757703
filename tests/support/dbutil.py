"""Direct access to a test database of either backend (a SQLite path or a postgresql:// URL), as an
operator's shell would have it: outside the service, each call committed. SQL in sqlite3's `?`
style. Also the backend the suite runs against (`BACKEND`)."""
import contextlib
import os
import sqlite3

import psycopg

from app.data import schema
from app.db import is_postgres_url
from app.db.postgres import Connection

# The backend the suite runs against: TEST_DATABASE=sqlite (the default) or postgresql. `make test`
# runs the suite once with each. Tests marked sqlite_only (SQLite's own machinery) run only in the
# SQLite pass, those marked postgres_only only in the PostgreSQL pass (tests/conftest.py).
BACKEND = os.environ.get("TEST_DATABASE", "sqlite")
if BACKEND not in ("sqlite", "postgresql"):
    raise RuntimeError(f"TEST_DATABASE must be sqlite or postgresql, not {BACKEND!r}")


def open_connection(database):
    """A connection of its own, in autocommit; the caller closes it."""
    if is_postgres_url(database):
        return Connection(psycopg.connect(str(database), autocommit=True))
    conn = sqlite3.connect(str(database), isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


@contextlib.contextmanager
def connect(database):
    conn = open_connection(database)
    try:
        yield conn
    finally:
        conn.close()


def query(database, sql, *params):
    with connect(database) as conn:
        return [tuple(row) for row in conn.execute(sql, params).fetchall()]


def scalar(database, sql, *params):
    return query(database, sql, *params)[0][0]


def execute(database, sql, *params):
    with connect(database) as conn:
        conn.execute(sql, params)


def drop_tables(database, *tables):
    """Drop tables under a running service (a fault), whatever refers to them."""
    with connect(database) as conn:
        if is_postgres_url(database):
            for table in tables:
                conn.execute(f"DROP TABLE {table} CASCADE")
        else:
            conn.execute("PRAGMA foreign_keys = OFF")
            for table in tables:
                conn.execute(f"DROP TABLE {table}")


def dump(database) -> str:
    """Every row of every table of ours, as text."""
    with connect(database) as conn:
        lines = []
        for table in schema.TABLES:
            for row in conn.execute(f"SELECT * FROM {table}").fetchall():
                lines.append(f"{table}: {tuple(row)!r}")
        return "\n".join(lines)


def schema_up_to(conn, database, last):
    """On `conn` (open_connection's) to an empty `database`: the schema of versions 1 to `last`, as
    that release's init-db left it, with its schema_version rows: a database of an earlier release
    for an upgrade test to fill."""
    kind = "postgresql" if is_postgres_url(database) else "sqlite"
    applied = [m for m in schema.migrations(kind) if m[0] <= last]
    for _, _, sql in applied:
        (conn.execute if kind == "postgresql" else conn.executescript)(sql)
    conn.execute("CREATE TABLE schema_version (version BIGINT PRIMARY KEY, name TEXT NOT NULL,"
                 " applied_at BIGINT NOT NULL)")
    for number, filename, _ in applied:
        conn.execute("INSERT INTO schema_version VALUES (?, ?, 0)", (number, filename))
