"""Pytest plugin: the real service over real HTTP, a merchant's site on a second origin, and a
gateway.

Loaded from conftest.py (``pytest_plugins``). Fixtures:

``live_server``  the ``app`` fixture (the real app: real SQLite file in tmp, the FakeClock
                 ``clock``, ``app_config`` for extra settings) served by werkzeug's threaded HTTP
                 server on 127.0.0.1 and a free port, for one test. Its ``Date`` header is read from
                 the same clock, as in production where the app and the server both use the system
                 clock: the button's countdown runs on the server's time, so moving the clock moves
                 both. ``live_server.merchant_api(secret_key)`` is the merchant API as a merchant's
                 backend calls it (over HTTP, no Origin header); ``live_server.public(...)`` the
                 Button API.
``merchant_site`` a merchant's web site on another port, i.e. another origin (session-wide): its
                 checkout page embeds ``<payment-button>`` with button.js from the live server, so
                 every call the button makes is cross-origin and CORS is real. It also self-hosts a
                 copy of button.js as the service serves it (``/static/button.js``), as a merchant
                 may.
``gateway``      an EXTERNAL failure in front of the real server: a reverse proxy (think of a CDN or
                 load balancer) that forwards everything to the live server, except that it answers
                 ``fail_next(n)`` requests itself with ``502 Bad Gateway`` (an HTML body, with a
                 CORS header so the page may read the status). Our server is never replaced by it.
"""

import http.client
import json
import threading
import time
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from werkzeug.serving import WSGIRequestHandler, make_server

from app.web.button import load_button_script

BUTTON_EVENTS = ["payment-success", "payment-failure", "payment-expired", "payment-cancelled",
                 "payment-error"]


def http_session():
    session = requests.Session()
    session.trust_env = False  # loopback only: no proxy from the environment
    return session


