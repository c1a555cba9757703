"""One webhook delivery attempt: a POST bounded in time that never raises.

`post` vets the URL (`ssrf.check_url`) at the time of the attempt, then sends once with http.client:
- live mode connects to the vetted address (a second DNS answer cannot swap in another), while the
  Host header, TLS SNI and the certificate check use the URL's host name;
- the whole attempt, name resolution included, is bounded by `timeout`: a watchdog thread shuts
  the socket down at the deadline, so a receiver dripping bytes cannot hold a thread;
- redirects are never followed; at most 4 KiB of the response body is read, and never returned;
- a connection is kept per thread and destination (scheme, address, port, TLS name) and reused only
  for that destination; one the receiver closed meanwhile is retried once on a new connection.
Only the first vetted address is tried. Proxies, .netrc and cookies are never used.
"""
from __future__ import annotations

import http.client
import os
import socket
import ssl
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import idna

from .schedule import parse_retry_after
from .ssrf import UnsafeURL, check_url

MAX_RESPONSE_BYTES = 4096
CONNECTIONS_PER_THREAD = 16  # destinations a thread keeps a connection to (oldest closed beyond)
RESOLVER_THREADS = 4  # live-mode lookups at once: a hanging resolver ties up these, never more


@dataclass(frozen=True)
class AttemptResult:
    ok: bool                  # True only for a 2xx
    status_code: int | None   # None when no HTTP response arrived
    error: str | None         # short operator-facing reason; never response content
    duration_ms: int
    retry_after: int | None   # seconds, from Retry-After on 429/503


class Session:
    """The kept-alive connections of the threads that send with it. `verify`: True (the system's
    CAs) or the path of a CA bundle. `close()` closes every thread's connections."""

    def __init__(self, verify=True):
        self.verify = verify
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pools: list[dict] = []
        self._context = None

    def connections(self) -> dict:
        """This thread's connections by destination, least recently used first."""
        pool = getattr(self._local, "pool", None)
        if pool is None:
            pool = self._local.pool = {}
            with self._lock:
                self._pools.append(pool)
        return pool

    def tls_context(self) -> ssl.SSLContext:
        if self._context is None:  # loading the CAs takes milliseconds: once per session
            self._context = ssl.create_default_context(
                cafile=None if self.verify is True else self.verify)
        return self._context

    def close(self) -> None:
        with self._lock:
            pools, self._pools = self._pools, []
        for pool in pools:
            for conn in list(pool.values()):
                conn.close()
            pool.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


new_session = Session


def post(session: Session, url: str, body: bytes, headers: dict, *, timeout: float,
         livemode: bool, resolve=socket.getaddrinfo, clock=time.time) -> AttemptResult:
    """POST `body` to `url` once, vetted now; in live mode to the first vetted address."""
    start = time.monotonic()
    try:
        addresses = check_url(url, livemode, resolve=_bounded(resolve, start + timeout))
    except UnsafeURL as exc:
        return AttemptResult(False, None, f"unsafe url: {exc}", _ms_since(start), None)
    return send(session, url, body, headers, timeout=timeout,
                address=addresses[0] if addresses else None, clock=clock, _start=start)


def send(session: Session, url: str, body: bytes, headers: dict, *, timeout: float,
         address=None, clock=time.time, _start: float | None = None) -> AttemptResult:
    """The HTTP half of `post`, WITHOUT the SSRF check: use `post`. `address` (an ipaddress
    object) is where to connect instead of resolving the host; `clock` (unix seconds) turns a
    Retry-After date into seconds."""
    start = time.monotonic() if _start is None else _start

    def result(ok=False, status=None, error=None, retry_after=None) -> AttemptResult:
        return AttemptResult(ok, status, error, _ms_since(start), retry_after)

    try:
        target, path, host_header = _target(url, address)
    except (ValueError, UnicodeError) as exc:  # idna.IDNAError is a UnicodeError
        return result(error=f"invalid request ({type(exc).__name__})")
    watch = _watchdog.watch(start + timeout)
    pool = session.connections()
    try:
        try:
            response, conn = _request(session, pool.pop(target, None), target, path, body,
                                      {"Host": host_header, **headers}, watch, start + timeout)
        except Exception as exc:
            return result(error=_describe(exc, timeout, watch.aborted))
        status = response.status
        retry_after = None
        if status in (429, 503):
            retry_after = parse_retry_after(response.getheader("Retry-After"), clock())
        try:
            response.read(MAX_RESPONSE_BYTES)
        except (http.client.HTTPException, OSError, ValueError):
            pass  # the status already decided the attempt
        if response.isclosed() and not response.will_close and conn.sock is not None:
            pool[target] = conn  # read to its end: the connection can carry the next attempt
            if len(pool) > CONNECTIONS_PER_THREAD:
                pool.pop(next(iter(pool))).close()
        else:
            conn.close()
    finally:
        _watchdog.done(watch)

    if 200 <= status < 300:
        return result(ok=True, status=status)
    if 300 <= status < 400:
        return result(status=status, error=f"redirect {status} not followed", retry_after=retry_after)
    return result(status=status, error=f"HTTP {status}", retry_after=retry_after)


