"""Browser tests of the <payment-button> web component (app/static/button.js) in real Chromium.

TEST DOUBLE, for the component test only: ``ButtonApiDouble`` below is a stand-in for an *external*
API, a stdlib http.server on 127.0.0.1 answering the two Button API endpoints of shared/API.md
(``GET …/public`` and ``POST …/sandbox/pay``) from a small in-memory table. It is not our server and
these tests prove nothing about it: the real endpoints are tested against the Flask app. What these
tests prove is the component's side of the contract: requests it sends, how it shows each answer,
the events it dispatches, its polling, countdown and keyboard behaviour.

Two servers run the double: ``api`` (serves button.js and the API) and ``shop`` (serves the merchant's
page), on different ports, i.e. different origins, so CORS and the script-origin default are real.
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

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect
except ImportError:  # the page fixture (tests/browser.py) skips, or fails in CI, before these are used
    PlaywrightTimeout = expect = None

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


@pytest.fixture(scope="module")
def api_double():
    double = ButtonApiDouble()
    double.start()
    yield double
    double.stop()


@pytest.fixture
def api(api_double):
    with api_double.lock:
        api_double.processes.clear()
        api_double.requests.clear()
        api_double.forced.clear()
        api_double.skew = 0
    return api_double


def button(page, css=""):
    return page.locator(f"payment-button {css}".strip())


def events(page, count):
    page.wait_for_function("n => window.__events.length >= n", arg=count)
    return page.evaluate("window.__events")


FOCUSED_IN_BUTTON = """() => { const el = document.activeElement;
    return el && el.shadowRoot && el.shadowRoot.activeElement ? el.shadowRoot.activeElement.className : ''; }"""


def expect_focus(page, class_name):
    """Wait until the element with this class inside the component has focus (focus moves in tasks)."""
    try:
        page.wait_for_function(f"() => ({FOCUSED_IN_BUTTON})() === {json.dumps(class_name)}", timeout=3000)
    except PlaywrightTimeout:
        pass  # the assertion below says what has focus instead
    assert page.evaluate(FOCUSED_IN_BUTTON) == class_name


def pause_clock(page):
    """Fake the page's timers, paused: they fire only on page.clock.run_for (fetch stays real)."""
    page.clock.install()
    page.clock.pause_at(time.time() * 1000 + 1000)


def set_hidden(page, hidden):
    page.evaluate("""hidden => {
        Object.defineProperty(document, 'hidden', {configurable: true, get: () => hidden});
        document.dispatchEvent(new Event('visibilitychange'));
    }""", hidden)


def test_shows_exact_amount_test_mode_and_countdown(page, api, screenshot):
    pid = api.add(amount="1234.50")
    page.goto(api.page_url(pid, currency="EUR"))

    expect(button(page, ".amount-value")).to_have_text("1234.50")
    expect(button(page, ".currency")).to_have_text("EUR")
    expect(button(page, ".pay")).to_have_text("Pay 1234.50 EUR")
    expect(button(page, ".pay")).to_be_enabled()
    expect(button(page, ".badge")).to_have_text("TEST MODE")
    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in (29:5\d|30:00)$"))
    expect(button(page, ".note")).to_be_hidden()
    (_, method, path, headers, _) = api.api_requests()[0]
    assert (method, path) == ("GET", f"/payment-button/process/{pid}/public")
    assert headers["x-public-key"] == "pk_test_shop"
    assert page.evaluate("window.__events") == []
    screenshot(button(page), "button-pending")


