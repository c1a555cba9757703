"""The production layout: Debian's nginx with deploy/nginx.conf in front of gunicorn
(gunicorn.conf.py, sync workers). 50 connections sending their headers at 1 byte/s (ten times the
workers) do not delay normal preorders; what nginx passes through and what it answers itself. Every
answer that does not come from the service, nginx's own and gunicorn's refusals, is the JSON
envelope, checked over raw sockets (exact status line, Content-Type and body); the service's own
errors pass through byte for byte. A missing nginx fails this test (.ci/run installs it)."""
import http.client
import json
import re
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
import requests
from support.framing import BODY, BROKEN_CHUNKED, count_processes
from support.nginx import https_session, nginx, write_certificates
from support.servers import (
    create_merchant,
    flask,
    free_port,
    gunicorn,
    read_answer,
    service_env,
)

PREORDER = "/payment-button/process/preorder"
SLOW_CLIENTS = 50
PASSWORD = "correct horse battery"


def slow_client(port, tls, stop, sent, index):
    """A request's headers at 1 byte/s until `stop`; counts the bytes sent in sent[index] (-1 if
    the connection failed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with tls.wrap_socket(raw, server_hostname="pay.example.com") as sock:
                sock.sendall(f"POST {PREORDER} HTTP/1.1\r\nHost: pay.example.com\r\n"
                             "X-Slow: ".encode())
                while not stop.wait(1):
                    sock.sendall(b"a")
                    sent[index] += 1
    except OSError:
        sent[index] = -1


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """gunicorn (gunicorn.conf.py, 5 sync workers) behind nginx with deploy/nginx.conf, shared by
    the module's tests; gunicorn's log must show no worker timeout and no traceback at the end."""
    tmp = tmp_path_factory.mktemp("proxy")
    env = service_env(tmp / "proxy.sqlite3")
    flask(env, "init-db")
    keys = create_merchant(env)
    flask(env, "users", "create", "staff@shop.example", "--merchant", keys["merchantId"],
          input=PASSWORD + "\n")
    write_certificates(tmp)
    https_port, http_port = free_port(), free_port()
    with gunicorn(env, tmp / "gunicorn.log", workers=5) as direct:
        with nginx(tmp / "nginx", upstream=direct.removeprefix("http://"), https_port=https_port,
                   http_port=http_port, cert=tmp / "cert.pem", key=tmp / "key.pem"):
            yield SimpleNamespace(
                env=env, key=keys["secretKey"], direct=direct, https_port=https_port,
                http_port=http_port, ca=tmp / "ca.pem", gunicorn_log=tmp / "gunicorn.log",
                nginx_log=tmp / "nginx" / "access.log",
                tls=ssl.create_default_context(cafile=str(tmp / "ca.pem")))
    log = (tmp / "gunicorn.log").read_text()
    assert "WORKER TIMEOUT" not in log and "Traceback" not in log


def test_nginx_in_front_holds_slow_clients_and_answers_in_json(layout):
    session = https_session(layout.https_port, layout.ca)
    base = "https://pay.example.com"
    https_port, tls = layout.https_port, layout.tls

    def post(body, secret_key=layout.key, **headers):
        return session.post(base + PREORDER, data=body, timeout=10, headers={
            "x-secret-key": secret_key, "Content-Type": "application/json", **headers})

    # 50 slow clients, then normal preorders while every one of them is still sending.
    stop, sent = threading.Event(), [0] * SLOW_CLIENTS
    slow = [threading.Thread(target=slow_client, args=(https_port, tls, stop, sent, i))
            for i in range(SLOW_CLIENTS)]
    for thread in slow:
        thread.start()
    try:
        time.sleep(1.5)
        latencies = []
        for _ in range(10):
            started = time.monotonic()
            response = post(b'{"amount": 5}')
            latencies.append(time.monotonic() - started)
            assert response.status_code == 200, response.text
            time.sleep(0.3)
        during = list(sent)
    finally:
        stop.set()
        for thread in slow:
            thread.join(timeout=10)
    assert max(latencies) < 1.0, latencies
    # Every slow client was still connected and sending all along (a byte a second for
    # the 4-5 s of the preorders), none was dropped.
    assert min(during) >= 3 and -1 not in sent, sent

    # Header lines up to 8190 bytes reach the service; longer ones get nginx's 431 in JSON.
    response = post(b'{"amount": 5}', secret_key="x" * 8_000)
    assert (response.status_code, response.json()["code"]) == (401, "invalid_secret_key")
    response = post(b'{"amount": 5}', secret_key="x" * 9_000)
    assert_envelope(response, 431, "headers_too_large")
    # Bodies: the service's own 413 from 64 KiB (chunked too), nginx's 413 past 128 KiB.
    response = post(b'{"amount": 5}' + b" " * (65_536 - 13))
    assert response.status_code == 200
    response = post(b'{"amount": 5}' + b" " * (65_537 - 13))
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
    response = post(iter([b'{"amount": 5}', b" " * (65_537 - 13)]))
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
    response = post(b" " * 200_000)
    assert_envelope(response, 413, "payload_too_large",
                    "The request body is larger than 65536 bytes.")
    # /metrics does not exist from outside; gunicorn's own port still serves it.
    assert_envelope(session.get(base + "/metrics", timeout=10), 404, "not_found")
    assert requests.get(layout.direct + "/metrics", timeout=10).status_code == 200
    # Port 80 sends everything to https, with the envelope as the redirect's body.
    plain = requests.get(f"http://127.0.0.1:{layout.http_port}{PREORDER}", timeout=10,
                         allow_redirects=False, headers={"Host": "pay.example.com"})
    assert (plain.status_code, plain.headers["Location"]) == (301,
                                                              "https://pay.example.com" + PREORDER)
    assert_envelope(plain, 301, "https_required")
    # Plain HTTP on the TLS port: nginx's 400, in JSON.
    conn = http.client.HTTPConnection("127.0.0.1", https_port, timeout=10)
    conn.request("GET", "/healthz")
    answer = conn.getresponse()
    assert answer.status == 400 and answer.getheader("Content-Type") == "application/json"
    assert json.loads(answer.read()) == {
        "code": "bad_request", "message": "Plain HTTP was sent to the HTTPS port; use https."}
    conn.close()
    healthy = session.get(base + "/healthz", timeout=10)
    assert healthy.status_code == 200 and healthy.json()["status"] == "ok"
    assert healthy.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert "nginx/" not in healthy.headers.get("Server", "")


HOST = b"Host: pay.example.com\r\nConnection: close\r\n"
NOT_HTTP = ("HTTP/1.1 400 Bad Request", "bad_request", "The request is not valid HTTP.")
HEADERS_TOO_LARGE = ("HTTP/1.1 431 ", "headers_too_large",
                     "A header line is longer than 8190 bytes, or the request header is larger"
                     " than 32 KiB.")


def request_line(length):
    """A GET of /healthz whose request line (without its CRLF) is `length` bytes long."""
    query = b"a" * (length - len(b"GET /healthz? HTTP/1.1"))
    return b"GET /healthz?" + query + b" HTTP/1.1\r\n"


# What nginx refuses itself, before the service sees anything: (request bytes, status line, code,
# message). The request line and header line limits are exact, at nginx's 8 KiB buffers.
NGINX_REFUSALS = {
    "not a request line": (b"garbage\r\n\r\n", *NOT_HTTP),
    "a NUL byte in the path": (b"GET /healthz%00 HTTP/1.1\r\n" + HOST + b"\r\n", *NOT_HTTP),
    "a NUL byte in a header": (b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-A: a\x00b\r\n\r\n",
                               *NOT_HTTP),
    "no Host in HTTP/1.1": (b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", *NOT_HTTP),
    "a path above the root": (b"GET /../healthz HTTP/1.1\r\n" + HOST + b"\r\n", *NOT_HTTP),
    "Content-Length and chunked": (
        b"POST " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST
        + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", *NOT_HTTP),
    "HTTP/9.9": (b"GET /healthz HTTP/9.9\r\n" + HOST + b"\r\n",
                 "HTTP/1.1 505 HTTP Version Not Supported", "http_version_not_supported",
                 "Only HTTP/1.0 and HTTP/1.1 are supported."),
    "Transfer-Encoding: gzip, chunked": (
        b"POST " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST
        + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        "HTTP/1.1 501 Not Implemented", "not_implemented",
        "The request uses an HTTP feature this service does not implement (a Transfer-Encoding "
        "other than chunked)."),
    "a request line of 8191 bytes": (request_line(8191) + HOST + b"\r\n",
                                     "HTTP/1.1 414 Request-URI Too Large", "uri_too_long",
                                     "The request line is longer than 8190 bytes."),
    "a request line of 16 KiB": (request_line(16_384) + HOST + b"\r\n",
                                 "HTTP/1.1 414 Request-URI Too Large", "uri_too_long",
                                 "The request line is longer than 8190 bytes."),
    "a header line of 8191 bytes": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-A: " + b"a" * (8191 - 5) + b"\r\n\r\n",
        *HEADERS_TOO_LARGE),
    "40 KiB of header lines": (
        b"GET /healthz HTTP/1.1\r\n" + HOST
        + b"".join(b"X-%d: " % i + b"a" * 8000 + b"\r\n" for i in range(5)) + b"\r\n",
        *HEADERS_TOO_LARGE),
    "an internal location": (b"GET /_errors/500 HTTP/1.1\r\n" + HOST + b"\r\n",
                             "HTTP/1.1 404 Not Found", "not_found", "Not found."),
    "DELETE on the ACME challenge": (
        b"DELETE /.well-known/acme-challenge/x HTTP/1.1\r\n" + HOST + b"\r\n",
        "HTTP/1.1 405 Not Allowed", "method_not_allowed", "Method not allowed."),
}

# What passes nginx and gunicorn refuses itself, before the application: its answer, enveloped
# by gunicorn_workers.py. nginx sends Host, X-Forwarded-For, X-Forwarded-Proto and Connection with
# the client's other fields: 97 more are 101 fields, one over gunicorn's limit (96: the service).
GUNICORN_REFUSALS = {
    "97 more header fields": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"".join(b"X-F%d: 1\r\n" % i for i in range(97))
        + b"\r\n",
        "HTTP/1.1 431 Request Header Fields Too Large", "headers_too_large",
        "The request has more than 100 header fields, or one longer than 16384 bytes."),
    "a control byte in x-secret-key": (
        b"GET /payment-button/processes HTTP/1.1\r\n" + HOST
        + b"x-secret-key: sk_test_\x01\r\n\r\n",
        *NOT_HTTP),
    "DEL in a header value": (b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-A: a\x7fb\r\n\r\n",
                              *NOT_HTTP),
    "a two-letter method": (b"AB /healthz HTTP/1.1\r\n" + HOST + b"\r\n", *NOT_HTTP),
    "a byte over 0x7f in the path": (b"GET /healthz\xff HTTP/1.1\r\n" + HOST + b"\r\n", *NOT_HTTP),
}


def exchange(layout, data, *, tls=True, port=None):
    """One request as raw bytes on a new connection (TLS to nginx's 443 unless told), the answer
    as (status line, headers, body)."""
    with socket.create_connection(("127.0.0.1", port or layout.https_port), timeout=10) as sock:
        if tls:
            sock = layout.tls.wrap_socket(sock, server_hostname="pay.example.com")
        sock.sendall(data)
        return read_answer(sock)


def assert_raw_envelope(answer, status_line, code, message):
    line, headers, body = answer
    assert line == status_line, body
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"code": code, "message": message}


@pytest.mark.parametrize("case", [*NGINX_REFUSALS, *GUNICORN_REFUSALS])
def test_refusals_before_the_application_are_the_json_envelope(layout, case):
    data, *expected = {**NGINX_REFUSALS, **GUNICORN_REFUSALS}[case]
    assert_raw_envelope(exchange(layout, data), *expected)


def test_the_limits_are_exact_and_what_is_within_them_reaches_the_service(layout):
    for data in (request_line(8190) + HOST + b"\r\n",
                 b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-A: " + b"a" * (8190 - 5) + b"\r\n\r\n",
                 b"GET /healthz HTTP/1.1\r\n" + HOST
                 + b"".join(b"X-F%d: 1\r\n" % i for i in range(96)) + b"\r\n",
                 # A client's X-Forwarded-Ssl passes nginx; gunicorn trusts only X-Forwarded-Proto,
                 # which nginx overwrites, so the two never disagree.
                 b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Forwarded-Ssl: off\r\n\r\n"):
        line, headers, body = exchange(layout, data)
        assert line == "HTTP/1.1 200 OK" and json.loads(body)["status"] == "ok", body


def test_port_80_answers_in_json_too(layout):
    assert_raw_envelope(exchange(layout, b"garbage\r\n\r\n", tls=False, port=layout.http_port),
                        *NOT_HTTP)
    line, headers, body = exchange(
        layout, b"POST " + PREORDER.encode() + b"?a=1 HTTP/1.1\r\n" + HOST
        + b"Content-Length: 2\r\n\r\n{}",
        tls=False, port=layout.http_port)
    assert headers["location"] == "https://pay.example.com" + PREORDER + "?a=1"
    assert_raw_envelope((line, headers, body), "HTTP/1.1 301 Moved Permanently", "https_required",
                        "This service is served over https only; the Location header has the"
                        " https URL.")


def test_the_services_own_errors_pass_through_nginx_unchanged(layout):
    """Statuses nginx also answers itself (400, 404, 413) included: nginx replaces only its own."""
    key = layout.key.encode()
    merchant = b"x-secret-key: " + key + b"\r\nContent-Type: application/json\r\n"
    too_large = b'{"amount": 5}' + b" " * 70_000
    requests_ = [
        (b"POST " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST + merchant
         + b"Content-Length: 1\r\n\r\n{", 400, "invalid_json"),
        (b"POST " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST + merchant
         + b'Content-Length: 14\r\n\r\n{"amount": -1}', 400, "validation_error"),
        (b"GET /payment-button/processes HTTP/1.1\r\n" + HOST + b"\r\n", 401, "missing_secret_key"),
        (b"GET /nowhere HTTP/1.1\r\n" + HOST + b"\r\n", 404, "not_found"),
        (b"GET " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST + b"\r\n", 405,
         "method_not_allowed"),
        (b"POST " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST + merchant
         + b"Content-Length: %d\r\n\r\n" % len(too_large) + too_large, 413, "payload_too_large"),
        (b"POST " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST + b"x-secret-key: " + key
         + b"\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}", 415,
         "unsupported_media_type"),
    ]
    direct_port = int(layout.direct.rsplit(":", 1)[1])
    for data, status, code in requests_:
        via_nginx = exchange(layout, data)
        direct = exchange(layout, data, tls=False, port=direct_port)
        assert int(via_nginx[0].split()[1]) == int(direct[0].split()[1]) == status, via_nginx
        assert via_nginx[1]["content-type"] == direct[1]["content-type"] == "application/json"
        assert json.loads(direct[2])["code"] == json.loads(via_nginx[2])["code"] == code
        if status == 405:
            # The methods in Allow and in the message come in an order that varies between
            # gunicorn's worker processes (werkzeug keeps them in a set).
            for headers, body in (via_nginx[1:], direct[1:]):
                assert sorted(headers["allow"].split(", ")) == ["OPTIONS", "POST"]
                assert json.loads(body)["message"] == (
                    f"Method GET is not allowed here; allowed: {headers['allow']}.")
        else:
            assert via_nginx[2] == direct[2]
        if code == "validation_error":
            assert json.loads(via_nginx[2])["errors"] == {"amount": ["Must be greater than 0."]}


def test_broken_framing_is_refused_by_nginx_and_nothing_is_stored(layout):
    before = count_processes(layout.env)
    head = (b"POST " + PREORDER.encode() + b" HTTP/1.1\r\n" + HOST + b"x-secret-key: "
            + layout.key.encode() + b"\r\nContent-Type: application/json\r\n")
    chunked = head + b"Transfer-Encoding: chunked\r\n\r\n"
    for name, body in BROKEN_CHUNKED.items():
        if name != "no last chunk":
            assert_raw_envelope(exchange(layout, chunked + body), *NOT_HTTP)
    # A body that stops short (no last chunk; 13 of 100 announced bytes), then the client ends its
    # side (TLS close_notify): nginx closes the connection without asking gunicorn and without an
    # answer (an answer would fail unwrap() as application data after close_notify, not as EOF).
    for data in (chunked + BROKEN_CHUNKED["no last chunk"],
                 head + b"Content-Length: 100\r\n\r\n" + BODY):
        with socket.create_connection(("127.0.0.1", layout.https_port), timeout=10) as raw:
            sock = layout.tls.wrap_socket(raw, server_hostname="pay.example.com")
            sock.sendall(data)
            with pytest.raises(ssl.SSLEOFError):
                sock.unwrap()
    assert count_processes(layout.env) == before


def test_nginx_answers_502_in_json_when_gunicorn_is_down_and_limits_bursts(tmp_path):
    write_certificates(tmp_path)
    https_port = free_port()
    with nginx(tmp_path / "nginx", upstream=f"127.0.0.1:{free_port()}", https_port=https_port,
               http_port=free_port(), cert=tmp_path / "cert.pem", key=tmp_path / "key.pem"):
        def session():
            return https_session(https_port, tmp_path / "ca.pem")

        url = "https://pay.example.com" + PREORDER
        response = session().post(url, json={"amount": 5}, timeout=10)
        assert_envelope(response, 502, "unavailable",
                        "The service is not answering; try again shortly.")

        # One client address past 50 requests a second (bursts of 100): nginx's 429 in the
        # envelope with Retry-After, counted for every gunicorn worker at once. Requests under the
        # limit pass on (here to the missing gunicorn: 502).
        def burst(_):
            with session() as s:
                return [s.post(url, json={"amount": 5}, timeout=10) for _ in range(60)]

        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            answers = [r for rs in pool.map(burst, range(8)) for r in rs]
        elapsed = time.monotonic() - started
        passed = [r for r in answers if r.status_code == 502]
        limited = [r for r in answers if r.status_code == 429]
        assert len(passed) + len(limited) == 480
        assert limited and len(passed) <= 100 + 50 * elapsed + 1, (len(passed), elapsed)
        assert_envelope(limited[0], 429, "rate_limited",
                        "Too many requests; retry after the number of seconds in Retry-After.")
        assert limited[0].headers["Retry-After"] == "1"
        assert limited[0].headers["Strict-Transport-Security"] == "max-age=31536000"
        time.sleep(1)  # as Retry-After says: the bucket has room again
        assert session().post(url, json={"amount": 5}, timeout=10).status_code == 502


SEARCHED = "buyer-secret@example.com"


def test_the_access_logs_hold_the_path_never_the_query_string(layout):
    """A console search's query string is a metadata value (a customer's e-mail): neither nginx's
    nor gunicorn's access log keeps it (nor a Referer holding it), in any encoding; both keep the
    method, path and status."""
    session = https_session(layout.https_port, layout.ca)
    base = "https://pay.example.com"
    created = session.post(base + PREORDER, json={"amount": 5, "metadata": {"email": SEARCHED}},
                           headers={"x-secret-key": layout.key}, timeout=10)
    assert created.status_code == 200, created.text
    process_id = created.json()["processId"]
    form = session.get(base + "/dashboard/login", timeout=10)
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1)
    logged_in = session.post(base + "/dashboard/login", timeout=10, allow_redirects=False, data={
        "email": "staff@shop.example", "password": PASSWORD, "csrf_token": token})
    assert (logged_in.status_code, logged_in.headers["Location"]) == (303, "/dashboard/overview")

    found = session.get(base + "/dashboard/", params={"q": SEARCHED}, timeout=10)
    assert found.status_code == 200 and process_id in found.text
    assert found.request.path_url == "/dashboard/?q=buyer-secret%40example.com"
    # The search page's URL as the Referer, as a browser without the console's no-referrer sends it.
    exported = session.get(base + "/dashboard/processes.csv", params={"q": SEARCHED}, timeout=10,
                           headers={"Referer": found.url})
    assert exported.status_code == 200 and SEARCHED in exported.text
    # nginx's own answer: logged with the path asked, not its /_errors/ location.
    assert_envelope(session.get(base + "/metrics", params={"q": SEARCHED}, timeout=10), 404,
                    "not_found")

    # Whole lines: nginx's in combined's layout (Referer "-"), gunicorn's as nginx asked it
    # (HTTP/1.1).
    nginx_lines = [r'^127\.0\.0\.1 - - \[[^]]+\] "GET ' + re.escape(path)
                   + rf' HTTP/1\.1" {status} \d+ "-" "python-requests/[\d.]+"$'
                   for path, status in (("/dashboard/", 200), ("/dashboard/processes.csv", 200),
                                        ("/metrics", 404))]
    gunicorn_lines = [r'^127\.0\.0\.1 "GET ' + re.escape(path) + r' HTTP/1\.1" 200 \d+ \d+ms$'
                      for path in ("/dashboard/", "/dashboard/processes.csv")]
    nginx_log = _logged(layout.nginx_log, nginx_lines)
    gunicorn_log = _logged(layout.gunicorn_log, gunicorn_lines)
    for log in (nginx_log, gunicorn_log):
        assert "buyer-secret" not in log, log
    for line in nginx_lines:
        assert re.search(line, nginx_log, re.MULTILINE), nginx_log
    for line in gunicorn_lines:
        assert re.search(line, gunicorn_log, re.MULTILINE), gunicorn_log


def _logged(path, lines, timeout=10):
    """The log once it holds every line (or the timeout passed): a streamed answer (the CSV) is
    logged after its last chunk is sent, which the client may have read before."""
    deadline = time.monotonic() + timeout
    while True:
        text = path.read_text()
        if (all(re.search(line, text, re.MULTILINE) for line in lines)
                or time.monotonic() > deadline):
            return text
        time.sleep(0.05)


def test_the_consoles_cookies_have_the_host_prefix_behind_nginx(layout):
    # Behind nginx with TLS the service sees https (X-Forwarded-Proto): every console cookie is
    # __Host-: set only by this host over HTTPS, for the whole host, never by a sibling subdomain.
    session = https_session(layout.https_port, layout.ca)
    base = "https://pay.example.com"
    form = session.get(base + "/dashboard/login", timeout=10)
    [login_csrf] = form.headers.get("Set-Cookie").split(", ")
    assert re.fullmatch(r"__Host-console_login_csrf=[\w-]+; Secure; HttpOnly; Path=/;"
                        r" SameSite=Strict",
                        login_csrf), login_csrf
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1)
    logged_in = session.post(base + "/dashboard/login", timeout=10, allow_redirects=False, data={
        "email": "staff@shop.example", "password": PASSWORD, "csrf_token": token})
    assert logged_in.status_code == 303
    cookies = logged_in.raw.headers.getlist("Set-Cookie")
    assert [c.split("=", 1)[0] for c in cookies] == ["__Host-console_session",
                                                     "__Host-console_login_csrf"]
    assert all("; Secure" in c and "; Path=/" in c and "Domain" not in c for c in cookies), cookies
    assert session.get(base + "/dashboard/", timeout=10, allow_redirects=False).status_code == 200
    out = session.post(base + "/dashboard/logout", timeout=10, allow_redirects=False,
                       data={"csrf_token": re.search(
                           r'name="csrf_token" value="([^"]+)"',
                           session.get(base + "/dashboard/", timeout=10).text).group(1)})
    assert out.raw.headers.getlist("Set-Cookie")[0].startswith(
        "__Host-console_session=; Expires=Thu, 01 Jan 1970")


def assert_envelope(response, status, code, message=None):
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"code", "message"} and body["code"] == code
    if message is not None:
        assert body["message"] == message
