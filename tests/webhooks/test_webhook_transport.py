import ipaddress
import multiprocessing
import socket
import threading

import pytest
from support.receiver import Reply, closed_port

from app.webhooks.schedule import MAX_RETRY_AFTER
from app.webhooks.transport import (
    MAX_RESPONSE_BYTES,
    AttemptResult,
    new_session,
    post,
    send,
)

BODY = b'{"type":"payment.completed","data":{"metadata":{"orderRef":"A-1"}}}'
HEADERS = {"webhook-id": "evt_1", "webhook-timestamp": "1700000000",
           "webhook-signature": "v1,AAAA", "Content-Type": "application/json",
           "User-Agent": "preorder-service-webhooks/test"}
# Generous bound on a whole attempt whose timeout is short: proves it is bounded
# (the receiver would hold it for far longer), not how fast it is.
BOUNDED_MS = 5000


def deliver(url, timeout=5.0, livemode=False):
    return post(new_session(), url, BODY, dict(HEADERS), timeout=timeout, livemode=livemode,
                allow_loopback=True)


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_2xx_is_success(receiver, status):
    receiver.reply(Reply(status=status, body=b"" if status == 204 else b"thanks"))
    result = deliver(receiver.url("/hooks/preorder?x=1"))
    assert (result.ok, result.status_code, result.error, result.retry_after) == (
        True, status, None, None)
    assert result.duration_ms >= 0
    [got] = receiver.wait_for(1)
    assert (got.method, got.path, got.body) == ("POST", "/hooks/preorder?x=1", BODY)
    for name, value in HEADERS.items():
        assert got.headers[name.lower()] == value
    assert got.headers["content-length"] == str(len(BODY))


@pytest.mark.parametrize("status, error", [
    (500, "HTTP 500"), (400, "HTTP 400"), (404, "HTTP 404"), (410, "HTTP 410"),
    (199, "HTTP 199"), (502, "HTTP 502"),
])
def test_other_status_is_failure_and_body_is_not_echoed(receiver, status, error):
    receiver.reply(Reply(status=status, body=b"SECRET-STACKTRACE"))
    result = deliver(receiver.url())
    assert result == AttemptResult(False, status, error, result.duration_ms, None)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_is_not_followed(receiver, status):
    receiver.reply(Reply.redirect(receiver.url("/elsewhere"), status=status))
    result = deliver(receiver.url("/hook"))
    assert (result.ok, result.status_code, result.error) == (
        False, status, f"redirect {status} not followed")
    # post() returns after the whole attempt: a followed redirect would have been sent by now
    assert [r.path for r in receiver.requests] == ["/hook"]


def test_a_non_ascii_path_and_query_are_sent_percent_encoded(receiver):
    result = deliver(receiver.url("/hooks/grüße?shop=café&x=1"))
    assert (result.ok, result.status_code, result.error) == (True, 200, None)
    assert [r.path for r in receiver.wait_for(1)] == ["/hooks/gr%C3%BC%C3%9Fe?shop=caf%C3%A9&x=1"]


def test_timeout_when_receiver_answers_too_late(receiver):
    receiver.reply(Reply(delay=30))
    result = deliver(receiver.url(), timeout=0.3)
    assert (result.ok, result.status_code, result.error) == (False, None, "timeout after 0.3s")
    assert result.duration_ms < BOUNDED_MS
    assert len(receiver.wait_for(1)) == 1  # the request did arrive


def test_slow_drip_headers_cannot_hold_the_attempt(receiver):
    # every byte arrives well within the read timeout, the whole reply never does
    receiver.reply(Reply(status=200, body=b"x" * 100, chunk_size=1, chunk_interval=0.1,
                         drip_headers=True))
    result = deliver(receiver.url(), timeout=0.3)
    assert (result.ok, result.status_code, result.error) == (False, None, "timeout after 0.3s")
    assert result.duration_ms < BOUNDED_MS


def _attempt_in_child(url, results):
    result = deliver(url, timeout=0.3)
    results.put((result.error, result.duration_ms))


def test_the_deadline_still_cuts_attempts_in_a_forked_child(receiver):
    # One watchdog thread per process cuts attempts at their deadline; a child forked after the
    # parent started its watchdog must get its own (a thread does not survive fork).
    receiver.reply(Reply(status=200))
    assert deliver(receiver.url()).ok  # the parent's watchdog is running now
    receiver.reply(Reply(status=200, body=b"x" * 100, chunk_size=1, chunk_interval=0.1,
                         drip_headers=True))
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    child = ctx.Process(target=_attempt_in_child, args=(receiver.url(), results))
    child.start()
    error, duration_ms = results.get(timeout=60)
    child.join(10)
    assert child.exitcode == 0
    assert error == "timeout after 0.3s"
    assert duration_ms < BOUNDED_MS


@pytest.mark.parametrize("status, ok", [(200, True), (500, False)])
def test_slow_drip_body_cannot_hold_the_attempt(receiver, status, ok):
    # the status arrived in time and decides; the body is cut at the deadline
    receiver.reply(Reply(status=status, body=b"x" * 1000, chunk_size=1, chunk_interval=0.1))
    result = deliver(receiver.url(), timeout=0.3)
    assert (result.ok, result.status_code) == (ok, status)
    assert result.duration_ms < BOUNDED_MS


def test_huge_body_is_read_at_most_4_kib(receiver):
    assert MAX_RESPONSE_BYTES == 4096
    receiver.reply(Reply(status=200, body=b"x" * (64 * 1024 * 1024)))
    result = deliver(receiver.url(), timeout=5)
    assert (result.ok, result.status_code, result.error) == (True, 200, None)


def test_body_read_stops_after_4_kib(receiver):
    # 64 MiB announced, 4 KiB sent, then silence: a client wanting one byte
    # more would wait for the 30 s timeout.
    receiver.reply(Reply(status=500, body=b"x" * 4096, hold=60,
                         headers={"Content-Length": str(64 * 1024 * 1024)}))
    result = deliver(receiver.url(), timeout=30)
    assert (result.ok, result.status_code, result.error) == (False, 500, "HTTP 500")
    assert result.duration_ms < BOUNDED_MS


def test_connection_refused():
    result = deliver(f"http://127.0.0.1:{closed_port()}/hook", timeout=2)
    assert result == AttemptResult(False, None, "connection refused", result.duration_ms, None)


@pytest.mark.parametrize("status, retry_after, expected", [
    (429, "120", 120),
    (503, "7", 7),
    (429, "Wed, 21 Oct 2015 07:28:00 GMT", 0),   # a date in the past: retry now
    (429, "soon", None),
    (429, None, None),
    (500, "120", None),                         # only honoured on 429/503
    (429, "999999999", 86400),                  # capped at 24 h
])
def test_retry_after(receiver, status, retry_after, expected):
    headers = {} if retry_after is None else {"Retry-After": retry_after}
    receiver.reply(Reply(status=status, headers=headers))
    result = deliver(receiver.url())
    assert (result.ok, result.status_code, result.error, result.retry_after) == (
        False, status, f"HTTP {status}", expected)


def test_proxies_netrc_and_cookies_are_never_used(receiver, monkeypatch, tmp_path):
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login leak password leak\n")
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")
    receiver.reply(Reply(status=200, headers={"Set-Cookie": "sid=x"}, keep_alive=True))
    session = new_session()
    assert [post(session, receiver.url(), BODY, HEADERS, timeout=5, livemode=False,
                 allow_loopback=True).ok
            for _ in range(2)] == [True, True]
    got = receiver.wait_for(2)
    assert [("authorization" in r.headers, "cookie" in r.headers) for r in got] == [
        (False, False)] * 2


def test_a_hanging_resolver_cannot_hold_a_live_attempt():
    # getaddrinfo has no timeout of its own: the live-mode lookup is bounded by the attempt's
    # deadline too, so an attempt never outlives its lease waiting for DNS.
    release = threading.Event()

    def hanging(host, port, type=0, **kwargs):
        release.wait(30)
        raise OSError("released")

    try:
        result = post(new_session(), "https://hooks.example/hook", BODY, dict(HEADERS),
                      timeout=0.3, livemode=True, allow_loopback=False, resolve=hanging)
    finally:
        release.set()
    assert (result.ok, result.status_code, result.error) == (
        False, None, "unsafe url: cannot resolve hooks.example (TimeoutError)")
    assert result.duration_ms < BOUNDED_MS


