"""The customers' pages in real Chromium against the real service over HTTP (``live_server``): a
sandbox payment through the checkout page, then on to the shop's success URL (a local shop on
another origin) with `processId` added, within 10 s of the payment; the page's CSP blocks nothing
the page needs (the button's modules and shadow style sheet are the service's files: it shows
styled) and nothing comes from another origin; no metadata anywhere on the page; at 390 px nothing
is wider than the screen; a payment link's page, its "Pay" by keyboard, the checkout page it leads
to.
Screenshots: tests/artifacts/checkout-*.png."""
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from support.browser import expect_ready, tab_from

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None

SECRET_METADATA = {"email": "buyer@private.example", "orderRef": "ORD-SECRET-77"}
LONG_WORD = "Handmade" + "x" * 200  # no place to break: the page must wrap it anyway


class ShopSite:
    """The merchant's own site on another origin: its success and cancel pages, recording each
    visit (path and query)."""

    def __init__(self):
        visits = self.visits = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                url = urlsplit(self.path)
                visits.append((url.path, parse_qs(url.query), time.monotonic()))
                body = f"<!doctype html><title>Shop</title><h1>Shop page {url.path}</h1>".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, name="shop-site", daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def shop_site():
    site = ShopSite()
    yield site
    site.stop()


@pytest.fixture
def shop(live_server, make_merchant, runner):
    keys = make_merchant(name="Clay Studio")
    runner.invoke(args=["merchants", "set-display-name", keys["merchantId"], "Clay Studio Berlin"])
    keys["api"] = live_server.merchant_api(keys["secretKey"])
    return keys


def preorder(shop, shop_site, description="A blue mug", **fields):
    body = {"amount": 19.99, "currency": "EUR", "metadata": SECRET_METADATA,
            "description": description, "successUrl": f"{shop_site.url}/thanks?cart=7",
            "cancelUrl": f"{shop_site.url}/cart", **fields}
    response = shop["api"].session.post(f"{shop['api'].base}/payment-button/process/preorder",
                                        json=body, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def watch_csp(page):
    """Record every CSP violation the page reports (its shadow roots' included) and every request
    it makes, for `csp_problems`."""
    page.add_init_script("""
      window.__csp = [];
      document.addEventListener('securitypolicyviolation',
        (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI), true);
    """)
    messages, requests = [], []
    page.on("console", lambda m: messages.append(m.text)
            if "Content Security Policy" in m.text else None)
    page.on("request", lambda r: requests.append(r.url))
    return messages, requests


def csp_problems(page, messages):
    return page.evaluate("window.__csp") + messages


def no_horizontal_overflow(page):
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"
                         " && document.body.scrollWidth <= window.innerWidth")


