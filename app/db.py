"""The SQLite connection: one per process and thread, reused across requests.

`Database` owns the connections of one database file. Every write runs inside `transaction()`, which
opens with BEGIN IMMEDIATE so that concurrent writers queue on SQLite's lock (bounded by the busy
timeout) instead of failing half-way. `init_app(app)` is this module's one coupling point with Flask.
"""
import os
import sqlite3
import sys
import threading
from contextlib import contextmanager

import click
from flask import current_app
from flask.cli import with_appcontext


class Database:
    def __init__(self, path, *, busy_timeout_ms=30_000, synchronous="FULL"):
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self.synchronous = synchronous
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened = []  # (pid, thread, connection) for every connection made, to close them all

    def connection(self):
        """The calling thread's connection, opened on first use (and again after a fork)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = self._connect()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _connect(self):
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # only close_all() touches it from another thread
            cached_statements=256,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        with self._lock:
            self._close_orphans()
            self._opened.append((os.getpid(), threading.current_thread(), conn))
        return conn

    def _close_orphans(self):
        """Close the connections of this process's threads that have ended. A threaded server that
        runs each request in a new thread (`flask run`, as under `make run`) would otherwise keep one
        open connection (two file descriptors) per request served. Connections inherited from a
        parent process are left alone (never close SQLite handles across a fork)."""
        pid, kept = os.getpid(), []
        for entry in self._opened:
            owner_pid, thread, conn = entry
            if owner_pid == pid and not thread.is_alive():
                conn.close()
            else:
                kept.append(entry)
        self._opened = kept

    @contextmanager
    def transaction(self):
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any exception."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def release(self):
        """End of a request: never leave a transaction open on a reused connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.in_transaction:
            conn.execute("ROLLBACK")

    def close_all(self):
        with self._lock:
            opened, self._opened = self._opened, []
        for _, _, conn in opened:
            try:
                conn.close()
            except sqlite3.ProgrammingError:
                pass
        self._local = threading.local()

    def init_schema(self, script, *, reset=False):
        conn = self.connection()
        if reset:
            conn.execute("PRAGMA foreign_keys = OFF")
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            ]
            for table in tables:
                conn.execute(f'DROP TABLE IF EXISTS "{table}"')
            conn.execute("PRAGMA foreign_keys = ON")
        conn.executescript(script)

    def ping(self):
        return self.connection().execute("SELECT 1").fetchone()[0] == 1


def get_db():
    return current_app.extensions["db"]


def init_db(reset=False):
    with current_app.open_resource("schema.sql") as f:
        get_db().init_schema(f.read().decode("utf-8"), reset=reset)


@click.command("init-db")
@click.option("--reset", is_flag=True, help="Drop every table first (destroys all data).")
@with_appcontext
def init_db_command(reset):
    """Create the database tables that are missing (safe to run twice)."""
    if reset and sys.stdin.isatty():
        click.confirm("This deletes every merchant, process and event. Continue?", abort=True)
    init_db(reset=reset)
    click.echo(("Reset and initialised" if reset else "Initialised") + " the database.")


def init_app(app):
    app.extensions["db"] = Database(
        app.config["DATABASE"],
        busy_timeout_ms=app.config["SQLITE_BUSY_TIMEOUT_MS"],
        synchronous=app.config["SQLITE_SYNCHRONOUS"],
    )
    app.teardown_appcontext(lambda exc: app.extensions["db"].release())
    app.cli.add_command(init_db_command)
