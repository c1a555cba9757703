"""The file guard: which database file, write-ahead log (-wal) and shared-memory index (-shm) this
process serves, and what it does when a path stops naming them (deleted or replaced by hand).

One `FileGuard` per database file in a process; the database and its connections call it at these
moments, and nowhere else:
- `make_file` (init-db only) or `admit` (every other connection), before a connection opens: only a
  file init-db made and marked is used, and only the one this process first opened (it is pinned:
  a file put in its place later is served by processes started after it).
- `joining`, around opening a connection: under the join lock (the writer queue's lock file) the
  process's first connection joins the files under shared flocks (file_identity.py: a process never
  joins a mix of old and new files); `opened` checks the new connection against them and pins.
- `unchanged`, at a request's first use of a connection; `before_commit` and `after_commit`, around
  each COMMIT: are the paths still naming the files the connection opened?
- `leave`, when a connection closes: the last one gives the flocks back under the join lock.
When a file is lost, the commits still only in the WAL the connection reads are checkpointed into
the database file it reads (`_lose`), and the process refuses (503) until restarted, keeping its
flocks so that no process joins the new files meanwhile. See docs/operations.md.
"""
import logging
import os
import sqlite3
import time
from contextlib import contextmanager
from typing import NamedTuple

from app.db.sqlite import file_identity
from app.db.sqlite.errors import DatabaseUnavailable
from app.db.sqlite.file_identity import NAMES, FilesInUse, OpenedFiles, identity
from app.db.sqlite.writer_queue import WriterLock

log = logging.getLogger(__name__)


class Loss(NamedTuple):
    """What `before_commit` or `after_commit` found: a file lost, why the process now refuses, and
    whether the commit at hand is nonetheless stored in the database the service reads."""
    reason: str
    stored: bool


