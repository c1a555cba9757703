"""The SQLite file-identity guard: which files a connection opened, by (device, inode), so that a
database file, write-ahead log or shared-memory index deleted or replaced by hand under open
connections is noticed before a commit is answered as stored (docs/operations.md, "When the
database cannot serve"; what the checks cost: bench/README.md, "Storage")."""
import os


def identity(path):
    """(st_dev, st_ino) of what `path` names now, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class OpenedFiles:
    """The files one connection opened: the database file, its write-ahead log and its
    shared-memory index (the WAL's and the index's when they existed at the open; SQLite never
    deletes them while a connection is open, so for the connection's life the path must name these
    very files). Also a descriptor of our own on the WAL, which sync_outside_lock commits sync:
    taken right after SQLite opened it, so it is the same file."""

    # What changed, as `changed()` names it, and how the reason says it.
    NAMES = {"database": "database file", "wal": "write-ahead log (-wal)",
             "shm": "shared-memory index (-shm)"}

    def __init__(self, path, database):
        self.path, self.database = path, database
        self.shm = identity(path + "-shm")
        try:
            self.wal_fd = os.open(path + "-wal", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # no WAL (a read-only connection that needed none): nothing to compare
            self.wal_fd, self.wal = None, None
        else:
            st = os.fstat(self.wal_fd)
            self.wal = st.st_dev, st.st_ino

    def changed(self):
        """None while the path names the files the connection opened; else which one it no longer
        names: "database", "wal" or "shm" (three stats at most)."""
        if identity(self.path) != self.database:
            return "database"
        if self.wal is not None and identity(self.path + "-wal") != self.wal:
            return "wal"
        if self.shm is not None and identity(self.path + "-shm") != self.shm:
            return "shm"
        return None

    def close(self):
        if self.wal_fd is not None:
            try:
                os.close(self.wal_fd)
            except OSError:
                pass
            self.wal_fd = None
