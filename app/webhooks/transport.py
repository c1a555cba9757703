"""One webhook delivery attempt over HTTP: POST, bounded in time, never raising.

`post` is what the delivery worker calls for each attempt. It knows nothing of
the database: it gets the URL, the exact body bytes and the signed headers,
and returns an `AttemptResult` to record.

Guarantees:
- The URL is vetted by `ssrf.check_url` at the time of the attempt.
- Live mode connects to the address that was vetted (DNS-rebinding guard):
  the request goes to the vetted IP while TLS still sends SNI for, and
  verifies the certificate against, the URL's host name (see `_AttemptAdapter`).
- Redirects are never followed (a 3xx is a failed attempt).
- The whole attempt is bounded by `timeout`: connect and each read use it, and
  a watchdog shuts the socket down when the attempt's deadline passes, so a
  receiver dripping its headers or body byte by byte cannot hold a worker
  (one watchdog thread per process serves every attempt: starting a thread
  per attempt cost about 0.13 ms of CPU, a tenth of a delivery).
- At most 4 KiB of the response body is read, never decoded, never returned.
- Connections are kept alive between attempts, per thread: each thread that
  calls `post` with a session gets its own connection pools (one idle
  connection per destination), so the caller's session can be shared by
  worker threads and an attempt never shares a socket with another thread's.
  A pool is keyed by what the request connects to: scheme, the address the
  URL was rewritten to (the pinned IP in live mode), port, and for pinned
  TLS the host name SNI and the certificate check use; so a kept connection
  is only reused when it goes to the very address vetted for this attempt.
  A kept connection that turns out to be closed by the receiver before any
  response is retried once on a new connection (within the same deadline).
  Only the session's `headers`, `verify` and `cert` are used; its cookies,
  auth, proxies, .netrc and adapters are not. `session.close()` closes the
  kept connections.

- Live mode's name resolution (`check_url`) counts against the same deadline:
  the system resolver has no timeout of its own, so it runs in a small pool
  of resolver threads and the attempt stops waiting for it at the deadline
  (a failed attempt, "cannot resolve <host> (TimeoutError)").

Residual risk (documented for operators):
- Only the first vetted address is tried (no fallback to the others).
"""

from __future__ import annotations

import heapq
import http.client
import ipaddress
import itertools
import os
import socket
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from http.cookiejar import DefaultCookiePolicy
from urllib.parse import urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from .schedule import MAX_RETRY_AFTER
from .ssrf import UnsafeURL, check_url

MAX_RESPONSE_BYTES = 4096


@dataclass(frozen=True)
class AttemptResult:
    ok: bool                  # True only for a 2xx
    status_code: int | None   # None when no HTTP response arrived
    error: str | None         # short operator-facing reason; never response content
    duration_ms: int
    retry_after: int | None   # seconds, from Retry-After on 429/503


def new_session() -> requests.Session:
    """A session fit for webhook delivery: ignores the environment (proxies,
    .netrc credentials, CA overrides) and keeps no cookies."""
    session = requests.Session()
    session.trust_env = False
    session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    return session


def post(session: requests.Session, url: str, body: bytes, headers: dict, *, timeout: float,
         livemode: bool, resolve=socket.getaddrinfo, clock=time.time) -> AttemptResult:
    """POST `body` to `url` once; never raises for network or receiver errors.

    This is what the delivery worker calls: the URL is vetted now (`check_url`),
    and in live mode the connection goes to the first vetted address.
    """
    start = time.monotonic()
    try:
        addresses = check_url(url, livemode, resolve=_bounded(resolve, start + timeout))
    except UnsafeURL as exc:
        return AttemptResult(False, None, f"unsafe url: {exc}", _ms_since(start), None)
    address = addresses[0] if addresses else None
    try:
        return send(session, url, body, headers, timeout=timeout, address=address, clock=clock,
                    _start=start)
    except Exception as exc:  # a receiver must never make an attempt go unrecorded
        return AttemptResult(False, None, f"error: {type(exc).__name__}", _ms_since(start), None)


def _bounded(resolve, deadline):
    """`resolve` (getaddrinfo's signature) run in a resolver thread, waited for until `deadline`
    (time.monotonic()); past it, TimeoutError (an OSError, as getaddrinfo's own failures)."""
    def bounded(*args, **kwargs):
        future = _resolver_pool().submit(resolve, *args, **kwargs)
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except futures.TimeoutError:
            future.cancel()  # if it has not started; a running lookup ends on its own
            raise TimeoutError("name resolution timed out") from None
    return bounded