class FileGuard:
    """The files one database's connections in this process use: pinned, joined, checked, rescued
    (see the module docstring). Shared by the process's threads; a forked child starts afresh."""

    def __init__(self, path, *, lock_path, busy_timeout_ms, queue_timeout_ms):
        self.path = path  # absolute
        self._lock_path = lock_path  # the writer queue's lock file, also the join lock
        self._busy_timeout_ms, self._queue_timeout_ms = busy_timeout_ms, queue_timeout_ms
        # (pid, (st_dev, st_ino), descriptor) of the file this process first opened: the process
        # serves that file only, until init-db (make_file) makes another one. A file put in its
        # place later (a restore) is served by processes started after it, never mixed with open
        # connections. The descriptor stays open so the file system cannot give a new file the
        # deleted one's inode number (which would pass for the same file).
        self._pinned = None
        # (pid, reason) once a connection of this process found a file deleted or replaced (_lose):
        # the process then refuses until restarted (or init-db in it).
        self._lost = None

    @property
    def lost_reason(self):
        """Why this process refuses, once it lost its files; else None."""
        lost = self._lost
        return lost[1] if lost is not None and lost[0] == os.getpid() else None

    def make_file(self):
        """init-db: make the directory and an empty file when missing (never beside a WAL that
        processes of the service still use), and forget a loss: the process serves the new file."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        reason = None if identity(self.path) else file_identity.missing_reason(self.path)
        if reason not in (None, file_identity.MISSING):  # a WAL in use beside: no new file there
            raise DatabaseUnavailable(reason)
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644))
        self._lost = None

    def admit(self):
        """Before a connection opens: DatabaseUnavailable once this process lost its files, when
        there is no file, or when it is not the one this process serves (pinned)."""
        if (reason := self.lost_reason) is not None:
            raise DatabaseUnavailable(reason)
        now = identity(self.path)
        if now is None:
            raise DatabaseUnavailable(file_identity.missing_reason(self.path))
        pinned = self._pinned
        if pinned is not None and pinned[0] == os.getpid() and pinned[1] != now:
            raise DatabaseUnavailable(
                "the database file was deleted or replaced since this process opened it"
                " (restart it)"
            )

    @contextmanager
    def joining(self):
        """Around opening one connection, under the join lock: yields this process's files for what
        the path names now (joined now if it has none, given back if the opening fails); counted
        as one connection more once the block succeeds."""
        with self._join_lock():
            before = identity(self.path)
            if before is None:
                raise DatabaseUnavailable(file_identity.missing_reason(self.path))
            files = OpenedFiles.joined(self.path, before)
            joining = files is None
            if joining:
                try:
                    files = OpenedFiles.join(self.path)
                except FilesInUse as e:
                    raise DatabaseUnavailable(str(e)) from None
            try:
                if files.database != before:
                    raise DatabaseUnavailable("the database file was replaced while it was opened")
                yield files
            except BaseException:
                if joining:
                    files.close()
                raise
            files.acquire()

    def opened(self, files, create):
        """Inside `joining`, once SQLite has opened a connection and its WAL: flock the WAL and
        index SQLite made, check that the paths still name the files, and pin the database file
        (again after init-db made one: `create`)."""
        files.complete()
        changed = files.changed()
        if changed is not None:
            raise DatabaseUnavailable(
                f"{NAMES[changed]} was deleted or replaced while it was opened")
        pinned = self._pinned
        if create or pinned is None or pinned[0] != os.getpid():
            self._pin(files.database)

    def _pin(self, database):
        """Make `database` ((device, inode)) the file this process serves, holding a descriptor on
        it."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise DatabaseUnavailable(f"the database cannot be opened: {e.strerror}") from None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != database:
            os.close(fd)
            raise DatabaseUnavailable("the database file was replaced while it was opened")
        old, self._pinned = self._pinned, (os.getpid(), database, fd)
        if old is not None and old[0] == os.getpid():
            os.close(old[2])

    def unchanged(self, conn, files):
        """At a request's first use of `conn`: whether the paths still name the files it opened and
        this process has not lost them since (through another connection). Lost files are rescued
        first (_lose), while this connection can still read them."""
        changed = files.changed()
        lost = self.lost_reason is not None
        if changed is not None and not lost:
            self._lose(conn, files, changed)
        return changed is None and not lost

    def before_commit(self, conn, files):
        """Under the write lock, just before COMMIT: None while the paths name the files `conn`
        opened. A WAL or index deleted or replaced by hand must never take another commit (a
        connection opened later would not see it), and a deleted database file is not worth
        writing to: the transaction is rolled back, the commits before it rescued, and the Loss
        returned (a 503)."""
        changed = files.changed()
        if changed is None:
            return None
        conn.execute("ROLLBACK")
        self._lose(conn, files, changed)  # the writer lock held: no writer of ours meanwhile
        return Loss(self._lost[1], stored=False)

    def after_commit(self, conn, files):
        """After COMMIT (and the WAL's sync): None while the paths still name the files the commit
        went to. A directory removed or a file replaced meanwhile: the rows went to a file nobody
        will read again. A WAL deleted between `before_commit` and COMMIT: this commit is in it,
        and is stored once _lose has copied it into the database file. A lost index: this commit
        is in the WAL at the path, synced; the rescue is for the rest. A lost database file: the
        commit is in the file that was deleted or moved away."""
        changed = files.changed()
        if changed is None:
            return None
        saved = self._lose(conn, files, changed)
        return Loss(self._lost[1], stored=saved and changed != "database" or changed == "shm")

    def _lose(self, conn, files, what):
        """The database file, WAL or index `conn` uses is no longer the one at the path. Its commits
        since the last checkpoint may live only in the WAL it still reads: a checkpoint through it
        copies them into the database file it reads (synced), before a kill or a restart drops
        them, and empties that WAL, so a restart never applies it to another file. A replaced WAL,
        once every commit is saved, is moved aside (`-wal.replaced`): a restart would apply its
        older copies of pages over newer ones. From now on this process refuses (503, with the
        reason) until restarted, and keeps its flocks, so no process joins the new files meanwhile
        (file_identity.py). Another process doing the same at once makes SQLite answer busy: tried
        again for the busy timeout. Returns whether every commit is now in the database file the
        connection reads."""
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        target = "the file it had open" if what == "database" else "the database file"
        try:
            while (busy := conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]) \
                    and time.monotonic() < deadline:
                time.sleep(0.01)
            saved = not busy
            outcome = (f"its commits were copied into {target}" if saved else
                       f"its commits could not all be copied into {target} (busy)")
        except sqlite3.Error as e:
            saved, outcome = False, f"copying its commits into {target} failed ({e})"
        if saved and what == "wal":
            _move_aside(self.path + "-wal", files.ids["wal"])
        files.lost = True
        reason = (f"{NAMES[what]} was deleted or replaced while in use; {outcome};"
                  " restart the service")
        log.error("%s", reason)
        self._lost = (os.getpid(), reason)
        return saved

    def leave(self, files, close, force=False):
        """Close one connection to `files` (`close()`) and give its share of the files back. The
        process's last connection closes under the join lock: SQLite's close of the last connection
        to a database may delete its WAL and index, and a process joining meanwhile must not see the
        flocks of files that are going away (file_identity.py). `force`: the process is closing
        everything, its flocks are given back even once lost."""
        if not files.last(force):
            close()
            files.release(force)
            return
        with self._join_lock(required=False):
            close()
            files.release(force)

    def close(self):
        """Let go of the pinned file (the process's connections are closed)."""
        pinned, self._pinned = self._pinned, None
        if pinned is not None and pinned[0] == os.getpid():
            os.close(pinned[2])

    @contextmanager
    def _join_lock(self, required=True):
        """The writer-queue lock, held while a process joins the files or leaves them: joiners and
        leavers go one at a time (and never while a write commits). `required`: past the queue
        timeout, DatabaseUnavailable; else go on without it. A lock file that cannot be opened
        (a read-only directory where none was made) is gone without: nobody can write then."""
        try:
            lock = WriterLock(self._lock_path)
        except OSError:
            yield
            return
        try:
            if not lock.acquire(self._queue_timeout_ms / 1000) and required:
                raise DatabaseUnavailable("database is locked (writer queue)")
            yield
        finally:
            lock.close()


def _move_aside(path, ours):
    """Rename what `path` names to path + ".replaced" unless it is the file `ours` (or none)."""
    now = identity(path)
    if now is not None and now != ours:
        try:
            os.replace(path, path + ".replaced")
        except OSError as e:
            log.error("the replaced %s could not be moved aside: %s", path, e.strerror)
