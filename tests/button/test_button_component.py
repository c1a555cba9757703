"""Browser tests of the <payment-button> web component (app/static/button.js, the modules it imports
from app/static/button/) in real Chromium, against the real service (``live_server``: real app, real
SQLite, real HTTP, the FakeClock).

The button sits on a merchant's checkout page on another origin (``merchant_site``), so its calls
are cross-origin and CORS is exercised for real. Processes are created with the merchant API and a
merchant made with the operator CLI; they change state the real ways: sandbox payments from the
button, cancellation through the merchant API, `processes complete` (operator), and expiry by moving
the clock. Its failures are real too: a 500 while another writer holds SQLite's lock, 404 and 401
answers. The one failure the service cannot produce, a broken gateway in front of it, comes from
``gateway`` (an external 502, tests/support/live_server.py); dropped from the double-based version:
a scripted 429 on payment (the service has no rate limiter to trigger).
"""

import json
import re
import threading
import time
import uuid
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from support.browser import expect_ready, tab_from
from support.helpers import events_of
from support.live_server import MerchantSite, MerchantSiteHandler

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before these are used
    PlaywrightTimeout = expect = None

TTL = 1800  # PROCESS_TTL_SECONDS default
BUTTON_FOLDER = Path(__file__).resolve().parents[2] / "app" / "static" / "button"


class Shop:
    """One test-mode merchant (made with the CLI) selling on `merchant_site`."""

    def __init__(self, live_server, merchant_site, keys):
        self.live, self.site, self.keys = live_server, merchant_site, keys
        self.api = live_server.merchant_api(keys["secretKey"])

    def create(self, amount="19.99"):
        return self.api.preorder(amount)["processId"]

    def url(self, process_id, public_key=None, **attrs):
        return self.site.checkout_url(self.live.url, process_id,
                                      public_key or self.keys["publicKey"], **attrs)

    def public(self, process_id):
        return self.live.public(process_id, self.keys["publicKey"])

    def complete(self, process_id):
        self.live.cli("processes", "complete", process_id)

    def set_currency(self, code):
        self.live.cli("merchants", "set-currency", self.keys["merchantId"], code)


@pytest.fixture
def shop(live_server, merchant_site, make_merchant):
    return Shop(live_server, merchant_site, make_merchant())


@pytest.fixture
def api_calls(page, live_server):
    """The Button API requests the page sends (preflights left out), as Playwright Request objects;
    call it with a method to filter."""
    seen = []
    prefix = f"{live_server.url}/payment-button/process/"
    page.on("request", lambda r: seen.append(r)
            if r.url.startswith(prefix) and r.method != "OPTIONS" else None)
    return lambda method=None: [r for r in seen if method in (None, r.method)]


def button(page, css=""):
    return page.locator(f"payment-button {css}".strip())


def events(page, count):
    page.wait_for_function("n => window.__events.length >= n", arg=count)
    return page.evaluate("window.__events")


def event(type_, detail):
    return {"type": type_, "bubbles": True, "composed": True, "detail": detail}


FOCUSED_IN_BUTTON = """() => { const el = document.activeElement;
    return el && el.shadowRoot && el.shadowRoot.activeElement
        ? el.shadowRoot.activeElement.className : ''; }"""


def expect_focus(page, class_name):
    """Wait until the element with this class inside the component has focus (focus moves in
    tasks)."""
    try:
        page.wait_for_function(f"() => ({FOCUSED_IN_BUTTON})() === {json.dumps(class_name)}",
                               timeout=3000)
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


