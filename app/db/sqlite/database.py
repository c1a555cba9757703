"""The SQLite backend's `Database` (interface.py): reads on the calling thread's connection
(connections.py), writes in `transaction()`, /healthz's `check()`, init-db's `init_schema()`.

A write: the connection's place in the writer queue (writer_queue.py), so concurrent writers queue
instead of failing half-way (the busy timeout bounds the wait); BEGIN IMMEDIATE; the caller's
statements; the file guard's check (file_guard.py); COMMIT; the guard's check again.

`transaction(sync_outside_lock=True)`, under SYNCHRONOUS=FULL: the commit is made at NORMAL (the WAL
written, not synced), the locks are released, and the WAL is then fdatasynced before the call
returns. The caller goes on only once its commit is on disk, as under FULL, while the next writer
already runs; other connections can read the commit during that sync, so it is for writes nobody
can act on before the caller answers (a new preorder). The WAL is append-only until a checkpoint,
which NORMAL syncs first, so syncing it syncs every commit before.
"""
import atexit
import os
import sqlite3
import weakref
from contextlib import contextmanager

from app.data import migrate
from app.data import schema as schema_rows
from app.db.health import WriteFailures, probe_space
from app.db.sqlite.connections import APPLICATION_ID, Connections
from app.db.sqlite.errors import DatabaseUnavailable, is_lasting, is_unavailable
from app.db.sqlite.file_guard import FileGuard
from app.db.sqlite.writer_queue import WriterLock


