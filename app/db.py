"""The SQLite connection: one per process and thread, reused across requests.

`Database` owns the connections of one database file. Every write runs inside `transaction()`, which
opens with BEGIN IMMEDIATE so that concurrent writers queue on SQLite's lock (bounded by the busy
timeout) instead of failing half-way. `init_app(app)` is this module's one coupling point with Flask.

Writer queue: before BEGIN IMMEDIATE, `transaction()` takes an exclusive flock(2) on
`<database>-writer.lock` (one descriptor per connection, so threads queue too). SQLite's own busy
handler polls a held write lock by sleeping 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms between
tries: with several gunicorn workers and a commit that waits for fsync, writers slept through whole
ladders while the lock sat free (p99 in the tens of ms, throughput lost). A writer blocked in flock
is woken by the kernel the moment the previous one releases it, so BEGIN IMMEDIATE then finds the
lock free. Writers that do not take the flock (an operator's sqlite3 shell, another program) are
still covered by the busy timeout. A crashed holder's flock is released by the kernel. The flock
wait has no timeout of its own: its holder is always one of our short transactions (no network I/O
inside one), itself bounded by the busy timeout; gunicorn's worker timeout bounds a request.
"""
import fcntl
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
        self._opened = []  # every connection this object made, to close them all
        self._lock_fds = []  # and every writer-lock descriptor
        self._group = threading.Condition()  # shared_transaction's queue
        self._queued, self._committing = [], False

    def connection(self):
        """The calling thread's connection, opened on first use (and again after a fork)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = self._connect()
            self._local.conn, self._local.pid = conn, os.getpid()
            self._local.writer_lock = None
        return conn

    def _writer_lock(self):
        """The calling thread's descriptor of the writer-queue lock file (see the module docstring)."""
        fd = self._local.writer_lock
        if fd is None:
            fd = os.open(os.fspath(self.path) + "-writer.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._local.writer_lock = fd
            with self._lock:
                self._lock_fds.append(fd)
        return fd

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
            self._opened.append(conn)
        return conn

    @contextmanager
    def transaction(self):
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any exception."""
        conn = self.connection()
        lock = self._writer_lock()
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

    def shared_transaction(self, work):
        """`work(conn)` in a write transaction that other threads' concurrent calls may share
        (group commit): one thread commits the works queued so far, each in its own SAVEPOINT, so
        one that raises is rolled back alone and its exception re-raised in its caller. Returns
        work's result once the transaction holding it has committed, as `transaction()` would:
        a caller only goes on once its writes are durable. One commit (one fsync) then covers
        several threads' writes instead of one each.
        """
        item = _Shared(work)
        with self._group:
            self._queued.append(item)
            while not item.done:
                if self._committing:
                    self._group.wait()
                    continue
                self._committing = True
                batch, self._queued = self._queued, []
                self._group.release()
                try:
                    self._commit_batch(batch)
                finally:
                    self._group.acquire()
                    self._committing = False
                    self._group.notify_all()
        if item.error is not None:
            raise item.error
        return item.result

    def _commit_batch(self, batch):
        try:
            with self.transaction() as conn:
                for item in batch:
                    conn.execute("SAVEPOINT shared")
                    try:
                        item.result = item.work(conn)
                    except Exception as e:
                        conn.execute("ROLLBACK TO shared")
                        item.error = e
                    conn.execute("RELEASE shared")
        except BaseException as e:
            for item in batch:
                item.result, item.error = None, e
            if not isinstance(e, Exception):
                raise
        finally:
            for item in batch:
                item.done = True

    def release(self):
        """End of a request: never leave a transaction open on a reused connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and conn.in_transaction:
            conn.execute("ROLLBACK")

    def close_all(self):
        with self._lock:
            opened, self._opened = self._opened, []
            lock_fds, self._lock_fds = self._lock_fds, []
        for fd in lock_fds:
            try:
                os.close(fd)
            except OSError:
                pass
        for conn in opened:
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


class _Shared:
    __slots__ = ("work", "result", "error", "done")

    def __init__(self, work):
        self.work, self.result, self.error, self.done = work, None, None, False


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
