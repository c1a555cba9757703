"""One webhook delivery attempt: a POST bounded in time that never raises.

`post` vets the URL (`ssrf.check_url`) at the time of the attempt, then sends once with `requests`
(a `requests.Session` whose adapter `new_session` mounts):
- it connects to the vetted address (a second DNS answer cannot swap in another), while the Host
  header, TLS SNI and the certificate check use the URL's host name;
- the whole attempt, name resolution included, is bounded by `timeout`: a watchdog thread shuts
  the socket down at the deadline, so a receiver dripping bytes cannot hold a thread;
- redirects are never followed; at most 4 KiB of the response body is read, never decoded or
  returned;
- connections are kept alive in pools keyed by destination (scheme, address, port, TLS name), so a
  kept connection only carries an attempt to the very address vetted for it.
The vetted addresses are tried in the resolver's order, the next one only when the previous one
refused the connection (nothing was sent: `localhost` resolving to ::1 first while the receiver
listens on 127.0.0.1). Proxies, .netrc and cookies are never used.
"""
from __future__ import annotations

import http.client
import os
import socket
import threading
import time
from concurrent import futures
from dataclasses import dataclass

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util import parse_url

from .schedule import parse_retry_after
from .ssrf import UnsafeURL, check_url

MAX_RESPONSE_BYTES = 4096
DESTINATIONS = 16  # destinations kept connected (least recently used closed beyond)
CONNECTIONS_PER_DESTINATION = 32  # idle connections kept per destination: one per worker thread
RESOLVER_THREADS = 4  # lookups at once: a hanging resolver ties up these, never more
REFUSED = "connection refused"


@dataclass(frozen=True)
class AttemptResult:
    ok: bool                  # True only for a 2xx
    status_code: int | None   # None when no HTTP response arrived
    error: str | None         # short operator-facing reason; never response content
    duration_ms: int
    retry_after: int | None   # seconds, from Retry-After on 429/503


def new_session() -> requests.Session:
    """A session for `post`: its `verify` (True or a CA bundle's path) and `cert` are used, its
    adapter keeps the connections; `close()` closes them. Nothing comes from the environment."""
    session = requests.Session()
    session.trust_env = False
    adapter = _PinningAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def post(session: requests.Session, url: str, body: bytes, headers: dict, *, timeout: float,
         livemode: bool, allow_loopback: bool, resolve=socket.getaddrinfo,
         clock=time.time) -> AttemptResult:
    """POST `body` to `url` once, vetted now (`allow_loopback`: WEBHOOK_ALLOW_LOOPBACK), to the
    first vetted address. A refused URL is an attempt that never connected: what it reports says
    nothing of the address's ports (open, closed or silent)."""
    start = time.monotonic()
    try:
        addresses = check_url(url, livemode, allow_loopback=allow_loopback,
                              resolve=_bounded(resolve, start + timeout))
    except UnsafeURL as exc:
        return AttemptResult(False, None, f"unsafe url: {exc}", _ms_since(start), None)
    for address in addresses:
        result = send(session, url, body, headers, timeout=timeout, address=address, clock=clock,
                      _start=start)
        if result.error != REFUSED or time.monotonic() >= start + timeout:
            break
    return result


def bounded_resolver(seconds, resolve=socket.getaddrinfo):
    """`resolve` (getaddrinfo's signature) given `seconds` from now to answer (see `_bounded`):
    for checking a URL while a person waits for the page."""
    return _bounded(resolve, time.monotonic() + seconds)


def send(session: requests.Session, url: str, body: bytes, headers: dict, *, timeout: float,
         address=None, clock=time.time, _start: float | None = None) -> AttemptResult:
    """The HTTP half of `post`, WITHOUT the SSRF check: use `post`. `address` (an ipaddress
    object) is where to connect instead of resolving the host; `clock` (unix seconds) turns a
    Retry-After date into seconds."""
    start = time.monotonic() if _start is None else _start

    def result(ok=False, status=None, error=None, retry_after=None) -> AttemptResult:
        return AttemptResult(ok, status, error, _ms_since(start), retry_after)

    request = requests.PreparedRequest()  # no cookies, auth or hooks: only what is given
    try:
        request.prepare_method("POST")
        request.prepare_url(url, None)  # IDNA host name, non-ASCII path percent-encoded
        target = parse_url(request.url)
        request.prepare_headers({"Host": target.netloc.rpartition("@")[2], **headers})
        request.prepare_body(body, None)
    except (requests.RequestException, ValueError) as exc:  # UnicodeError is a ValueError
        return result(error=f"invalid request ({type(exc).__name__})")
    request.pin = None if address is None else (str(address), target.host.strip("[]"))
    watch = _local.watch = _watchdog.watch(start + timeout)
    try:
        response = _send(session, request, watch)
        status = response.status_code
        retry_after = None
        if status in (429, 503):
            retry_after = parse_retry_after(response.headers.get("Retry-After"), clock())
        try:  # a body read to its end gives the connection back to the pool for the next attempt
            response.raw.read(MAX_RESPONSE_BYTES, decode_content=False)
        except Exception:
            pass  # the status already decided the attempt
        finally:
            response.close()  # a body not read to its end: the connection is closed
    except Exception as exc:
        return result(error=_describe(exc, timeout, watch.aborted))
    finally:
        _local.watch = None
        _watchdog.done(watch)

    if 200 <= status < 300:
        return result(ok=True, status=status)
    if 300 <= status < 400:
        return result(status=status, error=f"redirect {status} not followed", retry_after=retry_after)
    return result(status=status, error=f"HTTP {status}", retry_after=retry_after)


