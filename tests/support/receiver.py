"""A real local HTTP server that receives webhooks, for tests.

Its fixtures `receiver` and `tls` are loaded for every test by tests/conftest.py (pytest_plugins);
a test module imports only what it names itself (tests/ is on sys.path):

    from support.receiver import Reply

    def test_x(receiver):
        receiver.reply(Reply(status=500))          # next request gets 500
        receiver.default = Reply(status=204)       # every later one gets 204
        ... deliver to receiver.url("/hook") ...
        [req] = receiver.wait_for(1)
        req.method, req.path, req.headers["webhook-id"], req.body

Replies are taken from the queue in order, then `default` (200, empty body).
A reply can delay before answering (or hang until a `gate` Event is set), redirect, carry any
headers (e.g. Retry-After), send a huge body, drip its headers and/or body slowly, or keep
the connection alive (`Received.peer_port` then shows which requests shared one).
`Receiver(ssl_context)` serves HTTPS instead. Every request is recorded (before any delay), so a
timed-out attempt is still visible. The server listens on 127.0.0.1 on a free port.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.webhooks.signing import verify


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0             # seconds to wait before answering
    chunk_size: int | None = None  # send the body in chunks of this size...
    chunk_interval: float = 0.0    # ...this many seconds apart
    drip_headers: bool = False     # also send the status line and headers in chunks
    hold: float = 0.0              # keep the connection open this long after sending
    keep_alive: bool = False       # no "Connection: close": serve the next request on it too
    drop: bool = False             # with keep_alive: yet hang up right after answering (a
                                   # receiver whose idle timeout ran out at once)
    gate: threading.Event | None = field(default=None, compare=False)  # answer once it is set

    @classmethod
    def redirect(cls, location: str, status: int = 302) -> Reply:
        return cls(status=status, headers={"Location": location})


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict            # lower-cased names -> value (last one wins)
    raw_headers: list        # [(name, value), ...] as sent
    body: bytes
    peer_port: int = 0       # the client's port: the same one means the connection was reused

    def verified(self, secret: str, now: int) -> dict:
        """The body, once its Standard Webhooks signature is checked at the service's clock `now`
        (a test chain's clock may run ahead of the wall clock that the reference library uses)."""
        verify(secret, self.headers, self.body, now=now)
        return json.loads(self.body)


class Receiver:
    """`ssl_context`: serve HTTPS with it (server side); the names clients sent
    in TLS SNI are recorded in `server_names`."""

    def __init__(self, ssl_context=None) -> None:
        self.requests: list[Received] = []
        self.server_names: list[str | None] = []
        self.default = Reply()
        self._queue: deque[Reply] = deque()
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.handle_error = _quiet_handle_error(self._server.handle_error)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self.scheme = "http"
        if ssl_context is not None:
            self.scheme = "https"
            ssl_context.sni_callback = self._record_sni
            # handshake in the handler thread, not in the accept loop
            self._server.socket = ssl_context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False)

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def reply(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        with self._cond:
            self._queue.extend(replies)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """Block until at least `count` requests were received; return them all."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= count, timeout):
                raise AssertionError(
                    f"receiver got {len(self.requests)} requests, expected {count}")
            return list(self.requests)

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    # called by the handler threads
    def _record_sni(self, ssl_socket, server_name, ssl_context) -> None:
        with self._cond:
            self.server_names.append(server_name)

    def _record(self, received: Received) -> Reply:
        with self._cond:
            self.requests.append(received)
            self._cond.notify_all()
            return self._queue.popleft() if self._queue else self.default

    def _gated(self, gate) -> bool:
        """Wait until `gate` is set (None: at once) unless the server is stopping; True if it is."""
        while gate is not None and not gate.wait(0.05):
            if self._stopping.is_set():
                return True
        return self._stopping.is_set()

    def _pause(self, seconds: float) -> bool:
        """Sleep unless the server is stopping; True if it is."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen() backlog: must be set before the server listens


def _handler_for(owner: Receiver):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            reply = owner._record(Received(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw_headers=list(self.headers.items()),
                body=body,
                peer_port=self.client_address[1],
            ))
            if owner._pause(reply.delay) or owner._gated(reply.gate):
                self.close_connection = True  # stopping: hang up on the waiting client
                return
            self._send(reply)
            self.close_connection = not reply.keep_alive or reply.drop

        def _send(self, reply: Reply) -> None:
            head = [f"HTTP/1.1 {reply.status} {_reason(reply.status)}"]
            names = {k.lower() for k in reply.headers}
            head += [f"{k}: {v}" for k, v in reply.headers.items()]
            if "content-length" not in names:
                head.append(f"Content-Length: {len(reply.body)}")
            if not reply.keep_alive:
                head.append("Connection: close")
            head_bytes = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
            step = reply.chunk_size
            self._write(head_bytes, step if reply.drip_headers else None, reply.chunk_interval)
            self._write(reply.body, step, reply.chunk_interval)
            owner._pause(reply.hold)

        def _write(self, data: bytes, step: int | None, interval: float) -> None:
            if not step:
                self.wfile.write(data)
                self.wfile.flush()
                return
            for i in range(0, len(data), step):
                self.wfile.write(data[i:i + step])
                self.wfile.flush()
                if owner._pause(interval):
                    return

        do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format, *args):  # keep test output clean
            pass

    return Handler


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _quiet_handle_error(default):
    def handle_error(request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # the client hung up (e.g. it gave up on a slow reply)
        default(request, client_address)

    return handle_error


def closed_port() -> int:
    """A local port with nothing listening (connections are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def receiver():
    server = Receiver().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tls():
    """(an HTTPS Receiver with a certificate for hooks.example, a webhook session trusting its
    CA)."""
    import ssl

    import trustme

    from app.webhooks.transport import new_session

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("hooks.example").configure_cert(server_ctx)
    server = Receiver(ssl_context=server_ctx).start()
    session = new_session()
    with ca.cert_pem.tempfile() as ca_file:
        session.verify = ca_file
        yield server, session
    session.close()
    server.stop()