# --- live mode: the connection is pinned to the vetted address -------------

def test_pinned_address_keeps_sni_host_and_certificate_check(tls):
    server, session = tls
    url = server.url("/hook", host="hooks.example")  # a name no resolver knows
    result = send(session, url, BODY, HEADERS, timeout=5,
                  address=ipaddress.ip_address("127.0.0.1"))
    assert (result.ok, result.status_code, result.error) == (True, 200, None)
    [got] = server.wait_for(1)
    assert got.headers["host"] == f"hooks.example:{server.port}"
    assert got.body == BODY
    assert server.server_names == ["hooks.example"]


def test_a_pinned_international_host_name_is_sent_in_its_ascii_form(receiver):
    url = f"http://bücher.example:{receiver.port}/hook"  # a name no resolver knows
    result = send(new_session(), url, BODY, HEADERS, timeout=5,
                  address=ipaddress.ip_address("127.0.0.1"))
    assert (result.ok, result.status_code, result.error) == (True, 200, None)
    [got] = receiver.wait_for(1)
    assert got.headers["host"] == f"xn--bcher-kva.example:{receiver.port}"


def test_pinned_address_still_verifies_the_certificate_name(tls):
    server, session = tls
    url = server.url("/hook", host="other.example")
    result = send(session, url, BODY, HEADERS, timeout=5,
                  address=ipaddress.ip_address("127.0.0.1"))
    assert (result.ok, result.status_code) == (False, None)
    assert result.error == "TLS error (certificate or handshake)"
    assert server.requests == []


def test_a_tls_handshake_dripped_byte_by_byte_cannot_hold_the_attempt():
    # The server announces a 16 KiB TLS handshake record, then sends it a byte every 0.1 s: each
    # read is well within the timeout, the handshake never ends; the deadline must cut it.
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip():
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b"\x16\x03\x03\x40\x00")
            while not stop.wait(0.1):
                try:
                    conn.sendall(b"\x00")
                except OSError:
                    return

    server = threading.Thread(target=drip, daemon=True)
    server.start()
    try:
        result = send(new_session(), f"https://hooks.example:{listener.getsockname()[1]}/hook",
                      BODY, HEADERS, timeout=0.5, address=ipaddress.ip_address("127.0.0.1"))
    finally:
        stop.set()
        server.join(5)
        listener.close()
    assert (result.ok, result.status_code, result.error) == (False, None, "timeout after 0.5s")
    assert result.duration_ms < BOUNDED_MS


def test_a_retry_after_of_thousands_of_digits_is_capped_not_a_crash(receiver):
    receiver.reply(Reply(status=429, headers={"Retry-After": "9" * 5000}))
    result = deliver(receiver.url())
    assert (result.ok, result.status_code, result.error) == (False, 429, "HTTP 429")
    assert result.retry_after == MAX_RETRY_AFTER


def test_the_next_vetted_address_is_tried_only_when_one_refuses_the_connection(receiver):
    # A tester's "localhost" answers ::1 first while the receiver listens on 127.0.0.1 only: ::1
    # refuses the connection (nothing was sent), so 127.0.0.1 is tried. Both refusing: refused.
    def loopbacks(host, port, **kwargs):
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    url = f"http://hooks.test:{receiver.port}/hook"
    result = post(new_session(), url, BODY, dict(HEADERS), timeout=5, livemode=False,
                  allow_loopback=True, resolve=loopbacks)
    assert (result.ok, result.status_code) == (True, 200)
    [got] = receiver.wait_for(1)
    assert got.headers["host"] == f"hooks.test:{receiver.port}"
    result = post(new_session(), f"http://hooks.test:{closed_port()}/hook", BODY, dict(HEADERS),
                  timeout=5, livemode=False, allow_loopback=True, resolve=loopbacks)
    assert (result.ok, result.status_code, result.error) == (False, None, "connection refused")
    assert len(receiver.requests) == 1
