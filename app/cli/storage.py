"""The database's own commands: `init-db` creates the schema or upgrades it; `copy-db TARGET` copies
every row of the configured database into an empty database of either kind (how a merchant moves
from SQLite to PostgreSQL; docs/storage.md)."""
import os
import sqlite3
import sys

import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.common import fail
from app.data import schema as schema_rows
from app.db import get_db, init_db, is_postgres_url, open_database
from app.domain.setup import networks_of_unknown_mode

BATCH = 5000


def _existing_contents(target, database):
    """What TARGET already holds: (tables that are not ours, tables of ours that have rows)."""
    if is_postgres_url(target):
        try:
            return _contents(database.connection())
        finally:
            database.release()
    if not os.path.exists(target) or os.path.getsize(target) == 0:
        return [], []
    conn = sqlite3.connect(f"file:{os.path.abspath(target)}?mode=ro", uri=True)
    try:
        return _contents(conn)
    finally:
        conn.close()


def _contents(conn):
    ours = schema_rows.TABLES + ("schema_version",)
    return [t for t in schema_rows.tables(conn) if t not in ours], schema_rows.has_rows(conn)


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
    for network in networks_of_unknown_mode(get_db(), before):
        click.echo(f"Network {network.id} (chain id {network.chain_id}) is now a test network: the"
                   " release it was added with had no test and live modes, and its chain id is"
                   " neither a well-known test chain nor a well-known live one. If it takes real"
                   f" payments: flask --app app networks set-mode {network.id} live")


@click.command("copy-db")
@click.argument("target")
@with_appcontext
def copy_db_command(target):
    """Copy every row of the configured database into TARGET (a SQLite file path or a
    postgresql:// URL), which must be empty. The source is read as one consistent snapshot; rows
    written after the copy starts are not copied, so stop the service's writers first."""
    config = current_app.config
    if os.fspath(target) == os.fspath(config["DATABASE"]):
        raise fail("TARGET is the configured database itself.")
    source = get_db()
    conn = source.connection()
    latest = schema_rows.latest_version(schema_rows.dialect(conn))
    if schema_rows.version(conn) != latest:
        raise fail(
            f"The configured database is at schema version {schema_rows.version(conn)}, not"
            f" {latest}: run init-db on it first."
        )
    destination = open_database(target, config)
    try:
        foreign, filled = _existing_contents(target, destination)
        if foreign or filled:
            raise fail(
                "TARGET is not empty (" + ", ".join(
                    [f"table {t} is not the service's" for t in foreign]
                    + [f"{t} has rows" for t in filled])
                + "): copy-db only fills an empty database."
            )
        destination.init_schema()
        counts = _copy(conn, destination)
    finally:
        destination.close_all()
    for table, n in counts.items():
        click.echo(f"{table:20} {n:>10} rows")
    click.echo(f"Copied {sum(counts.values())} rows into the new database.")


def _copy(source_conn, destination) -> dict:
    """Every table, parents first, inside one transaction on each side: the source's a read-only
    snapshot, the target's one write, so a failure leaves the target empty."""
    if schema_rows.dialect(source_conn) == "postgresql":
        source_conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    else:
        source_conn.execute("BEGIN")
    counts = {}
    try:
        with destination.transaction() as target_conn:
            for table in schema_rows.TABLES:
                names = schema_rows.columns(target_conn, table)
                counts[table] = 0
                for rows in schema_rows.read_rows(source_conn, table, names, BATCH):
                    schema_rows.insert_rows(target_conn, table, names, rows)
                    counts[table] += len(rows)
            schema_rows.reset_identities(target_conn)
            for table, n in counts.items():
                if schema_rows.count(target_conn, table) != n:
                    raise fail(f"{table}: the copy does not hold {n} rows")
    finally:
        source_conn.execute("COMMIT")
    return counts
