"""The SQLite writer queue: a connection takes an exclusive flock(2) on `<database>-writer.lock`
before BEGIN IMMEDIATE, so writers wait in the kernel and the next one is woken the moment the lock
is released, instead of SQLite's busy handler polling the write lock by sleeping (why it pays:
bench/README.md, "Storage"). Writers that do not take the flock (an sqlite3 shell, another program)
are still covered by SQLite's busy timeout; a crashed holder's flock is released by the kernel.

The blocking flock runs in a small helper thread per connection (`_LockWaiter`), so the caller's
wait stays bounded: past its timeout the writer gives up, as SQLite's own wait would.
"""
import fcntl
import os
import queue
import threading


class WriterLock:
    """One connection's descriptor of the writer-queue lock file (opened, and made when missing,
    by the constructor: OSError if it cannot be)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._waiter = None  # made when the lock is first found held

    def acquire(self, timeout):
        """Take the lock within `timeout` seconds; whether it was taken."""
        if self._waiter is None or not self._waiter.busy:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                pass
        if self._waiter is None:
            self._waiter = _LockWaiter(self.fd)
        return self._waiter.acquire(timeout)

    def release(self):
        fcntl.flock(self.fd, fcntl.LOCK_UN)

    def close(self):
        if self._waiter is not None:
            self._waiter.stop()  # it closes the descriptor once it is no longer waiting on it
            self._waiter = None
        else:
            try:
                os.close(self.fd)
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