def test_successful_sandbox_payment(page, api, screenshot):
    pid = api.add(amount="19.99")
    page.goto(api.page_url(pid))
    button(page, ".pay").click()

    dialog = button(page, "dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".sandbox-banner")).to_have_text("TEST MODE · SANDBOX")
    expect(dialog.locator(".dlg-amount")).to_have_text("19.99")
    screenshot(page, "button-sandbox-dialog")
    dialog.get_by_role("button", name="Simulate successful payment").click()

    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    expect(button(page, ".outcome-text")).to_have_text("Thank you. 19.99 has been paid.")
    expect(dialog).to_be_hidden()
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".countdown")).to_be_hidden()
    assert events(page, 1) == [{
        "type": "payment-success", "bubbles": True, "composed": True,
        "detail": {**api.public_dict(pid), "status": "completed"},
    }]
    (_, _, path, headers, body) = api.api_requests("POST")[0]
    assert path == f"/payment-button/process/{pid}/sandbox/pay"
    assert (headers["content-type"], headers["x-public-key"], body) == (
        "application/json", "pk_test_shop", b'{"outcome":"success"}')
    assert api.status(pid) == "completed"
    screenshot(button(page), "button-paid")


def test_failed_sandbox_payment_leaves_it_pending_and_can_be_retried(page, api, screenshot):
    pid = api.add(amount="5")
    page.goto(api.page_url(pid))
    button(page, ".pay").click()
    button(page, ".sim-failure").click()

    expect(button(page, ".notice")).to_have_text("Payment failed. No money was taken. You can try again.")
    expect(button(page, "dialog")).to_be_hidden()
    expect(button(page, ".pay")).to_be_enabled()
    expect_focus(page, "pay")
    first = events(page, 1)
    assert first == [{"type": "payment-failure", "bubbles": True, "composed": True,
                      "detail": {**api.public_dict(pid), "status": "pending"}}]
    assert api.api_requests("POST")[0][4] == b'{"outcome":"failure"}'
    assert api.status(pid) == "pending"
    screenshot(button(page), "button-failed")

    button(page, ".pay").click()
    expect(button(page, ".notice")).to_be_hidden()
    button(page, ".sim-success").click()
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert [e["type"] for e in events(page, 2)] == ["payment-failure", "payment-success"]


@pytest.mark.parametrize("status, title, event", [
    ("expired", "Payment expired", "payment-expired"),
    ("cancelled", "Payment cancelled", "payment-cancelled"),
    ("completed", "Payment received", "payment-success"),
])
def test_final_status_at_load_shows_state_and_fires_its_event_once(page, api, screenshot, status, title, event):
    pid = api.add(status=status)
    pause_clock(page)
    page.goto(api.page_url(pid))

    expect(button(page, ".outcome-title")).to_have_text(title)
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".countdown")).to_be_hidden()
    assert events(page, 1) == [{"type": event, "bubbles": True, "composed": True,
                                "detail": api.public_dict(pid)}]
    page.clock.run_for(120_000)  # a final state is never polled
    assert len(api.api_requests()) == 1
    assert len(page.evaluate("window.__events")) == 1
    screenshot(button(page), f"button-{status}")


@pytest.mark.parametrize("status, title, event", [
    ("completed", "Payment received", "payment-success"),
    ("cancelled", "Payment cancelled", "payment-cancelled"),
    ("expired", "Payment expired", "payment-expired"),
])
def test_status_changed_elsewhere_is_followed_by_polling(page, api, status, title, event):
    pid = api.add()
    page.goto(api.page_url(pid))
    expect(button(page, ".pay")).to_be_enabled()
    api.set_status(pid, status)

    expect(button(page, ".outcome-title")).to_have_text(title)
    assert [(e["type"], e["detail"]["status"]) for e in events(page, 1)] == [(event, status)]


def test_countdown_running_out_shows_expired_even_before_the_service_says_so(page, api, screenshot):
    pid = api.add(ttl=2)
    page.goto(api.page_url(pid))
    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in 0:0[12]$"))

    expect(button(page, ".outcome-title")).to_have_text("Payment expired")
    detail = events(page, 1)[0]["detail"]
    assert events(page, 1)[0]["type"] == "payment-expired"
    assert detail == api.public_dict(pid)  # as last read: the double never swept it
    assert detail["status"] == "pending"