def _target(url, address):
    """((scheme, address to connect to, port, TLS name or None), path, Host header)."""
    parts = urlsplit(url)
    host, scheme = parts.hostname, parts.scheme.lower()
    if not host or scheme not in ("http", "https"):
        raise ValueError("not an absolute http(s) URL")
    name = host if host.isascii() else idna.encode(host, uts46=True).decode("ascii")
    port = parts.port or (443 if scheme == "https" else 80)
    connect_to = str(address) if address is not None else name
    shown = f"[{name}]" if ":" in name else name
    host_header = shown if parts.port is None else f"{shown}:{parts.port}"
    path = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                 safe="!#$%&'()*+,/:;=?@[]~")  # non-ASCII percent-encoded, as requests does
    return (scheme, connect_to, port, name if scheme == "https" else None), path, host_header


def _request(session, conn, target, path, body, headers, watch, deadline):
    """Send on the kept connection `conn` if any; if the receiver had closed it (it fails before
    any response), once more on a new connection. Returns (response, its connection)."""
    retry = conn is not None
    while True:
        if conn is None:
            conn = _Connection(target, session.tls_context() if target[3] else None)
        try:
            conn.timeout = max(0.001, deadline - time.monotonic())
            if conn.sock is None:
                conn.connect(watch)
            else:
                watch.add(conn.sock)
                conn.sock.settimeout(conn.timeout)
            conn.request("POST", path, body, headers)
            return conn.getresponse(), conn
        except BaseException as exc:
            conn.close()
            if not (retry and isinstance(exc, _STALE)) or watch.aborted or (
                    time.monotonic() >= deadline):
                raise
            conn, retry = None, False


# How a kept connection that the receiver has closed in the meantime fails.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _Connection(http.client.HTTPConnection):
    """A connection to `target`; TLS (SNI and certificate check for its name) when it has a
    context. The socket joins the attempt's watch as soon as it exists."""

    def __init__(self, target, context):
        _, address, port, self.tls_name = target
        super().__init__(address, port)
        self.context = context

    def connect(self, watch):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        watch.add(sock)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_hostname=self.tls_name,
                                            do_handshake_on_connect=False)
            watch.add(sock)  # the TCP socket is detached now: cut the handshake through this one
            sock.do_handshake()
        self.sock = sock


class _Watch:
    __slots__ = ("deadline", "sockets", "aborted")

    def __init__(self, deadline):
        self.deadline, self.sockets, self.aborted = deadline, [], False

    def add(self, sock):
        self.sockets.append(sock)
        if self.aborted:
            _shutdown(sock)


class _Watchdog:
    """One thread per process (started again after a fork) that shuts down, at their deadline,
    the sockets of the attempts still running, then again every TICK until they end. Starting a
    thread per attempt instead cost a tenth of a delivery's CPU."""

    TICK = 0.05

    def __init__(self):
        self._cond = threading.Condition()
        self._watches: set[_Watch] = set()
        self._started = False

    def watch(self, deadline) -> _Watch:
        watch = _Watch(deadline)
        with self._cond:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, daemon=True, name="webhook-watchdog").start()
            self._watches.add(watch)
            if len(self._watches) == 1:
                self._cond.notify()
        return watch

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
                for watch in late:
                    watch.aborted = True
                    for sock in watch.sockets:
                        _shutdown(sock)
                self._cond.wait(self.TICK)


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=_watchdog.__init__)  # the parent's thread is not in the child


def _shutdown(sock) -> None:
    try:  # socket.socket's, not SSLSocket's: the reading thread still uses the TLS object
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


def _bounded(resolve, deadline):
    """`resolve` (getaddrinfo's signature) run in a resolver thread, waited for until `deadline`
    (time.monotonic()); past it, TimeoutError, an OSError as getaddrinfo's own failures."""
    def bounded(*args, **kwargs):
        future = _resolvers().submit(resolve, *args, **kwargs)
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except futures.TimeoutError:
            future.cancel()  # if it has not started; a running lookup ends on its own
            raise TimeoutError("name resolution timed out") from None
    return bounded


_resolver_pool = {}  # pid -> executor: a forked child makes its own


def _resolvers() -> futures.ThreadPoolExecutor:
    pool = _resolver_pool.get(os.getpid())
    if pool is None:
        pool = _resolver_pool.setdefault(os.getpid(), futures.ThreadPoolExecutor(
            RESOLVER_THREADS, thread_name_prefix="webhook-dns"))
    return pool


def _describe(exc: BaseException, timeout: float, aborted: bool) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "cannot resolve host"
    if aborted or isinstance(exc, TimeoutError):
        return f"timeout after {timeout:g}s"
    if isinstance(exc, ssl.SSLError):  # ssl.SSLCertVerificationError included
        return "TLS error (certificate or handshake)"
    if isinstance(exc, (OSError, http.client.HTTPException)):
        return "connection error"
    return f"request failed ({type(exc).__name__})"


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
