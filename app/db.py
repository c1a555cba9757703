"""The SQLite connection: one per process and thread, reused across requests.

`Database` owns the connections of one database file. Every write runs inside `transaction()`, which
opens with BEGIN IMMEDIATE so that concurrent writers queue on SQLite's lock (bounded by the busy
timeout) instead of failing half-way. `init_app(app)` is this module's one coupling point with Flask.

Writer queue: before BEGIN IMMEDIATE, `transaction()` takes an exclusive flock(2) on
`<database>-writer.lock` (one descriptor per connection, so threads queue too). SQLite's own busy
handler polls a held write lock by sleeping 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms between
tries: with several gunicorn workers and a commit that waits for fsync, writers slept through whole
ladders while the lock sat free (p99 in the tens of ms, throughput lost). A writer that finds the
flock held waits for it in the kernel (a blocking flock), so it is woken the moment the previous
writer unlocks: no polling, and the lock never sits free while writers sleep. The blocking call runs
in a small per-connection helper thread (`_LockWaiter`) so that the caller's wait stays bounded by
the busy timeout: past it the writer fails with "database is locked" (a 500 for a request), exactly
as SQLite's own wait would, instead of queueing for ever behind a stuck writer. Writers that do not
take the flock (an operator's sqlite3 shell, another program) are still covered by SQLite's busy
timeout. A crashed holder's flock is released by the kernel.

Sync outside the lock (`transaction(sync_outside_lock=True)`): with SYNCHRONOUS=FULL, SQLite waits for
the WAL's fsync inside the commit, while it holds the one write lock, so every writer queues behind
each fsync in turn. A transaction opened this way commits with the connection at NORMAL (the WAL is
written, not synced), releases the locks, and only then syncs the WAL itself (fdatasync) before
returning. The caller still goes on only once its commit is on disk, as under FULL; what changes is
that the next writer runs meanwhile and concurrent syncs overlap (the kernel merges their flushes). The
WAL is append-only until a checkpoint, and NORMAL syncs it before any checkpoint, so syncing it
syncs this commit and every commit before it; a WAL file is never deleted while a connection (ours)
is open on it. The difference from FULL: for the length of that sync other connections can already
read the commit. Use it only where nobody can act on the new rows before the caller has answered
(creating a preorder: nobody knows the new processId yet).
"""
import fcntl
import os
import queue
import sqlite3
import sys
import threading
from contextlib import contextmanager

import click
from flask import current_app
from flask.cli import with_appcontext

from app.data import schema as schema_rows


class _ThreadState:
    """One thread's SQLite connection and writer-lock descriptor (with its waiter, made when the
    lock is first found held)."""

    def __init__(self, pid, thread, conn, synchronous):
        self.pid, self.thread, self.conn, self.lock_fd, self.waiter = pid, thread, conn, None, None
        self.synchronous = synchronous  # the connection's PRAGMA synchronous
        # Whether SQLite could put the connection in WAL mode (not for an in-memory database).
        self.wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        self.wal_fd = None  # the WAL's descriptor, opened by the first sync_outside_lock commit

    def close(self):
        try:
            self.conn.close()
        except sqlite3.ProgrammingError:
            pass
        if self.wal_fd is not None:
            _close_quietly(self.wal_fd)
            self.wal_fd = None
        if self.waiter is not None:
            self.waiter.stop()  # it closes the descriptor once it is no longer waiting on it
            self.waiter = None
        elif self.lock_fd is not None:
            _close_quietly(self.lock_fd)
        self.lock_fd = None


def _close_quietly(fd):
    try:
        os.close(fd)
    except OSError:
        pass


class _Ticket:
    __slots__ = ("granted", "abandoned", "ready")

    def __init__(self):
        # `ready` is taken now and released by the waiter: a C-level lock is far cheaper to wait on
        # than a threading.Event (this is on the path of every contended write).
        self.granted, self.abandoned, self.ready = False, False, threading.Lock()
        self.ready.acquire()


class _LockWaiter:
    """Waits in a blocking flock on one descriptor for its owner thread, which waits for it with
    a timeout. Of the two outcomes exactly one wins, under `_mutex`: the owner gives up before
    the lock is granted (the waiter then unlocks as soon as it gets it), or the lock is granted
    before the owner gives up (the owner then holds it, as after a non-blocking flock)."""

    _STOP = object()

    def __init__(self, fd):
        self.fd = fd
        self._mutex = threading.Lock()
        self._requests = queue.SimpleQueue()
        self._outstanding = 0  # tickets not yet granted or handed back (an abandoned one, at most)
        threading.Thread(target=self._run, name="sqlite-writer-queue", daemon=True).start()

    @property
    def busy(self):
        """Still blocked for an abandoned ticket: the owner must not flock the descriptor itself,
        or the waiter's flock would succeed on the owner's lock and its hand-back release it."""
        with self._mutex:
            return self._outstanding > 0

    def acquire(self, timeout):
        ticket = _Ticket()
        with self._mutex:
            self._outstanding += 1
        self._requests.put(ticket)
        if ticket.ready.acquire(timeout=timeout):
            return True
        with self._mutex:
            if ticket.granted:
                return True
            ticket.abandoned = True
            return False

    def stop(self):
        self._requests.put(self._STOP)

    def _run(self):
        while True:
            ticket = self._requests.get()
            if ticket is self._STOP:
                os.close(self.fd)
                return
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            with self._mutex:
                self._outstanding -= 1
                if ticket.abandoned:
                    fcntl.flock(self.fd, fcntl.LOCK_UN)
                else:
                    ticket.granted = True
            ticket.ready.release()