class MerchantApi:
    """The merchant API over HTTP, as a merchant's backend calls it (x-secret-key, no Origin)."""

    def __init__(self, base, secret_key):
        self.base, self.secret_key = base, secret_key
        self.session = http_session()
        self.session.headers["x-secret-key"] = secret_key

    def preorder(self, amount="19.99", metadata=None):
        """Create a process; `amount` is the JSON number literal sent (its digits are kept)."""
        body = f'{{"amount": {amount}, "metadata": {json.dumps(metadata or {"orderRef": "A-1"})}}}'
        response = self.session.post(f"{self.base}/payment-button/process/preorder", data=body,
                                     headers={"Content-Type": "application/json"}, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def get(self, process_id):
        response = self.session.get(f"{self.base}/payment-button/process/{process_id}", timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def cancel(self, process_id):
        response = self.session.post(f"{self.base}/payment-button/process/{process_id}/cancel",
                                     timeout=10)
        assert response.status_code == 200, response.text
        return response.json()


class LiveServer:
    """One app served over HTTP in a background thread (see the module docstring)."""

    def __init__(self, app, clock):
        self.app, self.clock = app, clock
        handler = type("ClockDateHandler", (QuietHandler,), {"clock": staticmethod(clock)})
        self.server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="live-server",
                                       daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def merchant_api(self, secret_key):
        return MerchantApi(self.url, secret_key)

    def public(self, process_id, public_key):
        """GET …/public as the button does; the parsed body (numbers as Python numbers)."""
        response = http_session().get(f"{self.url}/payment-button/process/{process_id}/public",
                                      headers={"x-public-key": public_key}, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def cli(self, *args):
        """`flask --app app ARGS` against this server's app (same database, same clock)."""
        result = self.app.test_cli_runner().invoke(args=list(args))
        assert result.exit_code == 0, result.output
        return result.output


class QuietHandler(WSGIRequestHandler):
    clock = staticmethod(time.time)

    def date_time_string(self, timestamp=None):
        return super().date_time_string(self.clock() if timestamp is None else timestamp)

    def log_request(self, *args, **kwargs):
        pass  # no line per request in the test output


@pytest.fixture
def live_server(app, clock):
    server = LiveServer(app, clock).start()
    yield server
    server.stop()


# --- the merchant's site: another origin ------------------------------------------------------

class MerchantSite:
    """A merchant's checkout pages, on their own origin (a stdlib server: the merchant, not us)."""

    def __init__(self):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), MerchantSiteHandler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="merchant-site",
                         daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def checkout_url(self, service_url, process_id, public_key, script="service", **attrs):
        """The checkout page for a process. `script`: "service" loads button.js from the service
        (the documented embedding), "site" the merchant's own copy; `attrs` become attributes of
        <payment-button> (currency, api-base)."""
        query = {"process-id": process_id, "public-key": public_key, "service": service_url,
                 "script": script, **attrs}
        return f"{self.url}/checkout?{urlencode(query)}"


class MerchantSiteHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/checkout":
            self._send(200, checkout_page(parse_qs(url.query)), "text/html; charset=utf-8")
        elif url.path == "/static/button.js":
            self._send(200, load_button_script().body, "text/javascript; charset=utf-8")
        else:
            self._send(404, b"not found", "text/plain")

    def _send(self, status, body, content_type):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)


def checkout_page(query):
    """The merchant's checkout page: listeners recording the button's events and the delays it asks
    setTimeout for (its poll schedule), then <payment-button> and button.js."""
    one = {name: values[0] for name, values in query.items()}
    service, script = one.pop("service"), one.pop("script")
    src = "/static/button.js" if script == "site" else f"{service}/payment-button/button.js"
    attrs = " ".join(f'{escape(name)}="{escape(value)}"' for name, value in one.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><title>Checkout</title>
<style>body {{ margin: 0; padding: 24px 16px; background: #f3f4f6;
  font-family: system-ui, sans-serif; }}
main {{ max-width: 400px; margin: 0 auto; }} h1 {{ font-size: 20px; margin: 0 0 16px; }}
</style></head>
<body><main><h1>Checkout</h1><payment-button {attrs}></payment-button></main>
<script>
window.__timeouts = [];
const setTimeoutBefore = window.setTimeout;
window.setTimeout = (fn, ms, ...args) => {{
  window.__timeouts.push(ms); return setTimeoutBefore(fn, ms, ...args);
}};
window.__events = [];
for (const type of {json.dumps(BUTTON_EVENTS)}) {{
  document.addEventListener(type, (e) => window.__events.push(
    {{type: e.type, bubbles: e.bubbles, composed: e.composed, detail: e.detail}}));
}}
</script>
<script src="{escape(src)}"></script>
</body></html>"""


@pytest.fixture(scope="session")
def merchant_site():
    site = MerchantSite()
    yield site
    site.stop()


# --- an external failure: a gateway in front of the service -----------------------------------

BAD_GATEWAY = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
              "proxy-authenticate", "proxy-authorization"}


class Gateway:
    """A reverse proxy to `upstream` that answers the next `fail_next(n)` non-preflight requests
    with its own 502 (see the module docstring)."""

    def __init__(self, upstream):
        self.upstream = urlsplit(upstream)
        self._lock = threading.Lock()
        self._failures = 0
        handler = type("GatewayHandler", (GatewayHandler,), {"gateway": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="gateway", daemon=True).start()

    def fail_next(self, count=1):
        with self._lock:
            self._failures += count

    def take_failure(self):
        with self._lock:
            if self._failures:
                self._failures -= 1
                return True
            return False

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class GatewayHandler(BaseHTTPRequestHandler):
    gateway: Gateway
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_OPTIONS(self):
        self._forward()

    def do_GET(self):
        self._fail_or_forward()

    def do_POST(self):
        self._fail_or_forward()

    def _fail_or_forward(self):
        if not self.gateway.take_failure():
            return self._forward()
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(BAD_GATEWAY)))
        self.send_header("Access-Control-Allow-Origin", "*")  # a CORS-aware gateway
        self.end_headers()
        self.wfile.write(BAD_GATEWAY)

    def _forward(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = self.gateway.upstream
        conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=10)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"host"}}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        self.send_response_only(response.status, response.reason)  # upstream's own Date, not ours
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP | {"content-length"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def gateway(live_server):
    proxy = Gateway(live_server.url)
    yield proxy
    proxy.stop()