def test_shows_exact_amount_test_mode_and_countdown(page, shop, api_calls, screenshot):
    shop.set_currency("EUR")  # the process's currency comes from the service (the merchant's)
    pid = shop.create(amount="1234.50")
    page.goto(shop.url(pid))

    # In the currency, as the page's language (<html lang="en">) writes it, from the exact digits.
    expect(button(page, ".amount-value")).to_have_text("€1,234.50")
    expect(button(page, ".currency")).to_be_hidden()
    expect(button(page, ".pay")).to_have_text("Pay €1,234.50")
    expect_ready(button(page, ".pay"))
    expect(button(page, ".badge")).to_have_text("TEST MODE")
    # The service's clock (START, in 2026) is far from the browser's: the countdown uses the former.
    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in (29:5\d|30:00)$"))
    expect(button(page, ".note")).to_be_hidden()
    first = api_calls()[0]
    assert (first.method, first.url) == (
        "GET", f"{shop.live.url}/payment-button/process/{pid}/public")
    assert first.headers["x-public-key"] == shop.keys["publicKey"]
    assert page.evaluate("window.__events") == []
    screenshot(button(page), "button-pending")


def test_successful_sandbox_payment(page, shop, api_calls, runner, screenshot):
    pid = shop.create(amount="19.99")
    page.goto(shop.url(pid))
    button(page, ".pay").click()

    dialog = button(page, "dialog")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".sandbox-banner")).to_have_text("TEST MODE · SANDBOX")
    # the merchant's currency: USD by default
    expect(dialog.locator(".dlg-amount")).to_have_text("$19.99")
    screenshot(page, "button-sandbox-dialog")
    dialog.get_by_role("button", name="Simulate successful payment").click()

    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    expect(button(page, ".outcome-text")).to_have_text("Thank you. $19.99 has been paid.")
    expect(dialog).to_be_hidden()
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".countdown")).to_be_hidden()
    assert shop.public(pid)["status"] == "completed"
    assert events(page, 1) == [event("payment-success", shop.public(pid))]
    [pay] = api_calls("POST")
    assert pay.url == f"{shop.live.url}/payment-button/process/{pid}/sandbox/pay"
    assert (pay.headers["content-type"], pay.headers["x-public-key"], pay.post_data) == (
        "application/json", shop.keys["publicKey"], '{"outcome":"success"}')
    assert shop.api.get(pid)["status"] == "completed"
    assert events_of(runner, pid) == ["payment.completed"]
    screenshot(button(page), "button-paid")


def test_failed_sandbox_payment_leaves_it_pending_and_can_be_retried(page, shop, api_calls, runner,
                                                                     screenshot):
    pid = shop.create(amount="5")
    page.goto(shop.url(pid))
    button(page, ".pay").click()
    button(page, ".sim-failure").click()

    expect(button(page, ".notice")).to_have_text(
        "Payment failed. No money was taken. You can try again.")
    expect(button(page, "dialog")).to_be_hidden()
    expect_ready(button(page, ".pay"))
    expect_focus(page, "pay")
    assert events(page, 1) == [event("payment-failure", shop.public(pid))]
    assert shop.public(pid)["status"] == "pending"
    assert api_calls("POST")[0].post_data == '{"outcome":"failure"}'
    assert events_of(runner, pid) == ["payment.failed"]
    screenshot(button(page), "button-failed")

    button(page, ".pay").click()
    expect(button(page, ".notice")).to_be_hidden()
    button(page, ".sim-success").click()
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert [e["type"] for e in events(page, 2)] == ["payment-failure", "payment-success"]
    assert events_of(runner, pid) == ["payment.failed", "payment.completed"]


@pytest.mark.parametrize("status, title, event_type", [
    ("expired", "Payment expired", "payment-expired"),
    ("cancelled", "Payment cancelled", "payment-cancelled"),
    ("completed", "Payment received", "payment-success"),
])
def test_final_status_at_load_shows_state_and_fires_its_event_once(
        page, shop, api_calls, clock, screenshot, status, title, event_type):
    pid = shop.create()
    if status == "expired":
        clock.advance(TTL)  # past expiresAt: expired, whether or not a sweep has marked it
    elif status == "cancelled":
        shop.api.cancel(pid)
    else:
        shop.complete(pid)
    assert shop.public(pid)["status"] == status
    pause_clock(page)
    page.goto(shop.url(pid))

    expect(button(page, ".outcome-title")).to_have_text(title)
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".countdown")).to_be_hidden()
    assert events(page, 1) == [event(event_type, shop.public(pid))]
    page.clock.run_for(120_000)  # a final state is never polled
    assert len(api_calls()) == 1
    assert len(page.evaluate("window.__events")) == 1
    screenshot(button(page), f"button-{status}")