class Database:
    def __init__(self, path, *, busy_timeout_ms=30_000, synchronous="FULL", queue_timeout_ms=None):
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        # How long a writer waits in the writer queue; SQLite's busy timeout unless told otherwise.
        self.queue_timeout_ms = busy_timeout_ms if queue_timeout_ms is None else queue_timeout_ms
        self.synchronous = synchronous
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened = []  # a _ThreadState per connection made, to close them all

    def _state(self):
        """The calling thread's connection and writer-lock descriptor, made on first use (and again
        after a fork)."""
        state = getattr(self._local, "state", None)
        if state is None or state.pid != os.getpid():
            state = _ThreadState(os.getpid(), threading.current_thread(), self._connect(),
                                 self.synchronous)
            with self._lock:
                self._close_orphans()
                self._opened.append(state)
            self._local.state = state
        return state

    def connection(self):
        """The calling thread's connection, opened on first use (and again after a fork)."""
        return self._state().conn

    def _writer_lock(self, state):
        """The thread's descriptor of the writer-queue lock file (see the module docstring)."""
        if state.lock_fd is None:
            state.lock_fd = os.open(
                os.fspath(self.path) + "-writer.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
            )
        return state.lock_fd

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
        return conn

    def _synchronous(self, state, level):
        """Set the connection's PRAGMA synchronous, when it is not already `level`."""
        if state.synchronous != level:
            state.conn.execute(f"PRAGMA synchronous = {level}")
            state.synchronous = level

    def _close_orphans(self):
        """Close the connections of this process's threads that have ended. A threaded server that
        runs each request in a new thread (`flask run`, as under `make run`) would otherwise keep one
        open connection (two file descriptors) per request served. Connections inherited from a
        parent process are left alone (never close SQLite handles across a fork)."""
        pid, kept = os.getpid(), []
        for state in self._opened:
            if state.pid == pid and not state.thread.is_alive():
                state.close()
            else:
                kept.append(state)
        self._opened = kept

    @contextmanager
    def transaction(self, *, sync_outside_lock=False):
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any exception.
        With `sync_outside_lock` (and SYNCHRONOUS=FULL, in WAL mode), the WAL is synced after the
        locks are released, before this returns (see the module docstring)."""
        state = self._state()
        conn = state.conn
        sync_after = sync_outside_lock and self.synchronous == "FULL" and state.wal
        self._synchronous(state, "NORMAL" if sync_after else self.synchronous)
        lock = self._acquire(state)
        committed = False
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
                committed = True
            except BaseException:
                # Also when COMMIT itself fails (a deferred constraint, an I/O error): a connection
                # left inside a transaction would hold SQLite's write lock for good.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
        if sync_after and committed:
            self._sync_wal(state)

    def _sync_wal(self, state):
        """fdatasync the WAL: every commit written to it so far is then on disk, this one included
        (the kernel merges concurrent syncs from other writers)."""
        if state.wal_fd is None:
            state.wal_fd = os.open(os.fspath(self.path) + "-wal", os.O_RDONLY | os.O_CLOEXEC)
        os.fdatasync(state.wal_fd)

    def _acquire(self, state):
        """Take the thread's writer-queue flock within the queue timeout (see the module
        docstring); returns its descriptor."""
        fd = self._writer_lock(state)
        if state.waiter is None or not state.waiter.busy:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                pass
        if state.waiter is None:
            state.waiter = _LockWaiter(fd)
        if not state.waiter.acquire(self.queue_timeout_ms / 1000):
            raise sqlite3.OperationalError("database is locked (writer queue)")
        return fd

    def release(self):
        """End of a request: never leave a transaction open on a reused connection."""
        state = getattr(self._local, "state", None)
        if state is not None and state.pid == os.getpid() and state.conn.in_transaction:
            state.conn.execute("ROLLBACK")

    def close_all(self):
        with self._lock:
            opened, self._opened = self._opened, []
        for state in opened:
            state.close()
        self._local = threading.local()

    def init_schema(self, script, *, reset=False):
        conn = self.connection()
        if reset:
            schema_rows.drop_all(conn)
        conn.executescript(script)

    def ping(self):
        return schema_rows.ping(self.connection())


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
