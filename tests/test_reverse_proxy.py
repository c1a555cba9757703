"""The production layout: Debian's nginx with deploy/nginx.conf in front of gunicorn (gunicorn.conf.py,
sync workers). 50 connections sending their headers at 1 byte/s (ten times the workers) do not
delay normal preorders; what nginx passes through and what it answers itself (in the JSON envelope).
A missing nginx fails this test (.ci/run installs it)."""
import http.client
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests
import trustme

from nginx import nginx
from servers import create_merchant, flask, free_port, gunicorn, service_env

PREORDER = "/payment-button/process/preorder"
SLOW_CLIENTS = 50


def slow_client(port, tls, stop, sent, index):
    """A request's headers at 1 byte/s until `stop`; counts the bytes sent in sent[index] (-1 if
    the connection failed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with tls.wrap_socket(raw, server_hostname="pay.example.com") as sock:
                sock.sendall(f"POST {PREORDER} HTTP/1.1\r\nHost: pay.example.com\r\nX-Slow: ".encode())
                while not stop.wait(1):
                    sock.sendall(b"a")
                    sent[index] += 1
    except OSError:
        sent[index] = -1


def test_nginx_in_front_holds_slow_clients_and_answers_in_json(tmp_path):
    database = tmp_path / "proxy.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    key = create_merchant(env)["secretKey"]
    ca = trustme.CA()
    cert = ca.issue_cert("pay.example.com")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    https_port, http_port = free_port(), free_port()
    tls = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))

    with gunicorn(env, tmp_path / "gunicorn.log", workers=5) as direct:
        upstream = direct.removeprefix("http://")
        with nginx(tmp_path / "nginx", upstream=upstream, https_port=https_port,
                   http_port=http_port, cert=tmp_path / "cert.pem", key=tmp_path / "key.pem"):
            session = requests.Session()
            session.trust_env = False
            session.verify = str(tmp_path / "ca.pem")
            # The certificate names pay.example.com: connect to loopback, present that name.
            session.mount("https://", _PinnedHost(https_port))
            base = "https://pay.example.com"

            def post(body, secret_key=key, **headers):
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

            # Header lines up to 16 KiB reach the service; longer ones get nginx's 400 in JSON.
            response = post(b'{"amount": 5}', secret_key="x" * 10_000)
            assert (response.status_code, response.json()["code"]) == (401, "invalid_secret_key")
            response = post(b'{"amount": 5}', secret_key="x" * 17_000)
            assert_envelope(response, 400, "bad_request")
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
            assert requests.get(direct + "/metrics", timeout=10).status_code == 200
            # Port 80 sends everything to https.
            plain = requests.get(f"http://127.0.0.1:{http_port}{PREORDER}", timeout=10,
                                 allow_redirects=False, headers={"Host": "pay.example.com"})
            assert (plain.status_code, plain.headers["Location"]) == (301, "https://pay.example.com" + PREORDER)
            # Plain HTTP on the TLS port: nginx's 400, in JSON.
            conn = http.client.HTTPConnection("127.0.0.1", https_port, timeout=10)
            conn.request("GET", "/healthz")
            answer = conn.getresponse()
            assert answer.status == 400 and answer.getheader("Content-Type") == "application/json"
            assert answer.read().startswith(b'{"code":"bad_request"')
            conn.close()
            healthy = session.get(base + "/healthz", timeout=10)
            assert healthy.status_code == 200 and healthy.json()["status"] == "ok"
            assert healthy.headers["Strict-Transport-Security"] == "max-age=31536000"
            assert "nginx/" not in healthy.headers.get("Server", "")
    log = (tmp_path / "gunicorn.log").read_text()
    assert "WORKER TIMEOUT" not in log and "Traceback" not in log


def test_nginx_answers_502_in_json_when_gunicorn_is_down_and_limits_bursts(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("pay.example.com")
    cert.private_key_pem.write_to_path(tmp_path / "key.pem")
    cert.cert_chain_pems[0].write_to_path(tmp_path / "cert.pem")
    ca.cert_pem.write_to_path(tmp_path / "ca.pem")
    https_port = free_port()
    with nginx(tmp_path / "nginx", upstream=f"127.0.0.1:{free_port()}", https_port=https_port,
               http_port=free_port(), cert=tmp_path / "cert.pem", key=tmp_path / "key.pem"):
        def session():
            session = requests.Session()
            session.trust_env = False
            session.verify = str(tmp_path / "ca.pem")
            session.mount("https://", _PinnedHost(https_port))
            return session

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
        time.sleep(1)  # as Retry-After says: the bucket has room again
        assert session().post(url, json={"amount": 5}, timeout=10).status_code == 502


def assert_envelope(response, status, code, message=None):
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"code", "message"} and body["code"] == code
    if message is not None:
        assert body["message"] == message


class _PinnedHost(requests.adapters.HTTPAdapter):
    """Connects every https://pay.example.com request to 127.0.0.1:port, with SNI and certificate
    checks for pay.example.com (no resolver or /etc/hosts involved)."""

    def __init__(self, port):
        self.port = port
        super().__init__()

    def send(self, request, **kwargs):
        request.url = request.url.replace("https://pay.example.com", f"https://127.0.0.1:{self.port}", 1)
        request.headers["Host"] = "pay.example.com"
        return super().send(request, **kwargs)

    def init_poolmanager(self, *args, **kwargs):
        kwargs["server_hostname"] = "pay.example.com"
        kwargs["assert_hostname"] = "pay.example.com"
        super().init_poolmanager(*args, **kwargs)