@pytest.mark.parametrize("skew", [3600, -3600])
def test_countdown_runs_on_the_server_clock(page, api, skew):
    api.skew = skew  # the double's clock (its Date header and expiresAt) is an hour off the browser's
    pid = api.add(ttl=600)
    page.goto(api.page_url(pid))

    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in (9:5\d|10:00)$"))
    expect(button(page, ".pay")).to_be_enabled()


@pytest.mark.parametrize("process, key, code, message", [
    ("unknown", "pk_test_shop", "not_found", "No such payment process."),
    ("known", "pk_test_other", "not_found", "No such payment process."),
])
def test_load_error_shows_the_api_message(page, api, screenshot, process, key, code, message):
    pid = api.add() if process == "known" else str(uuid.uuid4())
    page.goto(api.page_url(pid, public_key=key))

    expect(button(page, ".notice")).to_have_text(message)
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".retry")).to_be_hidden()
    assert events(page, 1) == [{"type": "payment-error", "bubbles": True, "composed": True,
                                "detail": {"code": code, "message": message, "status": 404}}]
    screenshot(button(page), "button-error")


def test_server_error_can_be_retried(page, api):
    pid = api.add(amount="7.50")
    api.force_next("GET", 500, '{"code": "internal_error", "message": "Something went wrong on our side."}')
    page.goto(api.page_url(pid))

    expect(button(page, ".notice")).to_have_text("Something went wrong on our side.")
    assert events(page, 1)[0]["detail"] == {
        "code": "internal_error", "message": "Something went wrong on our side.", "status": 500}
    button(page, ".retry").click()
    expect(button(page, ".amount-value")).to_have_text("7.50")
    expect(button(page, ".notice")).to_be_hidden()


def test_error_without_json_body_still_says_something(page, api):
    pid = api.add()
    api.force_next("GET", 502, "<html>Bad gateway</html>")
    page.goto(api.page_url(pid))

    expect(button(page, ".notice")).to_have_text("The payment service answered with status 502.")
    assert events(page, 1)[0]["detail"] == {
        "code": "http_502", "message": "The payment service answered with status 502.", "status": 502}


def test_payment_error_shows_message_and_keeps_the_process_payable(page, api):
    pid = api.add()
    page.goto(api.page_url(pid))
    api.force_next("POST", 429, '{"code": "rate_limited", "message": "Too many requests: try again in a moment."}')
    button(page, ".pay").click()
    button(page, ".sim-success").click()

    expect(button(page, ".notice")).to_have_text("Too many requests: try again in a moment.")
    expect(button(page, ".pay")).to_be_enabled()
    assert events(page, 1) == [{"type": "payment-error", "bubbles": True, "composed": True, "detail": {
        "code": "rate_limited", "message": "Too many requests: try again in a moment.", "status": 429}}]
    assert api.status(pid) == "pending"


def test_paying_a_process_cancelled_meanwhile_shows_the_cancellation(page, api):
    pid = api.add()
    page.goto(api.page_url(pid))
    button(page, ".pay").click()
    api.set_status(pid, "cancelled")
    button(page, ".sim-success").click()

    expect(button(page, ".outcome-title")).to_have_text("Payment cancelled")
    got = events(page, 2)
    assert got[0]["detail"] == {"code": "invalid_state", "message": "This payment is cancelled and cannot be paid.",
                                "status": 409}
    assert [e["type"] for e in got] == ["payment-error", "payment-cancelled"]


def test_live_mode_has_no_payment_method_in_this_build(page, api, screenshot):
    pid = api.add(livemode=True, public_key="pk_live_shop")
    page.goto(api.page_url(pid, public_key="pk_live_shop"))

    expect(button(page, ".pay")).to_be_disabled()
    expect(button(page, ".note")).to_have_text("Live payments are not available in this build.")
    expect(button(page, ".badge")).to_be_hidden()
    screenshot(button(page), "button-live")