@pytest.mark.parametrize("status, title, event_type", [
    ("completed", "Payment received", "payment-success"),
    ("cancelled", "Payment cancelled", "payment-cancelled"),
    ("expired", "Payment expired", "payment-expired"),
])
def test_status_changed_elsewhere_is_followed_by_polling(page, shop, clock, status, title,
                                                         event_type):
    pid = shop.create()
    page.goto(shop.url(pid))
    expect_ready(button(page, ".pay"))
    if status == "completed":
        shop.complete(pid)  # an operator confirming a payment received outside the button
    elif status == "cancelled":
        shop.api.cancel(pid)  # the merchant's backend
    else:
        clock.advance(TTL)

    expect(button(page, ".outcome-title")).to_have_text(title)
    assert [(e["type"], e["detail"]["status"]) for e in events(page, 1)] == [(event_type, status)]


def test_countdown_running_out_shows_expired_even_before_the_service_says_so(page, shop, clock,
                                                                             screenshot):
    pid = shop.create()
    clock.advance(TTL - 1)  # one second left on the service's clock, which then stands still
    page.goto(shop.url(pid))
    expect(button(page, ".countdown")).to_have_text("Expires in 0:01")

    expect(button(page, ".outcome-title")).to_have_text("Payment expired")
    [got] = events(page, 1)
    assert got == event("payment-expired", shop.public(pid))  # as last read: never swept
    assert got["detail"]["status"] == "pending"


@pytest.mark.parametrize("skew", [3600, -3600])
def test_countdown_runs_on_the_server_clock(page, shop, clock, skew):
    # the service's clock (its Date and expiresAt) an hour off the browser's
    clock.now = int(time.time()) + skew
    clock.advance(-(TTL - 600))
    pid = shop.create()
    clock.advance(TTL - 600)  # created 20 min ago: 10 min left
    page.goto(shop.url(pid))

    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in (9:5\d|10:00)$"))
    expect_ready(button(page, ".pay"))


@pytest.mark.parametrize("process", ["unknown", "another merchant's"])
def test_load_error_shows_the_api_message(page, shop, make_merchant, screenshot, process):
    if process == "unknown":
        pid = str(uuid.uuid4())
    else:
        other = make_merchant(name="Other shop")
        pid = shop.live.merchant_api(other["secretKey"]).preorder()["processId"]
    page.goto(shop.url(pid))

    expect(button(page, ".notice")).to_have_text("No such process.")
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".retry")).to_be_hidden()
    assert events(page, 1) == [event("payment-error", {"code": "not_found",
                                                        "message": "No such process.",
                                                        "status": 404})]
    screenshot(button(page), "button-error")


def test_invalid_public_key_shows_the_api_message(page, shop):
    pid = shop.create()
    page.goto(shop.url(pid, public_key=shop.keys["secretKey"]))  # a merchant pasting the wrong key

    message = ("x-public-key holds a secret key: a secret key must never be in frontend code."
               " Use the public key (pk_...), and rotate the exposed secret key now.")
    expect(button(page, ".notice")).to_have_text(message)
    assert events(page, 1)[0]["detail"] == {"code": "invalid_public_key", "message": message,
                                            "status": 401}


def test_gateway_failure_says_something_and_can_be_retried(page, shop, gateway):
    pid = shop.create(amount="7.50")
    gateway.fail_next(1)
    page.goto(shop.url(pid, **{"api-base": gateway.url}))

    expect(button(page, ".notice")).to_have_text("The payment service answered with status 502.")
    assert events(page, 1)[0]["detail"] == {
        "code": "http_502", "message": "The payment service answered with status 502.",
        "status": 502}
    button(page, ".retry").click()
    expect(button(page, ".amount-value")).to_have_text("$7.50")
    expect(button(page, ".notice")).to_be_hidden()
    expect_ready(button(page, ".pay"))