# At most RESOLVER_THREADS lookups run at once; beyond, they wait (and time out) in the queue, so a
# hanging resolver ties up a few threads, never one per attempt.
RESOLVER_THREADS = 4
_resolvers, _resolvers_lock = None, threading.Lock()


def _resolver_pool():
    global _resolvers
    with _resolvers_lock:
        if _resolvers is None:
            _resolvers = futures.ThreadPoolExecutor(RESOLVER_THREADS,
                                                    thread_name_prefix="webhook-dns")
        return _resolvers


def _forget_resolvers():  # in a forked child: the parent's threads are not there
    global _resolvers, _resolvers_lock
    _resolvers, _resolvers_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_resolvers)


def send(session: requests.Session, url: str, body: bytes, headers: dict, *, timeout: float,
         address=None, clock=time.time, _start: float | None = None) -> AttemptResult:
    """The HTTP half of `post`, WITHOUT the SSRF check: use `post`.

    `address` (an ipaddress object) pins the connection: the request goes to
    that IP while the Host header, TLS SNI and certificate check use the URL's
    host name. Without it the host name is resolved by the system as usual.
    `clock` (unix seconds) turns a Retry-After HTTP date into seconds from now.
    """
    start = time.monotonic() if _start is None else _start

    def result(ok=False, status=None, error=None, retry_after=None) -> AttemptResult:
        return AttemptResult(ok, status, error, _ms_since(start), retry_after)

    merged = CaseInsensitiveDict(session.headers)
    merged.update(headers)
    pin_host = None
    if address is not None:
        url, pin_host = _pinned(url, address)
        if pin_host:
            port = urlsplit(url).port
            merged["Host"] = pin_host if port is None else f"{pin_host}:{port}"
    prepared = requests.PreparedRequest()
    try:
        prepared.prepare(method="POST", url=url, headers=merged, data=body)
    except (requests.RequestException, ValueError) as exc:
        return result(error=f"invalid request ({exc.__class__.__name__})")

    adapter = _thread_adapter(session)
    attempt = adapter.begin(pin_host)
    watch = _watchdog.watch(adapter, attempt, start + timeout)
    try:
        try:
            response = _send_once_or_twice(adapter, prepared, timeout, session, start)
        except (requests.RequestException, urllib3.exceptions.HTTPError,
                http.client.HTTPException, OSError) as exc:
            adapter.close()  # whatever it kept may be half-used: start afresh next time
            return result(error=_describe(exc, timeout, adapter.aborted))
        try:
            status = response.status_code
            retry_after = None
            if status in (429, 503):
                retry_after = parse_retry_after(response.headers.get("Retry-After"), clock())
            _drain(response)
        finally:
            response.close()
    finally:
        watch.over = True
        adapter.end(attempt)

    if 200 <= status < 300:
        return result(ok=True, status=status)
    if 300 <= status < 400:
        return result(status=status, error=f"redirect {status} not followed",
                      retry_after=retry_after)
    return result(status=status, error=f"HTTP {status}", retry_after=retry_after)


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


