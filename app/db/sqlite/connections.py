"""The SQLite backend's connections: one per process and thread (`ThreadState`), reused across
requests.

`Connections.get` gives the calling thread its connection: made on its first use and again after a
fork (SQLite handles are never used, nor closed, across one), checked by the file guard at a
request's first use (`unchanged`, file_guard.py) and made again when its files were lost. A
connection opened while the database could not be written is opened read-only by SQLite and stays
so: `writable` replaces it before a write. The connections of threads that have ended are closed
when the next one is made (a server running each request in a new thread would keep one per
request).

Opening: only init-db (`create`) may make the file; every other connection opens an existing file
(mode=rw) that carries init-db's mark (PRAGMA application_id), in WAL mode, with the database's busy
timeout and PRAGMA synchronous.
"""
import os
import pathlib
import sqlite3
import threading

from app.db.sqlite.errors import DatabaseUnavailable

# Written by init-db into the file's header (PRAGMA application_id): "PREO". A file without it was
# not made by init-db (an empty file, another program's database) and is never used.
APPLICATION_ID = 0x5052454F


class ThreadState:
    """One thread's SQLite connection and its place in the writer queue (made at its first
    write)."""

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

    def set_synchronous(self, level):
        """Set the connection's PRAGMA synchronous, when it is not already `level`."""
        if self.synchronous != level:
            self.conn.execute(f"PRAGMA synchronous = {level}")
            self.synchronous = level

    def close(self):
        """Close the connection and the writer-lock descriptor (the shared `files` are released by
        the caller: Connections._close)."""
        try:
            self.conn.close()
        except sqlite3.ProgrammingError:
            pass
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class Connections:
    """The connections of one database in this process: `abspath` and its FileGuard, both None for
    an in-memory database."""

    def __init__(self, abspath, guard, *, busy_timeout_ms, synchronous):
        self._memory, self._abspath, self._guard = abspath is None, abspath, guard
        self._busy_timeout_ms, self._synchronous = busy_timeout_ms, synchronous
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened = []  # a ThreadState per connection made, to close them all

    def get(self, create=False):
        """The calling thread's connection and writer-lock descriptor, made on first use (and again
        after a fork); once the path no longer names the file it opened, DatabaseUnavailable. Only
        `create` (init-db) may make the directory and the file."""
        state = getattr(self._local, "state", None)
        if state is not None and state.pid == os.getpid():
            if (state.verified and not create) or self.unchanged(state):
                return state
            self.drop(state)  # deleted or replaced: _connect refuses what the path holds now
        read_only = self.unwritable()
        conn, files = self._connect(create)
        state = ThreadState(os.getpid(), threading.current_thread(), conn, self._synchronous, files,
                            read_only)
        with self._lock:
            orphans = self._orphans()
            self._opened.append(state)
        for orphan in orphans:
            self._close(orphan)
        self._local.state = state
        return state

    def writable(self):
        """The thread's state, its connection replaced first if it was opened read-only (the new
        one is read-only again while the database still cannot be written)."""
        state = self.get()
        if state.read_only:
            self.drop(state)
            state = self.get()
        return state

    def current(self):
        """The calling thread's state in this process, if it has one (never made here)."""
        state = getattr(self._local, "state", None)
        return state if state is not None and state.pid == os.getpid() else None

    def unchanged(self, state):
        """Whether the paths still name the files the connection opened and this process has not
        lost them since (the file guard's check); remembered until the request ends."""
        state.verified = state.files is None or self._guard.unchanged(state.conn, state.files)
        return state.verified

    def unwritable(self):
        """Whether the file, its directory or its WAL cannot be written, as access(W_OK) sees it for
        this process's user (mode bits, a read-only mount, an immutable file)."""
        if self._memory:
            return False
        return any(os.path.exists(path) and not os.access(path, os.W_OK)
                   for path in (self._abspath, os.path.dirname(self._abspath),
                                self._abspath + "-wal"))

    def drop(self, state):
        """Close the calling thread's connection (its file was lost, or it cannot write)."""
        with self._lock:
            if state in self._opened:
                self._opened.remove(state)
        self._close(state)
        self._local.state = None

    def close_all(self):
        """Close every connection of this process, and give its flocks back (a lost process's too);
        a parent's connections inherited across a fork are forgotten, never closed."""
        with self._lock:
            opened, self._opened = self._opened, []
        for state in opened:
            if state.pid == os.getpid():
                self._close(state, force=True)
        self._local = threading.local()

    def _close(self, state, force=False):
        """Close one connection and release its share of the files (FileGuard.leave)."""
        if state.files is None:
            state.close()
        else:
            self._guard.leave(state.files, state.close, force)

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

    def _connect(self, create):
        """A new connection and the files it opened (shared with the process's other connections),
        admitted, joined and checked by the file guard."""
        if self._memory:
            return self._configure(self._open(":memory:", uri=False)), None
        if create:
            self._guard.make_file()
        else:
            self._guard.admit()
        with self._guard.joining() as files:
            conn = self._open_file(create)
            try:
                self._guard.opened(files, create)
            except BaseException:
                conn.close()
                raise
        return conn, files

    def _open_file(self, create):
        """A connection to the file that exists (mode=rw: SQLite never creates one), configured, its
        WAL open. Without `create` (init-db) the file must carry init-db's mark."""
        conn = None
        try:
            conn = self._open(pathlib.Path(self._abspath).as_uri() + "?mode=rw", uri=True)
            if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID and not create:
                raise DatabaseUnavailable("the file was not made by init-db")
            self._configure(conn)
            conn.execute("PRAGMA application_id").fetchone()  # a read in WAL mode: the WAL is open
            return conn
        except BaseException as e:
            if conn is not None:
                conn.close()
            if isinstance(e, sqlite3.Error) and not isinstance(e, DatabaseUnavailable):
                raise DatabaseUnavailable(f"the database cannot be opened: {e}") from None
            raise

    def _open(self, target, *, uri):
        return sqlite3.connect(
            target,
            uri=uri,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # only close_all() touches it from another thread
            cached_statements=256,
        )

    def _configure(self, conn):
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn
