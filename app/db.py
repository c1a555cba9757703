"""The database: a SQLite file (the embedded default) or a PostgreSQL server, behind one interface.

`FLASK_DATABASE` is a file path or a `postgresql://` URL. Both backends offer the same few calls,
which is all the rest of the code uses: `transaction()` (a write transaction, committed on success),
`connection()` (the calling thread's connection for reads, until the request ends), rows readable
by column name, `check()` for /healthz, `init_schema()` for init-db. The SQL itself lives in
app/data/, written once for both where the semantics agree. The SQLite machinery (writer queue,
sync outside the lock, file identity checks) is in app/db_sqlite.py; psycopg's pool and placeholder
translation in app/db_postgres.py. See docs/storage.md.
"""
import sqlite3
import sys

import click
from flask import current_app
from flask.cli import with_appcontext

from app.errors import DatabaseUnavailable


def is_postgres_url(target) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


def open_database(target, config):
    """The backend for `target` (a path or a postgresql:// URL), set up from the app's config."""
    if is_postgres_url(target):
        from app.db_postgres import PostgresDatabase

        return PostgresDatabase(
            str(target), pool_min=config["POSTGRES_POOL_MIN"], pool_max=config["POSTGRES_POOL_MAX"],
            pool_timeout=config["POSTGRES_POOL_TIMEOUT_SECONDS"],
            connect_timeout=config["POSTGRES_CONNECT_TIMEOUT_SECONDS"],
        )
    from app.db_sqlite import SqliteDatabase

    return SqliteDatabase(
        target, busy_timeout_ms=config["SQLITE_BUSY_TIMEOUT_MS"],
        synchronous=config["SQLITE_SYNCHRONOUS"],
    )


def database_errors() -> tuple:
    """Every exception class a backend raises for a database failure."""
    errors = (sqlite3.Error, DatabaseUnavailable)
    if "app.db_postgres" in sys.modules:
        errors += sys.modules["app.db_postgres"].ERRORS
    return errors


def is_unavailable(error: BaseException) -> bool:
    """Whether a database error says the database cannot serve now (503), not that a statement is
    wrong (a bug, 500)."""
    if isinstance(error, DatabaseUnavailable):
        return True
    if isinstance(error, sqlite3.Error):
        from app.db_sqlite import is_unavailable as sqlite_unavailable

        return sqlite_unavailable(error)
    postgres = sys.modules.get("app.db_postgres")
    return postgres is not None and postgres.is_unavailable(error)


def get_db():
    return current_app.extensions["db"]


def init_db(reset=False):
    """Create the schema, or upgrade it to the newest version; (version before, after)."""
    return get_db().init_schema(reset=reset)


@click.command("init-db")
@click.option("--reset", is_flag=True, help="Drop every table first (destroys all data).")
@with_appcontext
def init_db_command(reset):
    """Create the database tables, or upgrade an earlier release's in place (safe to run twice)."""
    if reset and sys.stdin.isatty():
        click.confirm("This deletes every merchant, process and event. Continue?", abort=True)
    before, after = init_db(reset=reset)
    done = "Reset and initialised" if reset else "Initialised"
    if before and after != before:
        click.echo(f"Upgraded the database from schema version {before} to {after}.")
    else:
        click.echo(f"{done} the database (schema version {after}).")


def init_app(app):
    app.extensions["db"] = open_database(app.config["DATABASE"], app.config)
    app.teardown_appcontext(lambda exc: app.extensions["db"].release())
    app.cli.add_command(init_db_command)