@pytest.mark.sqlite_only  # the 503 comes from holding SQLite's one write lock
@pytest.mark.parametrize("app_config", [{"SQLITE_BUSY_TIMEOUT_MS": 200}])
def test_payment_error_shows_message_and_keeps_the_process_payable(page, shop, live_server, runner):
    pid = shop.create()
    pause_clock(page)  # no timed poll meanwhile: the answers under test are the payment's
    page.goto(shop.url(pid))
    expect_ready(button(page, ".pay"))
    button(page, ".pay").click()
    message = "The service cannot reach its database; try again later."
    # another writer holds SQLite's lock too long
    with live_server.app.extensions["db"].transaction():
        button(page, ".sim-success").click()
        expect(button(page, ".notice")).to_have_text(message)

    expect_ready(button(page, ".pay"))
    assert events(page, 1) == [event("payment-error", {"code": "service_unavailable",
                                                        "message": message, "status": 503})]
    assert shop.public(pid)["status"] == "pending"
    assert events_of(runner, pid) == []
    button(page, ".pay").click()
    button(page, ".sim-success").click()
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert events_of(runner, pid) == ["payment.completed"]


def test_paying_a_process_cancelled_meanwhile_shows_the_cancellation(page, shop):
    pid = shop.create()
    page.goto(shop.url(pid))
    button(page, ".pay").click()
    shop.api.cancel(pid)
    button(page, ".sim-success").click()

    expect(button(page, ".outcome-title")).to_have_text("Payment cancelled")
    got = events(page, 2)
    assert got[0]["detail"] == {
        "code": "invalid_state", "status": 409,
        "message": f"Process {pid} is cancelled; only a pending process can be completed."}
    assert [e["type"] for e in got] == ["payment-error", "payment-cancelled"]


def test_live_mode_without_a_payment_method_says_so(page, live_server, merchant_site, make_merchant,
                                                    screenshot):
    live = Shop(live_server, merchant_site, make_merchant(name="Live shop", live=True))
    pid = live.create()
    page.goto(live.url(pid))  # no network or asset enabled: nothing to pay with, and no sandbox

    expect(button(page, ".note")).to_have_text(
        "No payment method is available for this payment yet. Please contact the merchant.")
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".methods")).to_be_hidden()
    expect(button(page, ".badge")).to_be_hidden()
    screenshot(button(page), "button-live-no-method")

    live.complete(pid)  # an operator confirming a payment received outside the button
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert events(page, 1) == [event("payment-success", live.public(pid))]


def test_keyboard_tab_enter_escape(page, shop):
    pid = shop.create()
    page.goto(shop.url(pid))
    expect_ready(button(page, ".pay"))
    expect(button(page, ".card [role=status][aria-live=polite]")).to_have_count(1)

    tab_from(page, "h1")
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
    expect_focus(page, "sim-success")  # the dialog has taken focus before the next key
    page.keyboard.press("Enter")  # on "Simulate successful payment"
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    # focus moved to the result, not lost with the Pay button
    expect_focus(page, "outcome completed")
    assert shop.public(pid)["status"] == "completed"


def test_readable_at_320_px(page, shop, screenshot):
    shop.set_currency("EUR")
    pid = shop.create(amount="1000000.00")
    page.set_viewport_size({"width": 320, "height": 640})
    page.goto(shop.url(pid))
    expect(button(page, ".amount-value")).to_have_text("€1,000,000.00")

    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    box = button(page, ".pay").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 320
    screenshot(page, "button-320")
    button(page, ".pay").click()
    dialog = button(page, "dialog").bounding_box()
    assert dialog["x"] >= 0 and dialog["x"] + dialog["width"] <= 320
    screenshot(page, "button-320-dialog")


def test_changing_process_id_reinitialises(page, shop):
    first = shop.create(amount="10.00")
    second = shop.create(amount="25.50")
    shop.complete(second)
    page.goto(shop.url(first))
    expect(button(page, ".amount-value")).to_have_text("$10.00")

    page.evaluate("id => document.querySelector('payment-button').setAttribute('process-id', id)",
                  second)
    expect(button(page, ".amount-value")).to_have_text("$25.50")
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert [(e["type"], e["detail"]["processId"]) for e in events(page, 1)] == [
        ("payment-success", second)]