def test_keyboard_tab_enter_escape(page, api):
    pid = api.add()
    page.goto(api.page_url(pid))
    expect(button(page, ".pay")).to_be_enabled()
    expect(button(page, ".card [role=status][aria-live=polite]")).to_have_count(1)

    page.bring_to_front()  # a new headless page does not always have window focus yet
    page.wait_for_function("document.hasFocus()")
    page.keyboard.press("Tab")
    expect_focus(page, "pay")
    page.keyboard.press("Enter")
    expect(button(page, "dialog")).to_be_visible()
    expect_focus(page, "sim-success")
    page.keyboard.press("Tab")
    expect_focus(page, "sim-failure")
    page.keyboard.press("Escape")
    expect(button(page, "dialog")).to_be_hidden()
    expect_focus(page, "pay")

    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # on "Simulate successful payment"
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    expect_focus(page, "outcome completed")  # focus moved to the result, not lost with the Pay button
    assert api.status(pid) == "completed"


def test_readable_at_320_px(page, api, screenshot):
    pid = api.add(amount="1000000.00")
    page.set_viewport_size({"width": 320, "height": 640})
    page.goto(api.page_url(pid, currency="EUR"))
    expect(button(page, ".amount-value")).to_have_text("1000000.00")

    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    box = button(page, ".pay").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 320
    screenshot(page, "button-320")
    button(page, ".pay").click()
    dialog = button(page, "dialog").bounding_box()
    assert dialog["x"] >= 0 and dialog["x"] + dialog["width"] <= 320
    screenshot(page, "button-320-dialog")


def test_changing_process_id_reinitialises(page, api):
    first = api.add(amount="10.00")
    second = api.add(amount="25.50", status="completed")
    page.goto(api.page_url(first))
    expect(button(page, ".amount-value")).to_have_text("10.00")

    page.evaluate("id => document.querySelector('payment-button').setAttribute('process-id', id)", second)
    expect(button(page, ".amount-value")).to_have_text("25.50")
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert [(e["type"], e["detail"]["processId"]) for e in events(page, 1)] == [("payment-success", second)]


def test_api_base_attribute_overrides_the_script_origin(page, api):
    pid = api.add(amount="3.25")
    page.goto(api.page_url(pid, script="shop", **{"api-base": api.url("api") + "/"}))

    expect(button(page, ".amount-value")).to_have_text("3.25")
    assert [r[2] for r in api.api_requests()] == [f"/payment-button/process/{pid}/public"]


def test_polling_pauses_while_the_page_is_hidden_and_stops_when_final(page, api):
    pid = api.add()
    pause_clock(page)
    page.goto(api.page_url(pid))
    expect(button(page, ".pay")).to_be_enabled()
    assert len(api.api_requests()) == 1

    set_hidden(page, True)
    page.clock.run_for(120_000)
    assert len(api.api_requests()) == 1

    api.set_status(pid, "completed")
    set_hidden(page, False)
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert len(api.api_requests()) == 2
    page.clock.run_for(120_000)
    assert len(api.api_requests()) == 2


def test_animations_respect_reduced_motion(page, api):
    pid = api.add()
    page.goto(api.page_url(pid))
    spinner = "() => getComputedStyle(document.querySelector('payment-button').shadowRoot.querySelector('.spinner')).animationName"
    assert page.evaluate(spinner) == "spin"
    page.emulate_media(reduced_motion="reduce")
    assert page.evaluate(spinner) == "none"


def test_polling_backs_off_from_1_to_15_seconds(page, api):
    pid = api.add()
    pause_clock(page)
    page.goto(api.page_url(pid))
    expect(button(page, ".pay")).to_be_enabled()

    for polls in range(1, 7):  # each poll's answer schedules the next one: wait for it, then run it
        page.wait_for_function("n => window.__timeouts.length >= n", arg=polls)
        assert len(api.api_requests()) == polls
        page.clock.run_for(page.evaluate("window.__timeouts.at(-1)"))
    page.wait_for_function("window.__timeouts.length >= 7")
    assert page.evaluate("window.__timeouts") == [1000, 2000, 4000, 8000, 15000, 15000, 15000]
    assert len(api.api_requests()) == 7
