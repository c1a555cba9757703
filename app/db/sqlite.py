"""The SQLite backend: one connection per process and thread, reused across requests.

Every write runs inside `transaction()`: BEGIN IMMEDIATE, after the connection's place in the writer
queue (writer_queue.py), so concurrent writers queue instead of failing half-way; the busy timeout
bounds the wait. `transaction(sync_outside_lock=True)`, under SYNCHRONOUS=FULL: the commit is made
at NORMAL (the WAL written, not synced), the locks are released, and the WAL is then fdatasynced
before the call returns. The caller goes on only once its commit is on disk, as under FULL, while
the next writer already runs; other connections can read the commit during that sync, so it is for
writes nobody can act on before the caller answers (a new preorder). The WAL is append-only until
a checkpoint, which NORMAL syncs first, so syncing it syncs every commit before.

Only init-db (`init_schema`) creates the file and marks it (PRAGMA application_id); every other
connection opens an existing, marked file. Each connection records the files it opened
(file_identity.py) and compares them with the path's at a request's first use, before COMMIT and
after it: a database deleted or replaced is answered 503, never a success; a WAL or index lost by
hand is checkpointed into the database file through the connection that still reads it (`_lose`)
and the process refuses until restarted. See docs/operations.md.
"""
import logging
import os
import pathlib
import sqlite3
import threading
import time
from contextlib import contextmanager

from app.data import schema as schema_rows
from app.db import interface
from app.db.file_identity import OpenedFiles, identity
from app.db.health import WriteFailures, probe_space
from app.db.writer_queue import WriterLock

log = logging.getLogger(__name__)

# Written by init-db into the file's header (PRAGMA application_id): "PREO". A file without it was not
# made by init-db (an empty file, another program's database) and is never used.
APPLICATION_ID = 0x5052454F

# SQLite's primary result codes that mean the database cannot serve now, rather than a bug in a
# statement: busy/locked past the timeout, read-only, I/O error, corrupt, full, cannot open, not a
# database, locking protocol.
UNAVAILABLE_CODES = frozenset(
    getattr(sqlite3, name) for name in (
        "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_READONLY", "SQLITE_IOERR", "SQLITE_CORRUPT",
        "SQLITE_FULL", "SQLITE_CANTOPEN", "SQLITE_NOTADB", "SQLITE_PROTOCOL",
    )
)


_TRANSIENT = frozenset((sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED))


class DatabaseUnavailable(interface.DatabaseUnavailable, sqlite3.OperationalError):
    """interface.DatabaseUnavailable (a 503), raised by this backend's own checks; also an sqlite3 error
    as SQLite's own "database is locked" is, so a caller catching one catches both."""


def is_unavailable(error: BaseException) -> bool:
    """Whether an sqlite3 error says the database cannot serve now (503), not that a statement is
    wrong (a bug, 500)."""
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in UNAVAILABLE_CODES