def serve_own_copy_of_the_modules(page, site_url):
    """The merchant's own copy of the button's folder beside its copy of button.js (the merchant
    site serves button.js only): /static/button/<file> from app/static/button/; the requests."""
    served = []

    def fulfil(route):
        name = route.request.url.rsplit("/", 1)[1]
        served.append(name)
        kind = "text/css" if name.endswith(".css") else "text/javascript"
        route.fulfill(path=str(BUTTON_FOLDER / name), content_type=f"{kind}; charset=utf-8")

    page.route(f"{site_url}/static/button/*", fulfil)
    return served


def test_api_base_attribute_overrides_the_script_origin(page, shop, api_calls):
    # A merchant's own copy of button.js imports the modules beside it, from the merchant's site.
    pid = shop.create(amount="3.25")
    served = serve_own_copy_of_the_modules(page, shop.site.url)
    from_service = []
    page.on("request",
            lambda r: from_service.append(r.url) if "/payment-button/button" in r.url else None)
    page.goto(shop.url(pid, script="site", **{"api-base": shop.live.url + "/"}))

    expect(button(page, ".amount-value")).to_have_text("$3.25")
    expect_ready(button(page, ".pay"))
    assert [r.url for r in api_calls()] == [f"{shop.live.url}/payment-button/process/{pid}/public"]
    assert "element.js" in served and "button.css" in served and from_service == []


class PolicySite(MerchantSite):
    """A merchant's site like ``merchant_site`` (its own origin), its checkout page served with a
    Content-Security-Policy (the page's own inline script and style allowed)."""

    def __init__(self, policy):
        def end_headers(handler):
            if handler.path.startswith("/checkout"):
                handler.send_header("Content-Security-Policy", policy)
            MerchantSiteHandler.end_headers(handler)

        handler = type("PolicySiteHandler", (MerchantSiteHandler,), {"end_headers": end_headers})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="policy-site", daemon=True).start()


@pytest.fixture
def policy_site(live_server):
    """`policy_site(style_sources)`: a merchant's site whose strict policy allows the service for
    scripts and calls, and these sources (besides its own inline style) for style sheets."""
    sites = []

    def site(style_sources):
        service = live_server.url
        sites.append(PolicySite(f"default-src 'none'; img-src data:;"
                                f" script-src 'unsafe-inline' {service};"
                                f" style-src 'unsafe-inline' {style_sources};"
                                f" connect-src {service}"))
        return sites[-1]

    yield site
    for s in sites:
        s.stop()


def watch_csp(page):
    """The CSP violations the page reports (its shadow roots' included), as a call that reads
    them."""
    page.add_init_script("""window.__csp = [];
        document.addEventListener('securitypolicyviolation',
          (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI), true);""")
    return lambda: page.evaluate("window.__csp")


def accent_of(page):
    return button(page, ".pay").evaluate("b => getComputedStyle(b).backgroundColor")


def test_on_another_origin_with_a_strict_csp_the_modules_and_style_sheet_come_from_the_service(
        page, shop, policy_site):
    service = shop.live.url
    site = policy_site(service)
    violations = watch_csp(page)
    files = []
    page.on("response", lambda r: files.append(r) if "/payment-button/button" in r.url else None)
    pid = shop.create(amount="7.50")
    page.goto(site.checkout_url(service, pid, shop.keys["publicKey"]))

    expect(button(page, ".amount-value")).to_have_text("$7.50")
    expect_ready(button(page, ".pay"))
    assert accent_of(page) == "rgb(67, 56, 202)"  # button.css applies in the shadow root
    assert violations() == []
    # Every file from the service, cross-origin: the modules in CORS mode, each answered with CORS
    # open.
    names = {r.url.rsplit("/", 1)[1] for r in files}
    assert {"button.js", "element.js", "api.js", "wallets.js", "format.js", "button.css"} <= names
    assert all(r.url.startswith(service) and r.status == 200 for r in files)
    assert all(r.headers["access-control-allow-origin"] == "*" for r in files)
    modules = [r for r in files if r.url.endswith(".js") and "/button/" in r.url]
    assert {r.request.headers.get("origin") for r in modules} == {site.url}

    button(page, ".pay").click()
    button(page, "dialog").get_by_role("button", name="Simulate successful payment").click()
    expect(button(page, ".outcome-title")).to_have_text("Payment received")


