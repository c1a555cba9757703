"""The database: a SQLite file (the embedded default) or a PostgreSQL server, behind one interface.

`FLASK_DATABASE` is a file path or a `postgresql://` URL. Both backends satisfy `Database`
(interface.py), which is all the rest of the code uses; the SQL itself lives in app/data/. This
module opens the backend, creates or upgrades the schema (init_db; the `init-db` command is in
app/cli/storage.py), and says which exceptions of the open backend are database failures and which
of those mean "cannot serve now" (503) rather than a bug (500). The backends: sqlite/ (a package,
mapped in its __init__.py), postgres.py; health.py holds /healthz's write signals. See
docs/storage.md.
"""
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from flask import current_app

from app.db.interface import Database, DatabaseUnavailable
from app.db.sqlite import SqliteDatabase

__all__ = ["Database", "DatabaseUnavailable", "database_errors", "get_db", "init_app", "init_db",
           "is_postgres_url", "is_unavailable", "location", "open_database"]


def is_postgres_url(target) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


def location(target) -> str:
    """Where `target` is, as an operator may read it: the SQLite file's path as configured, or the
    PostgreSQL URL without its password (in the user part or as a `password` parameter)."""
    target = str(target)
    if not is_postgres_url(target):
        return target
    parts = urlsplit(target)
    netloc = parts.netloc.rpartition("@")
    if netloc[1]:
        user = netloc[0].partition(":")[0]
        netloc = f"{user}@{netloc[2]}" if user else netloc[2]
    else:
        netloc = parts.netloc
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                       if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def open_database(target, config) -> Database:
    """The backend for `target` (a path or a postgresql:// URL), set up from the app's config."""
    if is_postgres_url(target):
        # Imported for a PostgreSQL URL only (not to dodge a circle: postgres.py imports nothing of
        # this module): psycopg and its pool would weigh on every SQLite worker's memory.
        from app.db.postgres import PostgresDatabase

        return PostgresDatabase(
            str(target), pool_min=config["POSTGRES_POOL_MIN"], pool_max=config["POSTGRES_POOL_MAX"],
            pool_timeout=config["POSTGRES_POOL_TIMEOUT_SECONDS"],
            connect_timeout=config["POSTGRES_CONNECT_TIMEOUT_SECONDS"],
        )
    return SqliteDatabase(
        target, busy_timeout_ms=config["SQLITE_BUSY_TIMEOUT_MS"],
        synchronous=config["SQLITE_SYNCHRONOUS"],
    )


def database_errors(db: Database) -> tuple:
    """Every exception class `db` raises for a database failure."""
    return (DatabaseUnavailable, *db.errors)


def is_unavailable(db: Database, error: BaseException) -> bool:
    """Whether a database error of `db` says the database cannot serve now (503), not that a
    statement is wrong (a bug, 500)."""
    return isinstance(error, DatabaseUnavailable) or db.is_unavailable(error)


def get_db() -> Database:
    return current_app.extensions["db"]


def init_db(reset=False):
    """Create the schema, or upgrade it to the newest version; (version before, after)."""
    return get_db().init_schema(
        reset=reset, monitoring_seconds=current_app.config["PAYMENT_MONITORING_SECONDS"])


def init_app(app) -> Database:
    """Open the app's database (returned, for the error handlers), released after each request."""
    db = app.extensions["db"] = open_database(app.config["DATABASE"], app.config)
    app.teardown_appcontext(lambda exc: app.extensions["db"].release())
    return db