class _ThreadState:
    """One thread's SQLite connection and its place in the writer queue (made at its first write)."""

    def __init__(self, pid, thread, conn, synchronous, files, read_only=False):
        self.pid, self.thread, self.conn, self.writer = pid, thread, conn, None
        # Opened while the database could not be written: SQLite then opens it read-only, and the
        # connection stays so after a repair; it is replaced as soon as the file can be written.
        self.read_only = read_only
        # The files the connection opened (OpenedFiles; None for ":memory:"), and whether the path
        # still named them at this request's first use (reset at the end of each request).
        self.files, self.verified = files, True
        self.synchronous = synchronous  # the connection's PRAGMA synchronous
        # Whether SQLite could put the connection in WAL mode (not for an in-memory database).
        self.wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    def close(self):
        try:
            self.conn.close()
        except sqlite3.ProgrammingError:
            pass
        if self.files is not None:
            self.files.close()
        if self.writer is not None:
            self.writer.close()
            self.writer = None


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
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened = []  # a _ThreadState per connection made, to close them all
        self._memory = os.fspath(path) == ":memory:"
        self._abspath = None if self._memory else os.path.abspath(path)
        # (pid, (st_dev, st_ino), descriptor) of the file this process first opened: the process
        # serves that file only, until init_schema (init-db) makes another one. A file put in its
        # place later (a restore) is served by processes started after it, never mixed with open
        # connections. The descriptor stays open so the file system cannot give a new file the
        # deleted one's inode number (which would pass for the same file).
        self._pinned = None
        # (pid, reason) once a connection of this process found its WAL or shared-memory index
        # deleted or replaced (_lose): the process then refuses until restarted (or init-db in it).
        self._lost = None
        self.write_failures = WriteFailures()  # for /healthz (health.py)

    def _state(self, create=False):
        """The calling thread's connection and writer-lock descriptor, made on first use (and again
        after a fork); once the path no longer names the file it opened, DatabaseUnavailable. Only
        `create` (init-db) may make the directory and the file."""
        state = getattr(self._local, "state", None)
        if state is not None and state.pid == os.getpid():
            if (state.verified and not create) or self._unchanged(state):
                return state
            self._drop(state)  # deleted or replaced: _connect refuses what the path holds now
        read_only = self._unwritable()
        conn, files = self._connect(create)
        state = _ThreadState(os.getpid(), threading.current_thread(), conn, self.synchronous, files,
                             read_only)
        with self._lock:
            self._close_orphans()
            self._opened.append(state)
        self._local.state = state
        return state

    def _unwritable(self):
        """Whether the file, its directory or its WAL cannot be written, as access(W_OK) sees it for
        this process's user (mode bits, a read-only mount, an immutable file)."""
        if self._memory:
            return False
        return any(os.path.exists(path) and not os.access(path, os.W_OK)
                   for path in (self._abspath, os.path.dirname(self._abspath), self._abspath + "-wal"))

    def _writable_state(self):
        """The thread's state, its connection replaced first if it was opened read-only (the new
        one is read-only again while the database still cannot be written)."""
        state = self._state()
        if state.read_only:
            self._drop(state)
            state = self._state()
        return state

    def _identity(self):
        return identity(self._abspath)

    def _unchanged(self, state):
        """Whether the path still names the files the connection opened (OpenedFiles.changed) and
        this process has not lost its WAL or index since (through another connection). A lost WAL
        or index is rescued first (_lose), while this connection can still read it."""
        changed = None if state.files is None else state.files.changed()
        if changed in ("wal", "shm"):
            self._lose(state, changed)
        lost = self._lost is not None and self._lost[0] == os.getpid()
        state.verified = changed is None and not lost
        return state.verified

    def _lose(self, state, what):
        """The connection's WAL or shared-memory index is no longer the one at the path (deleted or
        replaced by hand). Its commits since the last checkpoint live only in the WAL it still reads:
        a checkpoint through it copies them into the database file (synced), before a kill or a
        restart drops them. The WAL is also truncated and the index reset, so a connection opened
        later reads the database file alone. From now on this process refuses (503, with the reason)
        until restarted: its other connections still use the old files, which must never be mixed
        with new ones. Another process doing the same at once makes SQLite answer busy: tried again
        for the busy timeout. Returns whether every commit is now in the database file."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        try:
            while (busy := state.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            saved = not busy
            outcome = ("its commits were copied into the database file" if saved else
                       "its commits could not all be copied into the database file (busy)")
        except sqlite3.Error as e:
            saved, outcome = False, f"copying its commits into the database file failed ({e})"
        reason = (f"the database's {OpenedFiles.NAMES[what]} was deleted or replaced while in use;"
                  f" {outcome}; restart the service")
        log.error("%s", reason)
        self._lost = (os.getpid(), reason)
        return saved

    def _drop(self, state):
        """Close the calling thread's connection (its file was deleted or replaced)."""
        with self._lock:
            if state in self._opened:
                self._opened.remove(state)
        state.close()
        self._local.state = None

    def connection(self):
        """The calling thread's connection, opened on first use (and again after a fork)."""
        return self._state().conn

    def _connect(self, create):
        """A new connection and the (device, inode) of the file it opened. Without `create` the file
        must exist and carry init-db's mark (DatabaseUnavailable otherwise)."""
        if self._memory:
            return self._configure(self._open(":memory:", uri=False)), None
        if create:
            os.makedirs(os.path.dirname(self._abspath), exist_ok=True)
            conn = self._configure(self._open(self._abspath, uri=False))
            conn.execute("PRAGMA application_id").fetchone()  # a read: SQLite opens the WAL now
            identity = self._identity()
            self._pin(identity)
            self._lost = None
            return conn, OpenedFiles(self._abspath, identity)
        lost = self._lost
        if lost is not None and lost[0] == os.getpid():
            raise DatabaseUnavailable(lost[1])
        before = self._identity()
        if before is None:
            raise DatabaseUnavailable("the database file does not exist (run init-db)")
        pinned = self._pinned
        if pinned is not None and pinned[0] == os.getpid() and pinned[1] != before:
            raise DatabaseUnavailable(
                "the database file was deleted or replaced since this process opened it (restart it)"
            )
        try:
            # mode=rw: SQLite opens the file that exists, never creates one.
            conn = self._open(pathlib.Path(self._abspath).as_uri() + "?mode=rw", uri=True)
        except sqlite3.Error as e:
            raise DatabaseUnavailable(f"the database cannot be opened: {e}") from None
        try:
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                raise DatabaseUnavailable("the file was not made by init-db")
            self._configure(conn)
            if self._identity() != before:
                raise DatabaseUnavailable("the database file was replaced while it was opened")
            if pinned is None or pinned[0] != os.getpid():
                self._pin(before)
            files = OpenedFiles(self._abspath, before)  # the WAL is open: the mark was read
        except BaseException:
            conn.close()
            raise
        return conn, files

    def _pin(self, identity):
        """Make `identity` the file this process serves, holding a descriptor on it."""
        try:
            fd = os.open(self._abspath, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise DatabaseUnavailable(f"the database cannot be opened: {e.strerror}") from None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != identity:
            os.close(fd)
            raise DatabaseUnavailable("the database file was replaced while it was opened")
        old, self._pinned = self._pinned, (os.getpid(), identity, fd)
        if old is not None and old[0] == os.getpid():
            os.close(old[2])

    def _open(self, target, *, uri):
        return sqlite3.connect(
            target,
            uri=uri,
            timeout=self.busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # only close_all() touches it from another thread
            cached_statements=256,
        )

    def _configure(self, conn):
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
        state = self._writable_state()
        conn = state.conn
        sync_after = sync_outside_lock and self.synchronous == "FULL" and state.wal
        self._synchronous(state, "NORMAL" if sync_after else self.synchronous)
        writer = self._acquire(state)
        committed, changed = False, None
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                # Under the write lock, just before COMMIT: a WAL or index deleted or replaced by hand
                # must never take another commit (a connection opened later would not see it), and a
                # deleted database file is not worth writing to. Rolled back instead: a 503.
                changed = None if state.files is None else state.files.changed()
                if changed is None:
                    conn.execute("COMMIT")
                    committed = True
                else:
                    conn.execute("ROLLBACK")
                    if changed != "database":
                        self._lose(state, changed)  # the writer lock held: no writer of ours meanwhile
            except BaseException:
                # Also when COMMIT itself fails (a deferred constraint, an I/O error): a connection
                # left inside a transaction would hold SQLite's write lock for good.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            # Read-only, I/O error, not a database: this connection may stay that way (SQLite opens
            # a write-protected file read-only), so the next use opens a new one, which works as
            # soon as the operator has repaired the file. Busy and locked are left alone.
            if is_unavailable(e) and getattr(e, "sqlite_errorcode", 0) & 0xFF not in _TRANSIENT:
                self.write_failures.failed(e)
                writer.release()
                self._drop(state)
            raise
        finally:
            if state.writer is not None:
                writer.release()
        if changed is not None:
            self._drop(state)
            raise DatabaseUnavailable(self._lost[1] if changed != "database" else
                                      "the database file was deleted or replaced; nothing was written")
        if sync_after and committed:
            self._sync_wal(state)
        # The commit is in the files the connection opened: are they still the database's? A
        # directory removed or a file replaced meanwhile: the rows went to a file nobody will read
        # again. A WAL deleted between the check above and COMMIT: this commit is in it, and is
        # answered as a success only once _lose has copied it into the database file.
        after = None if state.files is None else state.files.changed()
        if after is not None:
            # (A lost index: this commit is in the WAL at the path, synced; the rescue is for the rest.)
            saved = after != "database" and (self._lose(state, after) or after == "shm")
            self._drop(state)
            if not saved:
                raise DatabaseUnavailable(self._lost[1] if after != "database" else
                                          "the database file was deleted or replaced; the write is lost")
        self.write_failures.succeeded()

    def _sync_wal(self, state):
        """fdatasync the WAL: every commit written to it so far is then on disk, this one included
        (the kernel merges concurrent syncs from other writers)."""
        files = state.files
        try:
            if files.wal_fd is None:
                files.wal_fd = os.open(files.path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
            os.fdatasync(files.wal_fd)
        except OSError as e:  # the commit may not be on disk: never answered as a success
            reason = f"the write-ahead log cannot be synced: {e.strerror}"
            self.write_failures.failed(reason)
            raise DatabaseUnavailable(reason) from None

    def _acquire(self, state):
        """The thread's place in the writer queue, taken within the queue timeout."""
        if state.writer is None:
            try:
                state.writer = WriterLock(os.fspath(self.path) + "-writer.lock")
            except OSError as e:
                raise DatabaseUnavailable(f"the writer lock cannot be opened: {e.strerror}") from None
        if not state.writer.acquire(self.queue_timeout_ms / 1000):
            raise DatabaseUnavailable("database is locked (writer queue)")
        return state.writer

    def release(self):
        """End of a request: never leave a transaction open on a reused connection; the next
        request checks again that the path names the file the connection opened."""
        state = getattr(self._local, "state", None)
        if state is not None and state.pid == os.getpid():
            state.verified = False
            if state.conn.in_transaction:
                state.conn.execute("ROLLBACK")

    def close_all(self):
        with self._lock:
            opened, self._opened = self._opened, []
        for state in opened:
            state.close()
        self._local = threading.local()
        pinned, self._pinned = self._pinned, None
        if pinned is not None and pinned[0] == os.getpid():
            os.close(pinned[2])

    def init_schema(self, script=None, *, reset=False):
        """Create the directory and the file when missing, bring the schema to the newest version in
        one transaction (app/data/schema.py), and mark the file as made by init-db: the one way a
        database comes into being. Returns (version before, version after). `script`: a schema of
        the caller's instead (the tests of this module's machinery)."""
        conn = self._state(create=True).conn
        if reset:
            schema_rows.drop_all(conn)
        if script is not None:
            conn.executescript(script)
            versions = None
        else:
            versions = schema_rows.upgrade(conn)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        return versions

    def check(self):
        """For /healthz: DatabaseUnavailable unless the path names a file init-db made and the WAL
        and index this thread's connection opened (none deleted or replaced since), that answers
        with our schema and can be written: the file, its directory and its WAL pass access(W_OK)
        for this process's user (a connection opened read-only is replaced by the next write), no
        the disk gives room and no write of this process failed recently (health.py)."""
        state = self._state()
        if not self._unchanged(state):
            self._drop(state)
            state = self._state()  # DatabaseUnavailable: this process's files are no longer there
        schema_rows.ping(state.conn)
        if self._unwritable():
            raise DatabaseUnavailable("the database cannot be written (read-only)")
        failure = None if self._memory else probe_space(os.path.dirname(self._abspath))
        failure = failure or self.write_failures.recent()
        if failure is not None:
            raise DatabaseUnavailable(failure)