def parse_retry_after(value: str | None, now: float | None = None) -> int | None:
    """Retry-After as whole seconds from now (delta-seconds or HTTP-date), capped."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit() and value.isascii():
        if len(value) > 9:  # beyond any cap; int() of thousands of digits would raise
            return MAX_RETRY_AFTER
        seconds = int(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        now = time.time() if now is None else now
        seconds = max(0, int(when.timestamp() - now + 0.999))
    return min(seconds, MAX_RETRY_AFTER)


def _send_once_or_twice(adapter, prepared, timeout, session, start):
    """Send on a kept connection if there is one. If the receiver had closed that connection
    (it failed before any response, and no new connection was made this attempt), send once more
    on a new connection, within what is left of the deadline."""
    def once(read_timeout):
        return adapter.send(prepared, stream=True, timeout=(timeout, read_timeout),
                            verify=session.verify, cert=session.cert, proxies={})
    try:
        return once(timeout)
    except (requests.ConnectionError, urllib3.exceptions.ProtocolError) as exc:
        left = start + timeout - time.monotonic()
        if adapter.connected_this_attempt() or adapter.aborted or left <= 0 or not any(
                isinstance(e, _STALE) for e in _causes(exc)):
            raise
    adapter.close()
    return once(left)


# How a kept-alive connection that the receiver has closed in the meantime fails.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


class _Watch:
    __slots__ = ("adapter", "attempt", "over")

    def __init__(self, adapter, attempt):
        self.adapter, self.attempt, self.over = adapter, attempt, False


class _Watchdog:
    """Cuts attempts at their deadline: at it, the attempt's connections are shut down, and again
    every ABORT_REPEAT_SECONDS until the attempt is over (a connection still being set up at the
    deadline is cut once it exists). One thread per process (made again after a fork), sleeping
    until the earliest deadline; an attempt that ends just sets `over` on its watch."""

    ABORT_REPEAT_SECONDS = 0.05

    def __init__(self):
        self._order = itertools.count()
        self._reset()

    def _reset(self):
        """A fresh state, also in a forked child: the parent's thread is not there, and its lock
        may have been held at the fork."""
        self._cond = threading.Condition()
        self._heap = []  # (deadline, tie-breaker, _Watch)
        self._started = False

    def watch(self, adapter, attempt, deadline) -> _Watch:
        watch = _Watch(adapter, attempt)
        with self._cond:
            if not self._started:
                self._started = True
                threading.Thread(target=self._run, daemon=True, name="webhook-watchdog").start()
            heapq.heappush(self._heap, (deadline, next(self._order), watch))
            if self._heap[0][2] is watch:
                self._cond.notify()
        return watch

    def _run(self):
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].over:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                left = self._heap[0][0] - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                _, _, due = heapq.heappop(self._heap)
            due.adapter.abort(due.attempt)  # outside the lock: abort takes the adapter's own
            with self._cond:
                if not due.over:
                    heapq.heappush(self._heap, (time.monotonic() + self.ABORT_REPEAT_SECONDS,
                                                next(self._order), due))


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=_watchdog._reset)


class _ThreadAdapters:
    """The per-thread adapters of one session. Mounted on the session under a prefix no URL
    has, only so that `session.close()` closes them (requests closes every mounted adapter)."""

    PREFIX = "x-webhook-connections-per-thread://"

    def __init__(self):
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[_AttemptAdapter] = []

    def get(self) -> "_AttemptAdapter":
        adapter = getattr(self._local, "adapter", None)
        if adapter is None:
            adapter = self._local.adapter = _AttemptAdapter()
            with self._lock:
                self._all.append(adapter)
        return adapter

    def close(self) -> None:
        with self._lock:
            adapters, self._all = self._all, []
        for adapter in adapters:
            adapter.close()


_adapters_lock = threading.Lock()


def _thread_adapter(session: requests.Session) -> "_AttemptAdapter":
    adapters = session.adapters.get(_ThreadAdapters.PREFIX)
    if adapters is None:
        with _adapters_lock:
            adapters = session.adapters.get(_ThreadAdapters.PREFIX)
            if adapters is None:
                adapters = _ThreadAdapters()
                session.adapters[_ThreadAdapters.PREFIX] = adapters
    return adapters.get()


def _drain(response: requests.Response) -> None:
    """Read (and drop) at most MAX_RESPONSE_BYTES of the body, undecoded."""
    try:
        response.raw.read(MAX_RESPONSE_BYTES, decode_content=False)
    except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, ValueError):
        pass  # the status already decided the attempt


def _pinned(url: str, address) -> tuple[str, str | None]:
    """Rewrite `url` to connect to `address`; return it and the name to verify TLS for."""
    parts = urlsplit(url)
    try:
        ipaddress.ip_address(parts.hostname)
        return url, None  # already an address literal: nothing to pin
    except ValueError:
        pass
    ip = f"[{address}]" if address.version == 6 else str(address)
    netloc = ip if parts.port is None else f"{ip}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc)), _ascii_host(parts.hostname)


def _ascii_host(host: str) -> str:
    try:
        host.encode("ascii")
        return host
    except UnicodeEncodeError:
        import idna

        return idna.encode(host, uts46=True).decode("ascii")


def _describe(exc: BaseException, timeout: float, aborted: bool) -> str:
    after = f"timeout after {timeout:g}s"
    chain = _causes(exc)
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "connection refused"
    if any(isinstance(e, (urllib3.exceptions.NameResolutionError, socket.gaierror))
           for e in chain):
        return "cannot resolve host"
    if aborted or isinstance(exc, requests.Timeout) or any(
            isinstance(e, (socket.timeout, urllib3.exceptions.TimeoutError))
            and not isinstance(e, urllib3.exceptions.NewConnectionError) for e in chain):
        return after
    if any(isinstance(e, requests.exceptions.SSLError) for e in chain):
        return "TLS error (certificate or handshake)"
    if isinstance(exc, requests.ConnectionError):
        return "connection error"
    return f"request failed ({exc.__class__.__name__})"


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and what it wraps (requests and urllib3 wrap via args, reason, __cause__)."""
    found: list[BaseException] = []
    todo = [exc]
    while todo and len(found) < 20:
        current = todo.pop()
        if current in found:
            continue
        found.append(current)
        todo += [e for e in (current.__cause__, current.__context__,
                             getattr(current, "reason", None), *current.args)
                 if isinstance(e, BaseException)]
    return found