def test_a_sandbox_payment_through_the_checkout_page_reaches_the_shop(page, live_server, shop,
                                                                      shop_site, screenshot):
    messages, requests = watch_csp(page)
    process = preorder(shop, shop_site)
    with page.expect_response(lambda r: "/checkout/" in r.url) as answer:
        page.goto(process["checkoutUrl"].replace("http://localhost", live_server.url))
    csp = answer.value.headers["content-security-policy"]
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    assert answer.value.headers["x-frame-options"] == "DENY"
    expect(page.locator("#seller")).to_have_text("Clay Studio Berlin")
    expect(page.get_by_role("heading", name="A blue mug")).to_be_visible()
    expect(page.locator("#price")).to_have_text("€19.99")
    expect(page.get_by_role("link", name="Back to the shop")).to_have_attribute(
        "href", f"{shop_site.url}/cart")
    expect_ready(page.locator("payment-button .pay"))
    expect(page.locator("payment-button .amount-value")).to_have_text("€19.99")
    # The button's shadow style sheet applies (a file of the service, style-src 'self'): its Pay
    # button has the accent.
    background = page.locator("payment-button .pay").evaluate(
        "b => getComputedStyle(b).backgroundColor")
    assert background == "rgb(67, 56, 202)", background
    assert not page.locator("body").inner_text().count("ORD-SECRET-77")
    assert "buyer@private.example" not in page.content() and "ORD-SECRET-77" not in page.content()
    screenshot(page, "checkout-pending", full_page=True)

    page.locator("payment-button .pay").click()
    page.locator("payment-button dialog").get_by_role(
        "button", name="Simulate successful payment").click()
    paid_at = time.monotonic()
    expect(page.locator("payment-button .outcome-title")).to_have_text("Payment received")
    # The page is read again: the receipt, then on to the shop.
    expect(page.locator("#continue")).to_be_visible()
    expect(page.locator(".outcome h2")).to_have_text("Payment received")
    expect(page.locator("dl.receipt")).to_contain_text("Test payment")
    assert page.evaluate("window.__csp") == []
    screenshot(page, "checkout-paid", full_page=True)
    expect(page).to_have_url(re.compile(re.escape(shop_site.url) + "/thanks"), timeout=12_000)
    [(path, query, arrived)] = [v for v in shop_site.visits if v[0] == "/thanks"]
    assert query == {"cart": ["7"], "processId": [process["processId"]]}
    assert arrived - paid_at < 10, arrived - paid_at
    assert shop["api"].get(process["processId"])["status"] == "completed"
    # Nothing blocked, nothing asked of another origin than the service's (and the shop's own page).
    assert messages == []
    assert all(url.startswith((live_server.url, shop_site.url, "data:"))
               for url in requests), requests


def test_the_checkout_page_blocks_nothing_it_needs(page, live_server, shop, shop_site):
    messages, requests = watch_csp(page)
    process = preorder(shop, shop_site)
    page.goto(f"{live_server.url}/checkout/{process['processId']}")
    expect_ready(page.locator("payment-button .pay"))
    page.locator("payment-button .pay").click()
    expect(page.locator("payment-button dialog")).to_be_visible()
    assert csp_problems(page, messages) == []
    assert all(url.startswith((live_server.url, "data:")) for url in requests), requests


@pytest.mark.parametrize("state", ["pending", "paid", "link", "gone"])
def test_at_390_px_nothing_is_wider_than_the_screen(page, live_server, shop, shop_site, state,
                                                    screenshot):
    page.set_viewport_size({"width": 390, "height": 844})
    process = preorder(shop, shop_site, description=f"{LONG_WORD} mug with a long name")
    if state == "paid":
        paid = shop["api"].session.post(
            f"{live_server.url}/payment-button/process/{process['processId']}/sandbox/pay",
            json={"outcome": "success"}, headers={"x-public-key": shop["publicKey"]}, timeout=10)
        assert paid.status_code == 200
    if state in ("link", "gone"):
        made = shop["api"].session.post(f"{live_server.url}/payment-button/links", timeout=10,
                                        json={"amount": 99999.99, "currency": "EUR",
                                              "description": LONG_WORD, "maxPayments": 1}).json()
        if state == "gone":
            shop["api"].session.post(
                f"{live_server.url}/payment-button/links/{made['linkId']}/deactivate", timeout=10)
        page.goto(f"{live_server.url}/l/{made['linkId']}")
    else:
        page.goto(f"{live_server.url}/checkout/{process['processId']}")
        if state == "pending":
            expect_ready(page.locator("payment-button .pay"))
            page.locator("payment-button .pay").click()
            expect(page.locator("payment-button dialog")).to_be_visible()
    expect(page.locator("h1")).to_be_visible()
    assert no_horizontal_overflow(page), page.evaluate("document.documentElement.scrollWidth")
    screenshot(page, f"checkout-390-{state}", full_page=True)


