"""The SQLite file-identity guard: which files this process has open, by (device, inode), so that a
database file, write-ahead log or shared-memory index deleted or replaced by hand under the service
is noticed before a commit is answered as stored, by the processes that had the old files open and
by those that start after (docs/operations.md, "When the database cannot serve"; what the checks
cost: bench/README.md, "Storage").

`OpenedFiles`: one per database file per process, shared by the process's connections. It holds a
descriptor on the database file, its WAL and its index, each under a shared flock(2): while any
process of the service has connections, the files it uses carry its flock. A process joining
(`OpenedFiles.join`, its first connection) tries an exclusive flock on what the paths name now: the
database file flocked by others but a WAL or an index not (a new one, made after a deletion), or
the reverse, means the paths no longer name the files the others use, and the joiner refuses rather
than writing into files that the others' checkpoints would wipe out (docs/operations.md).
flock(2) locks never meet SQLite's own fcntl(2) locks. A descriptor of ours on a file SQLite locks
is closed only once this process has no SQLite connection left to it (closing any descriptor of a
file drops the process's fcntl locks on it).
"""
import errno
import fcntl
import os
import threading

# The files, as `changed()` names them: their suffix, and how a reason says them.
SUFFIXES = {"database": "", "wal": "-wal", "shm": "-shm"}
NAMES = {"database": "the database file", "wal": "the database's write-ahead log (-wal)",
         "shm": "the database's shared-memory index (-shm)"}


def identity(path):
    """(st_dev, st_ino) of what `path` names now, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


MISSING = "the database file does not exist (run init-db)"
DELETED = ("the database file was deleted or replaced while in use (the service's other processes"
           " still have it open); restart the service")


class FilesInUse(Exception):
    """The paths do not name the files the service's other processes have open; str() says which."""


def _open(path):
    """A read-only descriptor of `path`, or None when there is no such file."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None


def _held_by_others(fd):
    """Whether another open file description holds a flock on `fd`'s file; on return `fd` holds a
    shared one (an exclusive flock taken to find out is turned into a shared one)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = False
    except OSError as e:
        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise
        held = True
    # only a joiner (one at a time, under the join lock) takes LOCK_EX
    fcntl.flock(fd, fcntl.LOCK_SH)
    return held


_joined = {}  # (pid, st_dev, st_ino of the database file) -> OpenedFiles of this process
_guard = threading.Lock()  # _joined and every OpenedFiles.refs, across this process's threads


def missing_reason(path):
    """Why there is no database file at `path`: never made (MISSING), or deleted while processes of
    the service still use it (DELETED: its WAL or index, still at their paths, are under their
    flocks, or this process's own)."""
    companions = [identity(path + suffix) for suffix in ("-wal", "-shm")]
    if not any(companions):
        return MISSING
    pid = os.getpid()
    if any(key[0] == pid and set(companions) & {files.ids["wal"], files.ids["shm"]}
           for key, files in _joined.items()):
        return DELETED  # never test our own: closing a descriptor would drop SQLite's locks
    try:
        OpenedFiles.join(path)  # raises: there is no database file
    except FilesInUse as e:
        return str(e)
    return MISSING


class OpenedFiles:
    """The database file, WAL and index this process's connections use, each with its descriptor
    (under a shared flock) and (device, inode). `refs`: this process's connections using them.
    `lost`: one of them was found deleted or replaced; the process then keeps its flocks until it
    exits, so that no process joins the new files while this one may still hold the old ones."""

    def __init__(self, path, fds):
        self.path, self.fds, self.refs, self.lost = path, fds, 0, False
        self.ids = {name: None for name in SUFFIXES}
        for name, fd in fds.items():
            st = os.fstat(fd)
            self.ids[name] = st.st_dev, st.st_ino

    @property
    def database(self):
        return self.ids["database"]

    @property
    def wal_fd(self):
        return self.fds.get("wal")

    @classmethod
    def joined(cls, path, database):
        """This process's OpenedFiles for the database file `database` ((device, inode)), or
        None."""
        with _guard:
            return _joined.get((os.getpid(), *database))

    @classmethod
    def join(cls, path):
        """Flock what the paths name now and check it against the other processes' flocks (the
        caller holds the join lock, see the module docstring); FilesInUse when the paths no longer
        name the files the others use. A WAL or index that does not exist yet is added by
        `complete()` once SQLite has made it."""
        fds = {}
        try:
            for name, suffix in SUFFIXES.items():
                fd = _open(path + suffix)
                if fd is not None:
                    fds[name] = fd
            held = {name: _held_by_others(fd) for name, fd in fds.items()}
            if "database" not in fds:
                raise FilesInUse(DELETED if any(held.values()) else MISSING)
            if held["database"]:
                for name in ("wal", "shm"):
                    if not held.get(name):
                        raise FilesInUse(f"{NAMES[name]} is not the one the service's other"
                                         " processes have open (deleted or replaced while in use);"
                                         " restart the service")
            elif held.get("wal") or held.get("shm"):
                raise FilesInUse("the database file is not the one the service's other processes"
                                 " have open (deleted or replaced while in use);"
                                 " restart the service")
        except BaseException:
            for fd in fds.values():
                os.close(fd)
            raise
        files = cls(path, fds)
        with _guard:
            _joined[(os.getpid(), *files.database)] = files
        return files

    def complete(self):
        """After SQLite opened the database: flock the WAL and index it made (nobody else uses them:
        `join` found none, under the join lock)."""
        for name in ("wal", "shm"):
            if name not in self.fds:
                fd = _open(self.path + SUFFIXES[name])
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_SH)
                    self.fds[name] = fd
                    st = os.fstat(fd)
                    self.ids[name] = st.st_dev, st.st_ino

    def changed(self):
        """None while the paths name the files this process uses; else which one they no longer
        name: "database", "wal" or "shm" (three stats at most). A WAL or index that this process has
        not seen is not compared (a read-only database may have none)."""
        for name, known in self.ids.items():
            if known is not None and identity(self.path + SUFFIXES[name]) != known:
                return name
        return None

    def acquire(self):
        """One connection more."""
        with _guard:
            self.refs += 1

    def last(self, force=False):
        """Whether releasing one connection now would give the flocks back."""
        with _guard:
            return self.refs <= 1 and (force or not self.lost)

    def release(self, force=False):
        """One connection fewer. The last one gives the flocks back (not once `lost`, unless
        `force`: the process is closing everything)."""
        with _guard:
            self.refs -= 1
            if self.refs > 0 or not (force or not self.lost):
                return
        self.close()

    def close(self):
        with _guard:
            key = (os.getpid(), *self.database)
            if _joined.get(key) is self:
                del _joined[key]
            fds, self.fds = self.fds, {}
        for fd in fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