def _send(session, request, watch):
    """Send on a kept connection if there is one; if the receiver had closed it (it fails before
    any response and no new connection was made), once more on a new one, within the deadline."""
    adapter = session.get_adapter(request.url)
    while True:
        left = max(0.001, watch.deadline - time.monotonic())  # urllib3 refuses a timeout <= 0
        try:
            return adapter.send(request, stream=True, timeout=(left, left), verify=session.verify,
                                cert=session.cert)
        except requests.ConnectionError as exc:
            if watch.connected or watch.aborted or time.monotonic() >= watch.deadline or not any(
                    isinstance(e, _STALE) for e in _causes(exc)):
                raise
            watch.connected = True  # once more only: the pool makes a new connection now


# How a kept connection that the receiver has closed in the meantime fails.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _PinningAdapter(HTTPAdapter):
    """No retries; a request with a `pin` (address, host name) connects to that address, and over
    TLS sends SNI for, and checks the certificate against, the host name. Both are part of the
    pool's key, so a pool's connections only go where it was vetted to."""

    def __init__(self):
        super().__init__(pool_connections=DESTINATIONS, pool_maxsize=CONNECTIONS_PER_DESTINATION,
                         max_retries=0)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert)
        if getattr(request, "pin", None):
            host_params["host"], name = request.pin
            if host_params["scheme"] == "https":
                pool_kwargs["server_hostname"] = pool_kwargs["assert_hostname"] = name
        return host_params, pool_kwargs


class _Watched:
    """A connection that hands its socket, right before each request is sent on it (new or kept),
    to the attempt's watch (this thread's). It extends two public methods of urllib3's connections,
    `connect` and `request`. The TLS handshake needs no watch: Python's ssl bounds a whole handshake
    by the socket's timeout, the time left to the attempt."""

    _fresh = False  # connected since the last request

    def connect(self):
        super().connect()
        self._fresh = True

    def request(self, *args, **kwargs):
        if self.is_closed:  # plain HTTP (HTTPS pools connect first): now rather than inside
            self.connect()
        watch = getattr(_local, "watch", None)
        if watch is not None:
            watch.connected |= self._fresh
            watch.add(self.sock)
        self._fresh = False
        return super().request(*args, **kwargs)


class _HTTPConnection(_Watched, HTTPConnection):
    pass


class _HTTPSConnection(_Watched, HTTPSConnection):
    pass


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


_local = threading.local()  # .watch: the attempt this thread is making


class _Watch:
    __slots__ = ("deadline", "sockets", "aborted", "connected")

    def __init__(self, deadline):
        self.deadline, self.sockets, self.aborted, self.connected = deadline, [], False, False

    def add(self, sock):
        self.sockets.append(sock)
        if self.aborted:
            _shutdown(sock)


class _Watchdog:
    """One thread per process (started again after a fork) that shuts down, at their deadline,
    the sockets of the attempts still running, then again every TICK until they end (one thread
    for all attempts: a thread started per attempt costs each delivery far more)."""

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


def _causes(exc) -> list[BaseException]:
    """`exc` and what it wraps: requests and urllib3 wrap the socket's error (reason, args,
    __cause__)."""
    causes = []
    while isinstance(exc, BaseException) and exc not in causes and len(causes) < 10:
        causes.append(exc)
        exc = getattr(exc, "reason", None) or exc.__cause__ or exc.__context__ or (
            exc.args[0] if exc.args else None)
    return causes


def _describe(exc: BaseException, timeout: float, aborted: bool) -> str:
    causes = _causes(exc)
    if any(isinstance(e, ConnectionRefusedError) for e in causes):
        return REFUSED
    if any(isinstance(e, socket.gaierror) for e in causes):
        return "cannot resolve host"
    if aborted or any(isinstance(e, (TimeoutError, requests.Timeout)) for e in causes):
        return f"timeout after {timeout:g}s"
    if any(isinstance(e, requests.exceptions.SSLError) for e in causes):
        return "TLS error (certificate or handshake)"
    if any(isinstance(e, (OSError, requests.ConnectionError)) for e in causes):
        return "connection error"
    return f"request failed ({type(causes[0]).__name__})"


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)
