"""Limits that only the real server shows: gunicorn's own limits and refusals (request line, header
fields, malformed HTTP), answered in the JSON envelope by its worker class (gunicorn_workers.py),
and hostile bodies that must not cost the worker process its life (docs/contract.md, README Resource
limits)."""
import json
import socket

import pytest
import requests
from support.servers import create_merchant, flask, gunicorn, read_answer, service_env

PREORDER = "/payment-button/process/preorder"
TOO_MANY_FIELDS = "The request has more than 100 header fields, or one longer than 16384 bytes."
NOT_HTTP = ("HTTP/1.1 400 Bad Request", "bad_request", "The request is not valid HTTP.")


def request_line(length, start=b""):
    """A GET of /healthz whose request line (without its CRLF) is `length` bytes long, its query
    string starting with `start`."""
    query = start + b"a" * (length - len(b"GET /healthz? HTTP/1.1") - len(start))
    return b"GET /healthz?" + query + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def fields(count):
    """A GET of /healthz with `count` header fields."""
    return (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + b"".join(b"X-F%d: 1\r\n" % i for i in range(count - 2)) + b"\r\n")


# Straight to gunicorn (no nginx in front): the statuses gunicorn picks, in the envelope.
GUNICORN_REFUSALS = [
    (request_line(8191), "HTTP/1.1 414 URI Too Long", "uri_too_long",
     "The request line is longer than 8190 bytes."),
    (fields(101), "HTTP/1.1 431 Request Header Fields Too Large", "headers_too_large",
     TOO_MANY_FIELDS),
    (b"GET /payment-button/processes HTTP/1.1\r\nHost: x\r\nx-secret-key: sk_test_\x01\r\n\r\n",
     *NOT_HTTP),
    (b"garbage\r\n\r\n", *NOT_HTTP),
    (b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", *NOT_HTTP),
    (b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br\r\n\r\n",
     "HTTP/1.1 501 Not Implemented", "not_implemented",
     "The request uses an HTTP feature this service does not implement (a Transfer-Encoding "
     "other than chunked)."),
    (b"POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 0\r\n\r\n",
     "HTTP/1.1 417 Expectation Failed", "expectation_failed", "Expectation Failed."),
]


def test_header_limit_and_hostile_bodies_under_gunicorn(tmp_path):
    database = tmp_path / "limits.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    key = create_merchant(env)["secretKey"]
    log_path = tmp_path / "gunicorn.log"

    with gunicorn(env, log_path, workers=1) as base:
        def post(body, secret_key=key):
            return requests.post(base + PREORDER, data=body, timeout=30, headers={
                "x-secret-key": secret_key, "Content-Type": "application/json"})

        # A 10 KB key is within gunicorn's 16 KiB field limit: the service answers it, in JSON.
        response = post(b'{"amount": 5}', secret_key="x" * 10_000)
        assert (response.status_code, response.json()["code"]) == (401, "invalid_secret_key")
        # Past 16 KiB gunicorn refuses the request itself, before the application sees it; its
        # worker class (gunicorn_workers.py) answers in the JSON envelope all the same.
        response = post(b'{"amount": 5}', secret_key="x" * 17_000)
        assert response.status_code == 431
        assert response.headers["Content-Type"] == "application/json"
        assert response.json() == {"code": "headers_too_large", "message": TOO_MANY_FIELDS}

        # Each of gunicorn's own refusals, byte for byte.
        port = int(base.rsplit(":", 1)[1])
        for data, status_line, code, message in GUNICORN_REFUSALS:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(data)
                line, headers, body = read_answer(sock)
            assert (line, headers["content-type"]) == (status_line, "application/json"), body
            assert json.loads(body) == {"code": code, "message": message}
        # Within the limits: the service answers.
        for data in (request_line(8190), fields(100)):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(data)
                assert read_answer(sock)[0] == "HTTP/1.1 200 OK"

        # Nesting the parser meets (within 64 KiB), then one over the size limit; the one worker
        # survives both and serves the next request.
        response = post(b'{"amount": 5, "metadata": ' + b"[" * 60_000)
        assert (response.status_code, response.json()["code"]) == (400, "invalid_json")
        response = post(b"[" * 100_000 + b"]" * 100_000)
        assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
        assert post(b'{"amount": 5}').status_code == 200

        # A chunked body (no Content-Length) is held to the same 64 KiB: up to it accepted, one
        # byte more refused, never silently cut and parsed.
        def chunked(size):
            body = b'{"amount": 5}' + b" " * (size - len(b'{"amount": 5}'))
            return requests.post(base + PREORDER,
                                 data=iter([body[i:i + 4096] for i in range(0, size, 4096)]),
                                 timeout=30,
                                 headers={"x-secret-key": key, "Content-Type": "application/json"})
        response = chunked(65_536)
        assert response.request.headers.get("Transfer-Encoding") == "chunked"
        assert response.status_code == 200
        response = chunked(65_537)
        assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
        assert post(b'{"amount": 5}').status_code == 200

    log = log_path.read_text()
    assert "Traceback" not in log and "RecursionError" not in log
    assert log.count("Booting worker") == 1  # the one worker was never replaced


def test_the_gthread_worker_answers_in_the_envelope_too(tmp_path):
    env = service_env(tmp_path / "gthread.sqlite3",
                      GUNICORN_WORKER_CLASS="gunicorn_workers.ThreadWorker",
                      GUNICORN_THREADS=2)
    flask(env, "init-db")
    with gunicorn(env, tmp_path / "gunicorn.log", workers=1) as base:
        port = int(base.rsplit(":", 1)[1])
        for data, status_line, code, message in GUNICORN_REFUSALS[:3]:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(data)
                line, headers, body = read_answer(sock)
            assert (line, headers["content-type"]) == (status_line, "application/json"), body
            assert json.loads(body) == {"code": code, "message": message}
    assert "Using worker: gunicorn_workers.ThreadWorker" in (tmp_path / "gunicorn.log").read_text()


SECRET = b"sk_live_" + b"S3cr3tK3y" * 3
URI_TOO_LONG = ("HTTP/1.1 414 URI Too Long", "uri_too_long",
                "The request line is longer than 8190 bytes.")
# Requests gunicorn refuses whose offending line holds a secret key: the refusal, and the name of
# gunicorn's exception, which is all its log says of the request (gunicorn_workers.py).
SECRET_REFUSALS = [
    (b"GET /payment-button/processes HTTP/1.1\r\nHost: x\r\nx-secret-key " + SECRET + b"\r\n\r\n",
     *NOT_HTTP, "InvalidHeader"),
    (b"GET /payment-button/processes HTTP/1.1\r\nHost: x\r\nx-secret-key=" + SECRET
     + b": 1\r\n\r\n",
     *NOT_HTTP, "InvalidHeaderName"),
    (b"x-secret-key: " + SECRET + b"\r\n\r\n", *NOT_HTTP, "InvalidRequestLine"),
    (b"GET /payment-button/processes?secretKey=" + SECRET + b"\r\nHost: x\r\n\r\n",
     *NOT_HTTP, "InvalidRequestLine"),
    (b"GET /payment-button/processes HTTP/1.1 x-secret-key: " + SECRET + b"\r\nHost: x\r\n\r\n",
     *NOT_HTTP, "InvalidHTTPVersion"),
    (request_line(8191, start=b"secretKey=" + SECRET + b"&pad="), *URI_TOO_LONG,
     "LimitRequestLine"),
]


@pytest.mark.parametrize("worker_class",
                         ["gunicorn_workers.SyncWorker", "gunicorn_workers.ThreadWorker"])
def test_gunicorns_log_never_holds_the_request_line_or_header_it_refused(tmp_path, worker_class):
    env = service_env(tmp_path / "refusals.sqlite3", GUNICORN_WORKER_CLASS=worker_class)
    flask(env, "init-db")
    log_path = tmp_path / "gunicorn.log"
    with gunicorn(env, log_path, workers=1) as base:
        port = int(base.rsplit(":", 1)[1])
        for data, status_line, code, message, _ in SECRET_REFUSALS:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
                sock.sendall(data)
                line, headers, body = read_answer(sock)
            assert (line, headers["content-type"]) == (status_line, "application/json"), body
            assert json.loads(body) == {"code": code, "message": message}
    log = log_path.read_text()
    assert SECRET.decode() not in log and "S3cr3tK3y" not in log, log
    warnings = [line.split("] ", 3)[-1] for line in log.splitlines() if "[WARNING]" in line]
    assert warnings == [f"Invalid request from ip=127.0.0.1: {name}"
                        for *_, name in SECRET_REFUSALS]


def test_the_access_log_holds_each_path_as_sent_on_one_line(tmp_path):
    """A percent-encoded line break in the path is logged encoded: no forged access line; and the
    query string, which may hold a searched e-mail, is never logged."""
    env = service_env(tmp_path / "access.sqlite3")
    flask(env, "init-db")
    log_path = tmp_path / "gunicorn.log"
    forged = "/healthz%0A6.6.6.6%20%22GET%20/forged%20HTTP/1.1%22%20200"
    with gunicorn(env, log_path, workers=1) as base:
        assert requests.get(base + forged + "?q=buyer%40example.com", timeout=30).status_code == 404
        assert requests.get(base + "/healthz?q=buyer%40example.com", timeout=30).status_code == 200
    log = log_path.read_text()
    assert "buyer" not in log and "6.6.6.6" not in log.replace(forged, ""), log
    assert [line.split(" ", 3)[:3] for line in log.splitlines()
            if line.startswith("127.0.0.1 ")][-2:] == [
        ["127.0.0.1", '"GET', forged], ["127.0.0.1", '"GET', "/healthz"]]