class _AttemptAdapter(HTTPAdapter):
    """One thread's adapter: no retries, optional address pinning, abortable, keeps connections.

    Used by one thread, one attempt at a time: `begin(pin_host)` starts an attempt, `end()`
    finishes it. `pin_host`: when set, the request URL already names the vetted IP; TLS then
    sends SNI for `pin_host` and verifies the certificate against it (urllib3's
    `server_hostname` / `assert_hostname` pool settings, which are part of the pool key, as is
    the IP). `abort(attempt)` shuts down every socket this adapter holds, which makes a blocked
    read fail at once; a watchdog late for an attempt that is over cuts nothing.
    """

    def __init__(self):
        self.pin_host = None
        self.aborted = False
        self._attempt = 0
        self._connects = 0
        self._lock = threading.Lock()
        self._sockets: list = []
        super().__init__(pool_connections=POOLS_PER_THREAD, pool_maxsize=1, max_retries=0)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}

    def begin(self, pin_host: str | None) -> int:
        with self._lock:
            self._attempt += 1
            self.aborted = False
            self._connects = 0
            self._sockets = [s for s in self._sockets if s.fileno() != -1]
            self.pin_host = pin_host
            return self._attempt

    def end(self, attempt: int) -> None:
        with self._lock:
            if attempt == self._attempt:
                self._attempt += 1  # a late watchdog of this attempt no longer matches

    def connected_this_attempt(self) -> bool:
        return self._connects > 0

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert)
        if self.pin_host and host_params["scheme"] == "https":
            pool_kwargs["server_hostname"] = self.pin_host
            pool_kwargs["assert_hostname"] = self.pin_host
        return host_params, pool_kwargs

    def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):
        pool = super().get_connection_with_tls_context(request, verify, proxies, cert)
        pool.on_connect = self._track
        return pool

    def _track(self, sock) -> None:
        with self._lock:
            self._connects += 1
            self._sockets.append(sock)
            if self.aborted:
                _shutdown(sock)

    def abort(self, attempt: int) -> None:
        with self._lock:
            if attempt != self._attempt:
                return
            self.aborted = True
            for sock in self._sockets:
                _shutdown(sock)

    def close(self) -> None:
        super().close()  # closes the pools and their idle connections
        with self._lock:
            self._sockets = []


# Destinations one thread keeps a connection to (least recently used ones are closed beyond).
POOLS_PER_THREAD = 16


def _shutdown(sock) -> None:
    if sock is not None:
        try:
            # socket.socket.shutdown, not SSLSocket.shutdown: the reading
            # thread still uses the TLS object; we only cut the wire.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


# The sockets are recorded as soon as they are connected: http.client drops
# its reference (conn.sock = None) once a "Connection: close" response is
# handed over, while the response keeps reading from the same socket.
class _ReportsConnect:
    on_connect = None

    def connect(self):
        super().connect()
        if self.on_connect:
            self.on_connect(self.sock)


class _HandsOutOnConnect:
    on_connect = None

    def _new_conn(self):
        conn = super()._new_conn()
        conn.on_connect = self.on_connect
        return conn


class _TrackedHTTPConnection(_ReportsConnect, HTTPConnection):
    pass


class _TrackedHTTPSConnection(_ReportsConnect, HTTPSConnection):
    pass


class _TrackedHTTPPool(_HandsOutOnConnect, HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection


class _TrackedHTTPSPool(_HandsOutOnConnect, HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection
