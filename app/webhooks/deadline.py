"""The deadline of one webhook delivery attempt, name resolution included: nothing a receiver or a
resolver does can hold a worker thread past it.

- `watch(deadline)`: the attempt's `Watch`, current for the calling thread while the attempt runs.
  Connections that extend `Watched` hand it their socket right before each request is sent on them;
  one watchdog thread per process shuts those sockets down at the deadline, then again every TICK
  until the attempt ends (a receiver dripping bytes cannot hold a thread). One thread for all
  attempts: a thread started per attempt costs each delivery far more.
- `bounded(resolve, deadline)`: a getaddrinfo run in a small pool of resolver threads and waited for
  until the deadline; a hanging resolver ties up those threads, never more.
"""
from __future__ import annotations

import os
import socket
import threading
import time
from concurrent import futures

RESOLVER_THREADS = 4  # lookups at once
TICK = 0.05  # how often the watchdog looks again at attempts past their deadline

_local = threading.local()  # .watch: the attempt this thread is making


class Watch:
    """One attempt as its connections see it: its deadline (time.monotonic()), its sockets, whether
    the watchdog has aborted it, whether a new connection was made for it. A context manager: the
    calling thread's current watch inside the block, forgotten by the watchdog after."""

    __slots__ = ("deadline", "sockets", "aborted", "connected")

    def __init__(self, deadline):
        self.deadline, self.sockets, self.aborted, self.connected = deadline, [], False, False

    def add(self, sock):
        self.sockets.append(sock)
        if self.aborted:
            _shutdown(sock)

    def __enter__(self):
        _local.watch = self
        return self

    def __exit__(self, *exc):
        _local.watch = None
        _watchdog.done(self)


def watch(deadline) -> Watch:
    """A watch on the sockets of an attempt that must end by `deadline` (time.monotonic())."""
    return _watchdog.watch(deadline)


class Watched:
    """A connection mixin (urllib3's connections, pinning.py) that hands its socket, right before
    each request is sent on it (new or kept), to the calling thread's watch. It extends two public
    methods of urllib3's connections, `connect` and `request`. The TLS handshake needs no watch:
    Python's ssl bounds a whole handshake by the socket's timeout, the time left to the attempt."""

    _fresh = False  # connected since the last request

    def connect(self):
        super().connect()
        self._fresh = True

    def request(self, *args, **kwargs):
        if self.is_closed:  # plain HTTP (HTTPS pools connect first): now rather than inside
            self.connect()
        current = getattr(_local, "watch", None)
        if current is not None:
            current.connected |= self._fresh
            current.add(self.sock)
        self._fresh = False
        return super().request(*args, **kwargs)


class _Watchdog:
    """One thread per process (started again after a fork) that shuts down, at their deadline, the
    sockets of the attempts still running, then again every TICK until they end."""

    def __init__(self):
        self._cond = threading.Condition()
        self._watches: set[Watch] = set()
        self._started = False

    def watch(self, deadline) -> Watch:
        new = Watch(deadline)
        with self._cond:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, daemon=True, name="webhook-watchdog").start()
            self._watches.add(new)
            if len(self._watches) == 1:
                self._cond.notify()
        return new

    def done(self, watch) -> None:
        with self._cond:
            self._watches.discard(watch)

    def _run(self):
        while True:
            with self._cond:
                while not self._watches:
                    self._cond.wait()
                now = time.monotonic()
                late = [w for w in self._watches if w.deadline <= now]
                for late_watch in late:
                    late_watch.aborted = True
                    for sock in late_watch.sockets:
                        _shutdown(sock)
                self._cond.wait(TICK)


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=_watchdog.__init__)  # the parent's thread is not in the child


def _shutdown(sock) -> None:
    try:  # socket.socket's, not SSLSocket's: the reading thread still uses the TLS object
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def bounded(resolve, deadline):
    """`resolve` (getaddrinfo's signature) run in a resolver thread, waited for until `deadline`
    (time.monotonic()); past it, TimeoutError, an OSError as getaddrinfo's own failures."""
    def bounded_resolve(*args, **kwargs):
        future = _resolvers().submit(resolve, *args, **kwargs)
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except futures.TimeoutError:
            future.cancel()  # if it has not started; a running lookup ends on its own
            raise TimeoutError("name resolution timed out") from None
    return bounded_resolve


_resolver_pool = {}  # pid -> executor: a forked child makes its own


def _resolvers() -> futures.ThreadPoolExecutor:
    pool = _resolver_pool.get(os.getpid())
    if pool is None:
        pool = _resolver_pool.setdefault(os.getpid(), futures.ThreadPoolExecutor(
            RESOLVER_THREADS, thread_name_prefix="webhook-dns"))
    return pool
