"""Whether the database can take a write, for /healthz, without writing to the database on each
probe.

Two signals, used by both backends' `check()` (docs/operations.md, "/healthz"):
- `WriteFailures`: this process's last write transaction that failed because the database could not
  store it (a full disk, an I/O error), reported until a later write of the process succeeds or
  REMEMBERED_SECONDS have passed (a node taken out of rotation gets no writes to clear it).
- `probe_space(directory)` (SQLite): writes PROBE_BYTES into an unnamed file on the file system that
  holds the database, as this process's user, never synced and gone on close: the file system must
  find room for them as it must for a commit. A full disk, a full quota or a read-only mount refuse
  it, whichever worker answers the probe.
"""
import errno
import os
import tempfile
import time

REMEMBERED_SECONDS = 30
# A preorder's commit appends a few pages to the WAL: a disk that cannot give 64 KiB is full for us.
PROBE_BYTES = 64 * 1024
_ZEROS = bytes(PROBE_BYTES)


class WriteFailures:
    """The last write failure of this process (reason, monotonic time), cleared by a write that
    succeeds."""

    def __init__(self):
        self._last = None

    def failed(self, reason):
        self._last = (time.monotonic(), str(reason))

    def succeeded(self):
        if self._last is not None:
            self._last = None

    def recent(self):
        """'a write failed N s ago: reason', while the last failure is recent; else None."""
        last = self._last
        if last is None:
            return None
        age = time.monotonic() - last[0]
        if age > REMEMBERED_SECONDS:
            return None
        return f"a write failed {age:.0f} s ago: {last[1]}"


def probe_space(directory):
    """None when `directory`'s file system takes PROBE_BYTES from this process; else the reason it
    does not. Nothing reaches the disk and nothing stays behind (O_TMPFILE; a named file, unlinked
    at once, where the file system has no unnamed files). A write rather than posix_fallocate: it is
    what a commit does, file systems that allocate late (ext4, XFS) still reserve the room at write
    time, and it is far cheaper than allocating blocks at once on ext4."""
    try:
        try:
            fd = os.open(directory, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            fd, name = tempfile.mkstemp(prefix=".healthz-", dir=directory)
            os.unlink(name)
        try:
            left = memoryview(_ZEROS)
            while left:  # a short write is followed by one that raises ENOSPC
                left = left[os.write(fd, left):]
        finally:
            os.close(fd)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return f"the disk holding the database is full ({e.strerror})"
        return f"the database's directory cannot be written ({e.strerror})"
    return None
