"""TEST DOUBLE of the Button API, for the browser tests of the component only (an external API to them).

``ButtonApiDouble`` is a stdlib http.server on 127.0.0.1 answering the two Button API endpoints of
shared/API.md (``GET …/public`` and ``POST …/sandbox/pay``) from a small in-memory table. It is not
our server and tests using it prove nothing about the server: the real endpoints are tested against
the Flask app. Two servers run it: ``api`` (serves button.js and the API) and ``shop`` (serves the
merchant's pages), on different ports, i.e. different origins, so CORS and the script-origin default
of the component are real.

Loaded as a pytest plugin (conftest: ``pytest_plugins``); fixture ``button_double`` is the double, reset for
each test (its servers live for the session).
"""

import email.utils
import json
import re
import threading
import time
import uuid
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

BUTTON_JS = Path(__file__).resolve().parent.parent / "app" / "static" / "button.js"
PROCESS_PATH = re.compile(r"^/payment-button/process/([^/]+)/(public|sandbox/pay)$")
EVENTS = ["payment-success", "payment-failure", "payment-expired", "payment-cancelled", "payment-error"]


def iso(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class ButtonApiDouble:
    """In-memory test double of the Button API (see module docstring). Not our server."""

    def __init__(self):
        self.lock = threading.Lock()
        self.processes = {}
        self.requests = []  # (server name, method, path, headers dict lower-cased, body bytes)
        self.skew = 0  # seconds the double's clock is ahead of the real one
        self.forced = []  # (method, status, body) answered instead of the next matching request
        self.pages = {}  # path -> HTML the shop server serves (pages rendered by a test)
        self.servers = {}

    def now(self):
        return time.time() + self.skew

    def add(self, *, amount="19.99", status="pending", livemode=False, ttl=1800, public_key="pk_test_shop"):
        process_id = str(uuid.uuid4())
        with self.lock:
            self.processes[process_id] = {
                "status": status, "amount": amount, "livemode": livemode,
                "expiresAt": int(self.now()) + ttl, "publicKey": public_key,
            }
        return process_id

    def set_status(self, process_id, status):
        with self.lock:
            self.processes[process_id]["status"] = status

    def status(self, process_id):
        with self.lock:
            return self.processes[process_id]["status"]

    def force_next(self, method, status, body):
        with self.lock:
            self.forced.append((method, status, body))

    def api_requests(self, method=None):
        with self.lock:
            return [r for r in self.requests if r[0] == "api" and r[2] != "/payment-button/button.js"
                    and r[1] != "OPTIONS" and (method is None or r[1] == method)]

    def public_json(self, process_id):
        p = self.processes[process_id]
        # Built by hand so that the amount keeps exactly the digits given (e.g. 1234.50).
        return (
            f'{{"processId": {json.dumps(process_id)}, "status": {json.dumps(p["status"])}, '
            f'"amount": {p["amount"]}, "expiresAt": {json.dumps(iso(p["expiresAt"]))}, '
            f'"livemode": {json.dumps(p["livemode"])}}}'
        )

    def public_dict(self, process_id):
        return json.loads(self.public_json(process_id))

    def url(self, name):
        host, port = self.servers[name].server_address[:2]
        return f"http://{host}:{port}"

    def page_url(self, process_id, public_key="pk_test_shop", script="api", **attrs):
        query = {"process-id": process_id, "public-key": public_key, "script": script, **attrs}
        return f"{self.url('shop')}/checkout?{urlencode(query)}"

    def start(self):
        for name in ("api", "shop"):
            handler = type(f"{name.title()}Handler", (DoubleHandler,), {"double": self, "name": name})
            server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.servers[name] = server

    def stop(self):
        for server in self.servers.values():
            server.shutdown()
            server.server_close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def reset(self):
        """Forget processes, requests, forced answers, pages and clock skew (between tests)."""
        with self.lock:
            for table in (self.processes, self.requests, self.forced, self.pages):
                table.clear()
            self.skew = 0
        return self


class DoubleHandler(BaseHTTPRequestHandler):
    double: ButtonApiDouble
    name: str
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def date_time_string(self, timestamp=None):
        return email.utils.formatdate(self.double.now(), usegmt=True)

    def _record(self, body=b""):
        headers = {k.lower(): v for k, v in self.headers.items()}
        with self.double.lock:
            self.double.requests.append((self.name, self.command, urlsplit(self.path).path, headers, body))

    def _send(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if self.name == "api":
            self.send_header("Access-Control-Allow-Origin", "*")
            self.send_header("Access-Control-Expose-Headers", "Date")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status, code, message):
        self._send(status, json.dumps({"code": code, "message": message}))

    def do_OPTIONS(self):
        self._record()
        self.send_response(204)
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
        self.send_header("Access-Control-Allow-Headers", "x-public-key, content-type")
        self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self._record()
        url = urlsplit(self.path)
        if url.path in ("/payment-button/button.js", "/static/button.js"):
            return self._send(200, BUTTON_JS.read_bytes(), "text/javascript; charset=utf-8")
        if self.name == "shop" and url.path == "/checkout":
            return self._send(200, checkout_page(self.double, parse_qs(url.query)), "text/html; charset=utf-8")
        if self.name == "shop" and url.path in self.double.pages:
            return self._send(200, self.double.pages[url.path], "text/html; charset=utf-8")
        self._api("GET", url.path, None)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._record(body)
        self._api("POST", urlsplit(self.path).path, body)

    def _api(self, method, path, body):
        match = PROCESS_PATH.match(path)
        if self.name != "api" or not match or (method, match[2]) not in {("GET", "public"), ("POST", "sandbox/pay")}:
            return self._error(404, "not_found", "Not found.")
        double = self.double
        with double.lock:
            forced = next((f for f in double.forced if f[0] == method), None)
            if forced:
                double.forced.remove(forced)
        if forced:
            return self._send(forced[1], forced[2])
        key = self.headers.get("x-public-key")
        if not key:
            return self._error(401, "missing_public_key", "The x-public-key header is missing.")
        with double.lock:
            process = double.processes.get(match[1])
            if process is None or process["publicKey"] != key:
                return self._error(404, "not_found", "No such payment process.")
            if method == "GET":
                return self._send(200, double.public_json(match[1]))
            if not (self.headers.get("Content-Type") or "").startswith("application/json"):
                return self._error(415, "unsupported_media_type", "Send application/json.")
            outcome = json.loads(body or b"null")
            if not isinstance(outcome, dict) or outcome.get("outcome") not in ("success", "failure"):
                return self._error(400, "validation_error", "outcome: Must be one of: success, failure.")
            if process["livemode"]:
                return self._error(403, "sandbox_only", "Sandbox payments are only possible in test mode.")
            if process["status"] != "pending" or process["expiresAt"] <= double.now():
                return self._error(409, "invalid_state", f"This payment is {process['status']} and cannot be paid.")
            if outcome["outcome"] == "success":
                process["status"] = "completed"
            return self._send(200, double.public_json(match[1]))


def checkout_page(double, query):
    """A merchant's checkout page: the listeners first, then button.js from the chosen origin."""
    attrs = " ".join(
        f'{escape(name)}="{escape(values[0])}"' for name, values in query.items() if name != "script"
    )
    script = f"{double.url('api')}/payment-button/button.js"
    if query.get("script") == ["shop"]:
        script = "/static/button.js"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Checkout</title>
<style>body {{ margin: 0; padding: 24px 16px; background: #f3f4f6; font-family: system-ui, sans-serif; }}
main {{ max-width: 400px; margin: 0 auto; }} h1 {{ font-size: 20px; margin: 0 0 16px; }}</style></head>
<body><main><h1>Checkout</h1><payment-button {attrs}></payment-button></main>
<script>
window.__timeouts = [];  // delays the page asks setTimeout for: the component's poll schedule
const setTimeoutBefore = window.setTimeout;
window.setTimeout = (fn, ms, ...args) => {{ window.__timeouts.push(ms); return setTimeoutBefore(fn, ms, ...args); }};
window.__events = [];
for (const type of {json.dumps(EVENTS)}) {{
  document.addEventListener(type, (e) => window.__events.push(
    {{type: e.type, bubbles: e.bubbles, composed: e.composed, detail: e.detail}}));
}}
</script>
<script src="{escape(script)}"></script>
</body></html>"""


@pytest.fixture(scope="session")
def api_double():
    with ButtonApiDouble() as double:
        yield double


@pytest.fixture
def button_double(api_double):
    return api_double.reset()
