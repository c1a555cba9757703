"""One webhook delivery attempt: a POST bounded in time that never raises.

`post` vets the URL (`ssrf.check_url`) at the time of the attempt, then sends once with `requests`
(a `requests.Session` whose adapter `new_session` mounts):
- it connects to the vetted address (a second DNS answer cannot swap in another), while the Host
  header, TLS SNI and the certificate check use the URL's host name; connections are kept alive in
  pools keyed by destination (scheme, address, port, TLS name): pinning.py;
- the whole attempt, name resolution included, is bounded by `timeout`: a watchdog thread shuts
  the socket down at the deadline, so a receiver dripping bytes cannot hold a thread: deadline.py;
- redirects are never followed; at most 4 KiB of the response body is read, never decoded or
  returned.
The vetted addresses are tried in the resolver's order, the next one only when the previous one
refused the connection (nothing was sent: `localhost` resolving to ::1 first while the receiver
listens on 127.0.0.1). Proxies, .netrc and cookies are never used.
"""
from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass

import requests
from urllib3.util import parse_url

from . import deadline, pinning
from .schedule import parse_retry_after
from .ssrf import UnsafeURL, check_url

MAX_RESPONSE_BYTES = 4096
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
    adapter = pinning.PinningAdapter()
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
                              resolve=deadline.bounded(resolve, start + timeout))
    except UnsafeURL as exc:
        return AttemptResult(False, None, f"unsafe url: {exc}", _ms_since(start), None)
    for address in addresses:
        result = send(session, url, body, headers, timeout=timeout, address=address, clock=clock,
                      _start=start)
        if result.error != REFUSED or time.monotonic() >= start + timeout:
            break
    return result


def bounded_resolver(seconds, resolve=socket.getaddrinfo):
    """`resolve` (getaddrinfo's signature) given `seconds` from now to answer (deadline.bounded):
    for checking a URL while a person waits for the page."""
    return deadline.bounded(resolve, time.monotonic() + seconds)


def send(session: requests.Session, url: str, body: bytes, headers: dict, *, timeout: float,
         address=None, clock=time.time, _start: float | None = None) -> AttemptResult:
    """The HTTP half of `post`, WITHOUT the SSRF check: use `post`. `address` (an ipaddress
    object) is where to connect instead of resolving the host; `clock` (unix seconds) turns a
    Retry-After date into seconds."""
    start = time.monotonic() if _start is None else _start

    def result(ok=False, status=None, error=None, retry_after=None) -> AttemptResult:
        return AttemptResult(ok, status, error, _ms_since(start), retry_after)

    try:
        request = _prepare(url, body, headers, address)
    except (requests.RequestException, ValueError) as exc:  # UnicodeError is a ValueError
        return result(error=f"invalid request ({type(exc).__name__})")
    with deadline.watch(start + timeout) as watch:
        try:
            status, retry_after = _exchange(session, request, watch, clock)
        except Exception as exc:
            return result(error=_describe(exc, timeout, watch.aborted))

    if 200 <= status < 300:
        return result(ok=True, status=status)
    if 300 <= status < 400:
        return result(status=status, error=f"redirect {status} not followed",
                      retry_after=retry_after)
    return result(status=status, error=f"HTTP {status}", retry_after=retry_after)


def _prepare(url, body, headers, address):
    """The POST to send: only what is given (no cookies, auth or hooks), to `address` if any."""
    request = requests.PreparedRequest()
    request.prepare_method("POST")
    request.prepare_url(url, None)  # IDNA host name, non-ASCII path percent-encoded
    target = parse_url(request.url)
    request.prepare_headers({"Host": target.netloc.rpartition("@")[2], **headers})
    request.prepare_body(body, None)
    pinning.pin(request, address, target.host.strip("[]"))
    return request


def _exchange(session, request, watch, clock):
    """Send `request` and read the answer: its status, and Retry-After in seconds on 429 and 503."""
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
    return status, retry_after


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
