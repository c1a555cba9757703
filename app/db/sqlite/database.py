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
connection opens an existing, marked file. A process's connections share the record of the files
they opened (file_identity.py, under shared flocks that tell processes starting later which files
the service uses) and compare it with the paths at a request's first use, before COMMIT and after
it. A file deleted or replaced by hand: the commits still only in the WAL the connection reads are
checkpointed into the database file it reads (`_lose`), the process refuses until restarted, and so
does every process that starts while one that had the old files lives. See docs/operations.md.
"""
import atexit
import logging
import os
import pathlib
import sqlite3
import threading
import time
import weakref
from contextlib import contextmanager

from app.data import schema as schema_rows
from app.db import interface
from app.db.sqlite import file_identity
from app.db.sqlite.file_identity import NAMES, FilesInUse, OpenedFiles, identity
from app.db.health import WriteFailures, probe_space
from app.db.sqlite.writer_queue import WriterLock

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
        # The files the process's connections opened (OpenedFiles, shared; None for ":memory:"), and
        # whether the paths still named them at this request's first use (reset after each request).
        self.files, self.verified = files, True
        self.synchronous = synchronous  # the connection's PRAGMA synchronous
        # Whether SQLite could put the connection in WAL mode (not for an in-memory database).
        self.wal = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"

    def close(self):
        """Close the connection and the writer-lock descriptor (the shared `files` are released by
        the caller: SqliteDatabase._close)."""
        try:
            self.conn.close()
        except sqlite3.ProgrammingError:
            pass
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
        # A process that exits closes its connections before giving its flocks back (file_identity.py).
        atexit.register(_close_at_exit, weakref.ref(self))

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
            orphans = self._orphans()
            self._opened.append(state)
        for orphan in orphans:
            self._close(orphan)
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
        """Whether the paths still name the files the connection opened (OpenedFiles.changed) and
        this process has not lost them since (through another connection). Lost files are rescued
        first (_lose), while this connection can still read them."""
        changed = None if state.files is None else state.files.changed()
        lost = self._lost is not None and self._lost[0] == os.getpid()
        if changed is not None and not lost:
            self._lose(state, changed)
        state.verified = changed is None and not lost
        return state.verified

    def _lose(self, state, what):
        """The database file, WAL or index the connection uses is no longer the one at the path
        (deleted or replaced by hand). Its commits since the last checkpoint may live only in the
        WAL it still reads: a checkpoint through it copies them into the database file it reads
        (synced), before a kill or a restart drops them, and empties that WAL, so a restart never
        applies it to another file. A replaced WAL, once every commit is saved, is moved aside
        (`-wal.replaced`): a restart would apply its older copies of pages over newer ones. From now
        on this process refuses (503, with the reason) until restarted, and keeps its flocks, so no
        process joins the new files meanwhile (file_identity.py). Another process doing the same at
        once makes SQLite answer busy: tried again for the busy timeout. Returns whether every
        commit is now in the database file the connection reads."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        target = "the file it had open" if what == "database" else "the database file"
        try:
            while (busy := state.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            saved = not busy
            outcome = (f"its commits were copied into {target}" if saved else
                       f"its commits could not all be copied into {target} (busy)")
        except sqlite3.Error as e:
            saved, outcome = False, f"copying its commits into {target} failed ({e})"
        if saved and what == "wal":
            self._move_aside(self._abspath + "-wal", state.files.ids["wal"])
        state.files.lost = True
        reason = f"{NAMES[what]} was deleted or replaced while in use; {outcome}; restart the service"
        log.error("%s", reason)
        self._lost = (os.getpid(), reason)
        return saved

    @staticmethod
    def _move_aside(path, ours):
        """Rename what `path` names to path + ".replaced" unless it is the file `ours` (or none)."""
        now = identity(path)
        if now is not None and now != ours:
            try:
                os.replace(path, path + ".replaced")
            except OSError as e:
                log.error("the replaced %s could not be moved aside: %s", path, e.strerror)

    def _drop(self, state):
        """Close the calling thread's connection (its file was deleted or replaced)."""
        with self._lock:
            if state in self._opened:
                self._opened.remove(state)
        self._close(state)
        self._local.state = None

    def _close(self, state, force=False):
        """Close one connection and release its share of the files. The process's last connection
        closes under the join lock: SQLite's close of the last connection to a database may delete
        its WAL and index, and a process joining meanwhile must not see the flocks of files that
        are going away (file_identity.py)."""
        files = state.files
        if files is None or not files.last(force):
            state.close()
            if files is not None:
                files.release(force)
            return
        with self._join_lock(required=False):
            state.close()
            files.release(force)

    @contextmanager
    def _join_lock(self, required=True):
        """The writer-queue lock, held while a process joins the files or leaves them: joiners and
        leavers go one at a time (and never while a write commits). `required`: past the queue
        timeout, DatabaseUnavailable; else go on without it. A lock file that cannot be opened
        (a read-only directory where none was made) is gone without: nobody can write then."""
        try:
            lock = WriterLock(os.fspath(self.path) + "-writer.lock")
        except OSError:
            yield
            return
        try:
            if not lock.acquire(self.queue_timeout_ms / 1000) and required:
                raise DatabaseUnavailable("database is locked (writer queue)")
            yield
        finally:
            lock.close()

    def connection(self):
        """The calling thread's connection, opened on first use (and again after a fork)."""
        return self._state().conn

    def _connect(self, create):
        """A new connection and the files it opened (shared with the process's other connections).
        Without `create` the file must exist and carry init-db's mark (DatabaseUnavailable
        otherwise); `create` (init-db) makes the directory and an empty file first."""
        if self._memory:
            return self._configure(self._open(":memory:", uri=False)), None
        if create:
            os.makedirs(os.path.dirname(self._abspath), exist_ok=True)
            reason = None if self._identity() else file_identity.missing_reason(self._abspath)
            if reason not in (None, file_identity.MISSING):  # a WAL in use beside: no new file there
                raise DatabaseUnavailable(reason)
            os.close(os.open(self._abspath, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
            self._lost = None
        else:
            lost = self._lost
            if lost is not None and lost[0] == os.getpid():
                raise DatabaseUnavailable(lost[1])
            before = self._identity()
            if before is None:
                raise DatabaseUnavailable(file_identity.missing_reason(self._abspath))
            pinned = self._pinned
            if pinned is not None and pinned[0] == os.getpid() and pinned[1] != before:
                raise DatabaseUnavailable(
                    "the database file was deleted or replaced since this process opened it (restart it)"
                )
        with self._join_lock():
            return self._open_joined(create)

    def _open_joined(self, create):
        """_connect's work under the join lock: this process's files for what the path names (joined
        now if it has none: file_identity.py), then the connection, checked against them."""
        before = self._identity()
        if before is None:
            raise DatabaseUnavailable(file_identity.missing_reason(self._abspath))
        files = OpenedFiles.joined(self._abspath, before)
        joining = files is None
        if joining:
            try:
                files = OpenedFiles.join(self._abspath)
            except FilesInUse as e:
                raise DatabaseUnavailable(str(e)) from None
        conn = None
        try:
            if files.database != before:
                raise DatabaseUnavailable("the database file was replaced while it was opened")
            # mode=rw: SQLite opens the file that exists, never creates one.
            conn = self._open(pathlib.Path(self._abspath).as_uri() + "?mode=rw", uri=True)
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID and not create:
                raise DatabaseUnavailable("the file was not made by init-db")
            self._configure(conn)
            conn.execute("PRAGMA application_id").fetchone()  # a read in WAL mode: the WAL is open
            files.complete()
            changed = files.changed()
            if changed is not None:
                raise DatabaseUnavailable(f"{NAMES[changed]} was deleted or replaced while it was"
                                          " opened")
            pinned = self._pinned
            if create or pinned is None or pinned[0] != os.getpid():
                self._pin(before)
        except BaseException as e:
            if conn is not None:
                conn.close()
            if joining:
                files.close()
            if isinstance(e, sqlite3.Error) and not isinstance(e, DatabaseUnavailable):
                raise DatabaseUnavailable(f"the database cannot be opened: {e}") from None
            raise
        files.acquire()
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

    def _orphans(self):
        """Take the connections of this process's threads that have ended out of `_opened`, for the
        caller to close (outside `_lock`). A threaded server that runs each request in a new thread
        (`flask run`, as under `make run`) would otherwise keep one open connection per request
        served. Connections inherited from a parent process are left alone (never close SQLite
        handles across a fork)."""
        pid, kept, ended = os.getpid(), [], []
        for state in self._opened:
            (ended if state.pid == pid and not state.thread.is_alive() else kept).append(state)
        self._opened = kept
        return ended

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
            raise DatabaseUnavailable(self._lost[1])
        if sync_after and committed:
            self._sync_wal(state)
        # The commit is in the files the connection opened: are they still the database's? A
        # directory removed or a file replaced meanwhile: the rows went to a file nobody will read
        # again. A WAL deleted between the check above and COMMIT: this commit is in it, and is
        # answered as a success only once _lose has copied it into the database file.
        after = None if state.files is None else state.files.changed()
        if after is not None:
            # A lost index: this commit is in the WAL at the path, synced; the rescue is for the rest.
            # A lost database file: the commit is in the file that was deleted or moved away.
            saved = self._lose(state, after) and after != "database" or after == "shm"
            self._drop(state)
            if not saved:
                raise DatabaseUnavailable(self._lost[1])
        self.write_failures.succeeded()

    def _sync_wal(self, state):
        """fdatasync the WAL: every commit written to it so far is then on disk, this one included
        (the kernel merges concurrent syncs from other writers)."""
        files = state.files
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
        """Close every connection of this process, and give its flocks back (a lost process's too);
        a parent's connections inherited across a fork are forgotten, never closed."""
        with self._lock:
            opened, self._opened = self._opened, []
        for state in opened:
            if state.pid == os.getpid():
                self._close(state, force=True)
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


def _close_at_exit(ref):
    database = ref()
    if database is not None:
        database.close_all()
