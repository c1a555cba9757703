"""Bodies whose framing is broken, sent byte for byte over raw sockets to the real servers
(gunicorn with gunicorn.conf.py, and `flask run`'s werkzeug): a malformed chunked body or a body
shorter than its Content-Length is the client's fault, `400 invalid_request_framing` in the JSON
envelope, never a 500 with a traceback, and never a stored process."""
import json
import socket

import pytest
import requests
from support.framing import BODY, BROKEN_CHUNKED, count_processes
from support.servers import (
    create_merchant,
    flask,
    flask_run,
    gunicorn,
    read_answer,
    service_env,
)

PREORDER = "/payment-button/process/preorder"
METADATA = "M3tadata-c0ntent"


def exchange(base, path, headers, body):
    """Send one request as raw bytes, end our side (shutdown SHUT_WR), and parse the answer."""
    host, port = base.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
             *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        sock.shutdown(socket.SHUT_WR)
        status_line, response_headers, payload = read_answer(sock)
    return int(status_line.split()[1]), response_headers, payload


def assert_framing_error(status, headers, payload):
    assert status == 400, payload
    assert headers["content-type"] == "application/json"
    body = json.loads(payload)
    assert body["code"] == "invalid_request_framing"
    assert set(body) == {"code", "message"} and body["message"]


@pytest.fixture(params=["gunicorn", "flask run"])
def server(request, tmp_path):
    env = service_env(tmp_path / "framing.sqlite3")
    flask(env, "init-db")
    keys = create_merchant(env)
    log_path = tmp_path / "server.log"
    start = (gunicorn(env, log_path, workers=1) if request.param == "gunicorn"
             else flask_run(env, log_path))
    with start as base:
        yield base, keys, env
    log = log_path.read_text()
    assert "Traceback" not in log and " ERROR " not in log, log
    assert METADATA not in log, log


def test_malformed_chunked_bodies_are_400_invalid_request_framing(server):
    base, keys, env = server
    merchant = {"x-secret-key": keys["secretKey"], "Content-Type": "application/json",
                "Transfer-Encoding": "chunked"}
    for body in BROKEN_CHUNKED.values():
        assert_framing_error(*exchange(base, PREORDER, merchant, body))
    # A body sent as it is under Transfer-Encoding: chunked: its first line is read as a chunk size.
    # The log names the error, never the text the server quotes from the body (its metadata).
    unchunked = (json.dumps({"amount": 5, "metadata": {"note": METADATA}}).encode()
                 + b"\r\n0\r\n\r\n")
    assert_framing_error(*exchange(base, PREORDER, merchant, unchunked))
    assert count_processes(env) == 0

    # The button's sandbox payment, on a process that exists: the process stays as it was.
    process_id = requests.post(base + PREORDER, json={"amount": 5}, timeout=30,
                               headers={"x-secret-key": keys["secretKey"]}).json()["processId"]
    pay = f"/payment-button/process/{process_id}/sandbox/pay"
    button = {"x-public-key": keys["publicKey"], "Content-Type": "application/json",
              "Transfer-Encoding": "chunked"}
    for body in BROKEN_CHUNKED.values():
        assert_framing_error(*exchange(base, pay, button, body.replace(BODY, b'{"outcome":"s"}')))
    public = requests.get(base + f"/payment-button/process/{process_id}/public", timeout=30,
                          headers={"x-public-key": keys["publicKey"]}).json()
    assert public["status"] == "pending"

    # A well-formed chunked body still works on the same server.
    ok = exchange(base, PREORDER, merchant, b"%x\r\n" % len(BODY) + BODY + b"\r\n0\r\n\r\n")
    assert ok[0] == 200


def test_a_body_shorter_than_its_content_length_stores_nothing(server):
    base, keys, env = server
    headers = {"x-secret-key": keys["secretKey"], "Content-Type": "application/json",
               "Content-Length": "100"}
    assert len(BODY) == 13
    status, response_headers, payload = exchange(base, PREORDER, headers, BODY)
    assert_framing_error(status, response_headers, payload)
    assert json.loads(payload)["message"] == "The body ended after 13 of its 100 bytes."
    assert count_processes(env) == 0
    # The same body with its true length is a preorder.
    status, _, payload = exchange(base, PREORDER, dict(headers, **{"Content-Length": "13"}), BODY)
    assert status == 200 and count_processes(env) == 1