def test_a_link_page_then_pay_by_keyboard_then_its_checkout_page(page, live_server, shop,
                                                                 shop_site):
    made = shop["api"].session.post(f"{live_server.url}/payment-button/links", timeout=10, json={
        "amount": 25, "currency": "EUR", "description": "Pottery class, Saturday",
        "metadata": {"note": "private note"}, "successUrl": f"{shop_site.url}/booked"}).json()
    messages, _ = watch_csp(page)
    page.goto(f"{live_server.url}/l/{made['linkId']}")
    expect(page.locator("#seller")).to_have_text("Clay Studio Berlin")
    expect(page.locator("#price")).to_have_text("€25.00")
    tab_from(page, "h1")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Pay")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(re.escape(live_server.url) + r"/checkout/[0-9a-f-]{36}$"))
    process_id = page.url.rsplit("/", 1)[1]
    process = shop["api"].get(process_id)
    assert process["metadata"] == {"note": "private note", "paymentLinkId": made["linkId"]}
    expect(page.get_by_role("heading", name="Pottery class, Saturday")).to_be_visible()
    expect_ready(page.locator("payment-button .pay"))
    assert "private note" not in page.content() and "paymentLinkId" not in page.content()
    # By keyboard: the button's Pay, then its sandbox dialog.
    tab_from(page, "h1")
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.tagName + ' ' +"
                            " (document.activeElement.shadowRoot"
                            " && document.activeElement.shadowRoot.activeElement"
                            " ? document.activeElement.shadowRoot.activeElement.className : '')")
    assert focused == "PAYMENT-BUTTON pay", focused
    page.keyboard.press("Enter")
    dialog = page.locator("payment-button dialog")
    expect(dialog.get_by_role("button", name="Simulate successful payment")).to_be_visible()
    page.keyboard.press("Escape")
    # "Back" returns to the link's page, which made nothing more.
    page.get_by_role("link", name="Back", exact=True).click()
    expect(page).to_have_url(f"{live_server.url}/l/{made['linkId']}")
    assert csp_problems(page, messages) == []
    listed = shop["api"].session.get(f"{live_server.url}/payment-button/links/{made['linkId']}",
                                     timeout=10)
    assert listed.json()["payments"] == 0


def test_an_unknown_checkout_page_is_a_404_page(page, live_server):
    response = page.goto(f"{live_server.url}/checkout/00000000-0000-4000-8000-000000000000")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()


def test_the_console_links_page_by_an_owner_at_390_px(page, live_server, shop, runner, screenshot):
    from support.qr_decode import qr_texts

    result = runner.invoke(args=["users", "create", "owner@clay.example",
                                 "--merchant", shop["merchantId"]],
                           input="correct horse battery\n")
    assert result.exit_code == 0, result.output
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{live_server.url}/dashboard/login")
    page.get_by_label("Email").fill("owner@clay.example")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("navigation").get_by_role("link", name="Links").click()
    expect(page.get_by_role("heading", name="Payment links", exact=True)).to_be_visible()
    page.get_by_label("Description (shown to customers)").fill("Pottery class, Saturday")
    page.get_by_label("Amount").fill("25")
    page.get_by_label("Currency").select_option("EUR")
    page.get_by_label("Maximum payments (optional: blank is unlimited)").fill("8")
    page.get_by_role("button", name="Create link").click()
    expect(page.get_by_role("status")).to_contain_text("Payment link created")
    card = page.locator("article.link").first
    url = card.locator("code[id^=link-url-]").inner_text()
    assert re.fullmatch(re.escape(live_server.url) + r"/l/link_[0-9a-f]{24}", url)
    assert no_horizontal_overflow(page)
    screenshot(page, "console-links-390", full_page=True)
    qr = card.locator("img.qr")
    qr.scroll_into_view_if_needed()
    assert qr_texts(qr.screenshot()) == [url]
    # Deactivate, after the confirmation.
    card.get_by_role("link", name="Deactivate").click()
    expect(page.get_by_role("heading", name="Deactivate this payment link?")).to_be_visible()
    page.get_by_role("button", name="Deactivate").click()
    expect(page.get_by_role("status")).to_contain_text("The link is deactivated")
    expect(page.locator("article.link").first.locator(".badge").first).to_have_text("deactivated")
    assert page.request.get(url).status == 410