def test_a_page_whose_csp_blocks_the_style_sheet_gets_a_working_unstyled_button(
        page, shop, policy_site):
    service = shop.live.url
    site = policy_site("")
    violations = watch_csp(page)
    pid = shop.create(amount="7.50")
    page.goto(site.checkout_url(service, pid, shop.keys["publicKey"]))

    expect_ready(button(page, ".pay"))
    expect(button(page, ".amount-value")).to_have_text("$7.50")
    assert accent_of(page) != "rgb(67, 56, 202)"
    assert [v for v in violations() if v.startswith("style-src")] == [
        f"style-src-elem {service}/payment-button/button/button.css"]
    button(page, ".pay").click()
    button(page, "dialog").get_by_role("button", name="Simulate successful payment").click()
    expect(button(page, ".outcome-title")).to_have_text("Payment received")


def test_modules_that_cannot_load_leave_a_message_and_a_payment_error(page, shop):
    # The merchant's page says why, and its script hears it as from a service it cannot reach.
    page.route("**/payment-button/button/element.js", lambda route: route.abort())
    page.add_init_script("""window.__errors = [];
        document.addEventListener('payment-error', (e) => window.__errors.push(e.detail));""")
    page.goto(shop.url(shop.create()))

    expect(page.locator("payment-button")).to_have_text(
        "The payment button could not load. Please reload the page.")
    assert page.evaluate("window.__errors") == [
        {"code": "button_unavailable", "message": "The payment button could not load.",
         "status": 0}]


def test_polling_pauses_while_the_page_is_hidden_and_stops_when_final(page, shop, api_calls):
    pid = shop.create()
    pause_clock(page)
    page.goto(shop.url(pid))
    expect_ready(button(page, ".pay"))
    assert len(api_calls()) == 1

    set_hidden(page, True)
    page.clock.run_for(120_000)
    assert len(api_calls()) == 1

    shop.complete(pid)
    set_hidden(page, False)
    # The page's timers stay paused: only the poll the visible page starts at once can show it (the
    # longer wait is for a slow answer under load, seen once on PostgreSQL).
    expect(button(page, ".outcome-title")).to_have_text("Payment received", timeout=20_000)
    assert len(api_calls()) == 2
    page.clock.run_for(120_000)
    assert len(api_calls()) == 2


def test_animations_respect_reduced_motion(page, shop):
    pid = shop.create()
    page.goto(shop.url(pid))
    # The modules and the style sheet arrive after the page's load event.
    expect_ready(button(page, ".pay"))
    spinner = ("() => getComputedStyle(document.querySelector('payment-button')"
               ".shadowRoot.querySelector('.spinner')).animationName")
    assert page.evaluate(spinner) == "spin"
    page.emulate_media(reduced_motion="reduce")
    assert page.evaluate(spinner) == "none"


def test_polling_backs_off_from_1_to_15_seconds(page, shop, api_calls):
    pid = shop.create()
    pause_clock(page)
    page.goto(shop.url(pid))
    expect_ready(button(page, ".pay"))

    for polls in range(1, 7):  # each poll's answer schedules the next one: wait for it, then run it
        page.wait_for_function("n => window.__timeouts.length >= n", arg=polls)
        assert len(api_calls()) == polls
        page.clock.run_for(page.evaluate("window.__timeouts.at(-1)"))
    page.wait_for_function("window.__timeouts.length >= 7")
    assert page.evaluate("window.__timeouts") == [1000, 2000, 4000, 8000, 15000, 15000, 15000]
    assert len(api_calls()) == 7