class SqliteDatabase:
    dialect = "sqlite"
    errors = (sqlite3.Error,)
    is_unavailable = staticmethod(is_unavailable)

    def __init__(self, path, *, busy_timeout_ms=30_000, synchronous="FULL", queue_timeout_ms=None):
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        # How long a writer waits in the writer queue; SQLite's busy timeout unless told otherwise.
        self.queue_timeout_ms = busy_timeout_ms if queue_timeout_ms is None else queue_timeout_ms
        self.synchronous = synchronous
        self._memory = os.fspath(path) == ":memory:"
        self._abspath = None if self._memory else os.path.abspath(path)
        self._lock_path = os.fspath(path) + "-writer.lock"
        self._guard = None if self._memory else FileGuard(
            self._abspath, lock_path=self._lock_path, busy_timeout_ms=busy_timeout_ms,
            queue_timeout_ms=self.queue_timeout_ms)
        self._connections = Connections(self._abspath, self._guard, busy_timeout_ms=busy_timeout_ms,
                                        synchronous=synchronous)
        self.write_failures = WriteFailures()  # for /healthz (health.py)
        # A process that exits closes its connections before giving its flocks back
        # (file_identity.py).
        atexit.register(_close_at_exit, weakref.ref(self))

    def connection(self):
        """The calling thread's connection, opened on first use (and again after a fork)."""
        return self._connections.get().conn

    @contextmanager
    def transaction(self, *, sync_outside_lock=False):
        """A write transaction: BEGIN IMMEDIATE, COMMIT on success, ROLLBACK on any exception.
        With `sync_outside_lock` (and SYNCHRONOUS=FULL, in WAL mode), the WAL is synced after the
        locks are released, before this returns (see the module docstring)."""
        state = self._connections.writable()
        conn, files = state.conn, state.files
        sync_after = sync_outside_lock and self.synchronous == "FULL" and state.wal
        state.set_synchronous("NORMAL" if sync_after else self.synchronous)
        writer = self._acquire(state)
        loss = None
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                loss = None if files is None else self._guard.before_commit(conn, files)
                if loss is None:
                    conn.execute("COMMIT")
            except BaseException:
                # Also when COMMIT itself fails (a deferred constraint, an I/O error): a connection
                # left inside a transaction would hold SQLite's write lock for good.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            self._failed(state, e)
            raise
        finally:
            if state.writer is not None:
                writer.release()
        if loss is None:
            if sync_after:
                self._sync_wal(files)
            loss = None if files is None else self._guard.after_commit(conn, files)
        if loss is not None:  # the files are lost: this connection serves no more
            self._connections.drop(state)
            if not loss.stored:
                raise DatabaseUnavailable(loss.reason)
        self.write_failures.succeeded()

    @contextmanager
    def snapshot(self):
        """A read-only transaction on the calling thread's connection: every read of the block sees
        one snapshot (a deferred BEGIN: the first read takes it), and any write fails (PRAGMA
        query_only). Rolled back when the block ends."""
        conn = self.connection()
        conn.execute("PRAGMA query_only = ON")
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        finally:
            conn.execute("PRAGMA query_only = OFF")

    def _acquire(self, state):
        """The thread's place in the writer queue, taken within the queue timeout."""
        if state.writer is None:
            try:
                state.writer = WriterLock(self._lock_path)
            except OSError as e:
                raise DatabaseUnavailable(
                    f"the writer lock cannot be opened: {e.strerror}") from None
        if not state.writer.acquire(self.queue_timeout_ms / 1000):
            raise DatabaseUnavailable("database is locked (writer queue)")
        return state.writer

    def _failed(self, state, error):
        """A write failed. Read-only, I/O error, not a database: this connection may stay that way
        (SQLite opens a write-protected file read-only), so the next use opens a new one, which
        works as soon as the operator has repaired the file. Busy and locked are left alone."""
        if is_lasting(error):
            self.write_failures.failed(error)
            state.writer.release()
            self._connections.drop(state)

    def _sync_wal(self, files):
        """fdatasync the WAL: every commit written to it so far is then on disk, this one included
        (the kernel merges concurrent syncs from other writers)."""
        try:
            if files.wal_fd is not None:
                os.fdatasync(files.wal_fd)
            else:  # SQLite never locks the WAL file: a descriptor of our own may be closed at once
                fd = os.open(files.path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
        except OSError as e:  # the commit may not be on disk: never answered as a success
            reason = f"the write-ahead log cannot be synced: {e.strerror}"
            self.write_failures.failed(reason)
            raise DatabaseUnavailable(reason) from None

    def release(self):
        """End of a request: never leave a transaction open on a reused connection; the next
        request checks again that the path names the file the connection opened."""
        state = self._connections.current()
        if state is not None:
            state.verified = False
            if state.conn.in_transaction:
                state.conn.execute("ROLLBACK")

    def close_all(self):
        """Close every connection of this process, and give its flocks back (a lost process's too);
        a parent's connections inherited across a fork are forgotten, never closed."""
        self._connections.close_all()
        if self._guard is not None:
            self._guard.close()

    def init_schema(self, script=None, *, reset=False, monitoring_seconds=None):
        """Create the directory and the file when missing, bring the schema to the newest version in
        one transaction (app/data/migrate.py), and mark the file as made by init-db: the one way a
        database comes into being. Returns (version before, version after). `script`: a schema of
        the caller's instead (the tests of this module's machinery)."""
        conn = self._connections.get(create=True).conn
        if reset:
            schema_rows.drop_all(conn)
        if script is not None:
            conn.executescript(script)
            versions = None
        else:
            versions = migrate.upgrade(conn, monitoring_seconds=monitoring_seconds)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        return versions

    def check(self):
        """For /healthz: DatabaseUnavailable unless the path names a file init-db made and the WAL
        and index this thread's connection opened (none deleted or replaced since), that answers
        with our schema and can be written: the file, its directory and its WAL pass access(W_OK)
        for this process's user (a connection opened read-only is replaced by the next write),
        the disk gives room and no write of this process failed recently (health.py)."""
        state = self._connections.get()
        if not self._connections.unchanged(state):
            self._connections.drop(state)
            state = self._connections.get()  # DatabaseUnavailable: this process's files are gone
        schema_rows.ping(state.conn)
        if self._connections.unwritable():
            raise DatabaseUnavailable("the database cannot be written (read-only)")
        failure = None if self._memory else probe_space(os.path.dirname(self._abspath))
        failure = failure or self.write_failures.recent()
        if failure is not None:
            raise DatabaseUnavailable(failure)


def _close_at_exit(ref):
    database = ref()
    if database is not None:
        database.close_all()
