"""A live stablecoin payment from the payment button, end to end in Chromium: the demo shop on the
real service (``live_server``, DEMO_SHOP on, its test wallet on the real Hardhat node of
tests/support/chain_node.py), the operator setup through the real CLI (`networks add`, `assets add`,
`merchants set-xpub`), the real chain watcher (`watch-payments --once`, run when the test says the
chain moved on) and the real delivery worker to the shop's webhook receiver. Nothing of the service
is faked; the QR codes are decoded with zbar.

The service's clock (the FakeClock) starts at the chain's time, so block timestamps and expiresAt
compare as in production. Screenshots: tests/artifacts/live-*.png (the README's picture of the demo
comes from tests/demo/test_demo_onchain.py).
"""
import json
import re
import time

import pytest
from support.browser import expect_ready, tab_from
from support.qr_decode import qr_texts

from app.data import outbox as event_rows
from app.demo.merchant import DEMO_FIRST_ADDRESS, DEMO_XPUB

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None

TTL = 1800
CONFIRMATIONS = 3
# Another account xpub (BIP32 test vector 1, m/0H/1/2H: depth 3, hardened) for a second merchant:
# an xpub is one merchant's (the demo merchant holds the test seed phrase's).
OTHER_XPUB = ("xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFG"
              "TsxxpG5uJh7n7epu4trkrX7x7DogT5Uv6fcLW5")


@pytest.fixture
def app_config(chain_node):
    return {"DEMO_SHOP": True, "DEMO_WALLET_RPC_URL": chain_node.url}


class LiveDemo:
    """The demo shop set up for live payments, and the moves of a test: the watcher, the worker."""

    def __init__(self, live_server, chain, clock, worker, second, live_chain):
        self.live, self.chain, self.clock, self.worker = live_server, chain, clock, worker
        self.live_chain = live_chain
        clock.now = chain.timestamp()
        cli = live_server.cli
        cli("networks", "add", "hardhat", "--name", "Local Hardhat", "--chain-id", "31337",
            "--rpc-url", chain.url, "--confirmations", str(CONFIRMATIONS))
        # A second test network (its own node, never paid on) and a second token: both choice
        # steps show.
        cli("networks", "add", "second", "--name", "Second testnet", "--chain-id", "80002",
            "--rpc-url", second.url, "--start-block", str(second.head() + 1))
        for network, token in (("hardhat", chain.token), ("second", second.token)):
            cli("assets", "add", "tusd", "--network", network, "--symbol", "TUSD",
                "--name", "Test USD", "--contract", token, "--decimals", "6")
        self.other_token = chain.deploy_named_token("Other USD", "USDX", 6)
        cli("assets", "add", "usdx", "--network", "hardhat", "--symbol", "USDX",
            "--name", "Other USD", "--contract", self.other_token, "--decimals", "6")
        # A live network (the chain-137 node) for live-mode merchants: test-mode ones never see it.
        cli("networks", "add", "polygon", "--name", "Polygon PoS", "--chain-id", "137",
            "--rpc-url", live_chain.url, "--confirmations", str(CONFIRMATIONS))
        cli("assets", "add", "tusd", "--network", "polygon", "--symbol", "TUSD",
            "--name", "Test USD", "--contract", live_chain.token, "--decimals", "6")
        cli("demo-merchant", "--webhook-url", f"{live_server.url}/demo/webhooks")
        with open(live_server.app.config["DEMO_MERCHANT_FILE"]) as f:
            self.keys = json.load(f)
        out = cli("merchants", "set-xpub", self.keys["merchantId"], DEMO_XPUB)
        assert DEMO_FIRST_ADDRESS in out  # the xpub is the published test seed phrase's

    def watch(self):
        self.live.cli("watch-payments", "--once")

    def public(self, process_id):
        return self.live.public(process_id, self.keys["publicKey"])

    def events(self, process_id):
        conn = self.live.app.extensions["db"].connection()
        return [e.type for e in event_rows.for_process(conn, process_id)]


@pytest.fixture
def demo(live_server, chain, clock, worker, second_test_chain_node, live_chain):
    return LiveDemo(live_server, chain, clock, worker, second_test_chain_node, live_chain)


@pytest.fixture
def console_errors(page):
    """Console errors and uncaught exceptions of the page; each live test ends with none."""
    errors = []
    page.on("console", lambda m: errors.append(f"console: {m.text} ({m.location.get('url')})")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    yield errors
    assert errors == []


# Every event of the button with its detail, recorded from the start of each page the test opens.
RECORD_EVENTS = """
window.__buttonEvents = [];
for (const type of ['payment-success', 'payment-pending', 'payment-partial', 'payment-failure',
                    'payment-expired', 'payment-cancelled', 'payment-error']) {
  document.addEventListener(type,
                            (e) => window.__buttonEvents.push({type: e.type, detail: e.detail}));
}
"""


@pytest.fixture
def details(page):
    """details(type): the detail of each `type` event the button fired on the page, in order."""
    page.add_init_script(RECORD_EVENTS)
    return lambda type: [e["detail"] for e in page.evaluate("window.__buttonEvents")
                         if e["type"] == type]


def btn(page, css):
    return page.locator(f"payment-button {css}")


def place_order(page, live_server, amount, order_ref):
    page.goto(live_server.url + "/")
    page.get_by_label("Amount").fill(amount)
    page.get_by_label("Order reference").fill(order_ref)
    page.get_by_role("button", name="Create preorder").click()
    expect(btn(page, ".methods")).to_be_visible()
    return page.locator("payment-button").get_attribute("process-id")


def shop_events(page):
    return page.locator("#button-events li code")


def qr_of(page):
    """The texts of the QR code the button shows, once the service's SVG of the URI shown is in."""
    expect(btn(page, ".qr svg")).to_be_visible()
    return qr_texts(btn(page, ".qr").screenshot())


def wallet(page, label):
    page.locator("#test-wallet").get_by_role("button", name=label).click()


def expect_logged(page, pattern):
    expect(page.locator("#wallet-log li").first).to_have_text(re.compile(pattern))


def expect_sandbox(page):
    """Test mode: the badge, and the sandbox as the secondary action beside the live one."""
    expect(btn(page, ".badge")).to_have_text("TEST MODE")
    expect(btn(page, ".pay")).to_have_text("Simulate a payment (test mode)")
    expect_ready(btn(page, ".pay"))
    expect(btn(page, ".pay")).to_have_class("pay secondary")


def freshness(page, css, text, seconds=3.0):
    """The button shows `text` within `seconds` of the service knowing it; the time it took."""
    started = time.monotonic()
    expect(btn(page, css)).to_have_text(text, timeout=seconds * 1000)
    return time.monotonic() - started


def test_full_live_payment_from_choice_to_webhook(page, demo, live_server, console_errors,
                                                  screenshot, details):
    page.set_viewport_size({"width": 1100, "height": 1000})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    pid = place_order(page, live_server, "19.99", "A-7001")

    # Asset, then network (two of each), then the instructions.
    expect(btn(page, ".step-title")).to_have_text("Pay with")
    # Each with what it costs: a USD price in USD tokens, at par.
    expect(btn(page, ".choice")).to_have_text(["TUSDTest USDpay 19.99 TUSD",
                                               "USDX on Local HardhatOther USDpay 19.99 USDX"])
    expect_sandbox(page)  # a test-mode merchant: the sandbox beside the live choice
    btn(page, ".choice").first.click()
    expect(btn(page, ".step-title")).to_have_text("Pay with TUSD on")
    expect(btn(page, ".choice")).to_have_text(["Local Hardhatpay 19.99 TUSD",
                                               "Second testnetpay 19.99 TUSD"])
    # at par: no rate to show, before or after the choice
    expect(btn(page, ".quote")).to_be_hidden()
    btn(page, ".choice").first.click()
    expect(btn(page, ".instructions")).to_be_visible()  # the choice is confirmed

    payment = demo.public(pid)["payment"]
    assert (payment["assetId"], payment["networkId"], payment["address"]) == (
        "tusd", "hardhat", DEMO_FIRST_ADDRESS)
    expect(btn(page, ".send-title")).to_have_text("Send exactly")
    expect(btn(page, ".send-amount")).to_have_text("19.99 TUSD")
    expect(btn(page, ".network")).to_have_text("Local Hardhat (chain 31337)")
    expect(btn(page, ".address")).to_have_text(DEMO_FIRST_ADDRESS)
    expect(btn(page, ".wallet")).to_have_attribute("href", payment["paymentUri"])
    expect(btn(page, ".pay-status")).to_have_text("Waiting for your payment of 19.99 TUSD…")
    expect(btn(page, ".quote")).to_be_hidden()
    expect_sandbox(page)  # ...and beside the instructions
    assert payment["paymentUri"] == (f"ethereum:{payment['tokenContract']}@31337/transfer"
                                     f"?address={DEMO_FIRST_ADDRESS}&uint256=19990000")
    assert qr_of(page) == [payment["paymentUri"]]
    # Another network, then back: the QR code follows the payment's URI each time.
    for network in ("Second testnet", "Local Hardhat"):
        btn(page, ".change").click()
        btn(page, ".choice").first.click()
        btn(page, ".choice").filter(has_text=network).click()
        expect(btn(page, ".network")).to_contain_text(network)
        assert qr_of(page) == [demo.public(pid)["payment"]["paymentUri"]]
    assert demo.public(pid)["payment"] == payment
    btn(page, ".copy-amount").click()
    assert page.evaluate("navigator.clipboard.readText()") == "19.99"
    btn(page, ".copy-address").click()
    expect(btn(page, ".copy-address")).to_have_text("Copied address")
    assert page.evaluate("navigator.clipboard.readText()") == DEMO_FIRST_ADDRESS

    # The test wallet pays; the watcher sees it in the block the node mined for it.
    expect(page.locator("#test-wallet .send-full")).to_have_text("Send 19.99")
    wallet(page, "Send 19.99")
    expect_logged(page, r"Sent 19\.99 in block #\d+")
    demo.watch()
    took = freshness(page, ".pay-status", "Payment seen, waiting for confirmations (1 of 3).")
    print(f"\nseen -> shown in {took:.2f} s")
    expect(btn(page, ".send")).to_be_hidden()  # nothing more to send
    expect(btn(page, ".change")).to_be_hidden()  # the choice is fixed once a transfer is seen
    expect(shop_events(page)).to_have_text(["payment-pending"])
    assert details("payment-pending") == [demo.public(pid)]  # the public process, as the API says
    screenshot(page, "live-seen", full_page=True)

    wallet(page, "Mine a block")
    expect_logged(page, r"Mined block #\d+")
    demo.watch()
    freshness(page, ".pay-status", "Payment seen, waiting for confirmations (2 of 3).")
    wallet(page, "Mine a block")
    demo.watch()
    freshness(page, ".outcome-title", "Payment received")
    expect(btn(page, ".outcome-text")).to_have_text("Thank you. 19.99 TUSD has been paid.")
    expect(shop_events(page)).to_have_text(["payment-success", "payment-pending"])
    assert demo.public(pid)["status"] == "completed"
    assert details("payment-success") == [demo.public(pid)]
    screenshot(page, "live-paid", full_page=True)

    demo.worker.run_once()
    assert demo.events(pid) == ["payment.pending", "payment.completed"]
    page.goto(live_server.url + "/demo/webhooks")
    entries = page.locator("li.delivery")
    expect(entries).to_have_count(2)
    # Delivered concurrently by the worker: the receiver's order is the arrival order.
    assert sorted(entries.locator(".type").all_inner_texts()) == ["payment.completed",
                                                                  "payment.pending"]
    expect(entries.locator(".badge")).to_have_text(["Signature verified"] * 2)
    completed = entries.filter(has=page.locator(".type", has_text="payment.completed"))
    for part in (f'"processId": "{pid}"', '"status": "completed"',
                 f'"address": "{DEMO_FIRST_ADDRESS}"', '"amountPaid": "19.99"',
                 '"orderRef": "A-7001"'):
        expect(completed.locator("pre")).to_contain_text(part)
    screenshot(page, "live-webhooks", full_page=True)


def test_partial_payment_asks_for_the_rest(page, demo, live_server, console_errors, screenshot,
                                           details):
    pid = place_order(page, live_server, "10", "A-7002")
    btn(page, ".choice", ).nth(1).click()  # USDX: one network, so this click confirms
    expect(btn(page, ".send-amount")).to_have_text("10 USDX")

    wallet(page, "Send half")
    expect_logged(page, r"Sent 5 in block")
    demo.watch()
    freshness(page, ".pay-status", "Payment seen, waiting for confirmations (1 of 3)."
                                   " Received 5 of 10 USDX: send the remaining 5 USDX.")
    first_seen = demo.public(pid)
    assert details("payment-pending") == [first_seen]
    assert first_seen["payment"]["amountPending"] == "5"
    page.locator("#test-wallet .mine").click()
    page.locator("#test-wallet .mine").click()
    expect(page.locator("#wallet-log li")).to_have_count(3)
    demo.watch()
    freshness(page, ".pay-status", "Received 5 of 10 USDX: send the remaining 5 USDX.")
    expect(btn(page, ".send-title")).to_have_text("Send the remaining")
    expect(btn(page, ".send-amount")).to_have_text("5 USDX")
    payment = demo.public(pid)["payment"]
    assert payment["paymentUri"].endswith("&uint256=5000000")  # the service asks for what is left
    assert qr_of(page) == [payment["paymentUri"]]
    expect(shop_events(page)).to_have_text(["payment-partial", "payment-pending"])
    partly_paid = demo.public(pid)
    assert details("payment-partial") == [partly_paid]
    assert (partly_paid["payment"]["amountPaid"],
            partly_paid["payment"]["amountPending"]) == ("5", "0")
    screenshot(page, "live-partial", full_page=True)

    wallet(page, "Send 5")
    expect_logged(page, r"Sent 5 in block")
    demo.watch()
    freshness(page, ".pay-status", "Payment seen, waiting for confirmations (1 of 3).")
    expect(btn(page, ".send")).to_be_hidden()
    assert details("payment-pending") == [first_seen, demo.public(pid)]  # once per transfer
    demo.chain.mine(2)
    demo.watch()
    freshness(page, ".outcome-title", "Payment received")
    expect(btn(page, ".outcome-text")).to_have_text("Thank you. 10 USDX has been paid.")
    assert demo.events(pid) == ["payment.pending", "payment.partial", "payment.pending",
                                "payment.completed"]


def test_expiry_then_a_late_payment(page, demo, live_server, console_errors, screenshot):
    pid = place_order(page, live_server, "7.5", "A-7003")
    btn(page, ".choice").nth(1).click()
    expect(btn(page, ".send-amount")).to_have_text("7.5 USDX")

    demo.clock.advance(TTL)  # the service's clock: past expiresAt, nothing was sent
    expires_at = demo.clock.now
    # Until the watcher has read the chain past expiresAt a transfer made in time may still be
    # found: the service holds the process pending, and the button waits for its word.
    freshness(page, ".pay-status", "Checking for a payment made in time…", seconds=3)
    expect(btn(page, ".countdown")).to_have_text("Expired")
    expect(btn(page, ".send")).to_be_hidden()
    demo.chain.next_timestamp(expires_at + 60)
    demo.chain.mine(1)
    demo.watch()
    freshness(page, ".outcome-title", "Payment expired")
    expect(btn(page, ".instructions")).to_be_hidden()
    expect(shop_events(page)).to_have_text(["payment-expired"])
    assert demo.public(pid)["status"] == "expired"

    # The customer's wallet sends anyway, after expiresAt: late, the merchant refunds it.
    wallet(page, "Send 7.5")
    expect_logged(page, r"Sent 7\.5 in block")
    demo.chain.mine(2)
    demo.worker.run_once()  # sweeps the process: expired for good
    demo.watch()
    # polled every 2 s after expiry
    freshness(page, ".outcome-title", "Paid after expiry", seconds=3)
    expect(btn(page, ".outcome-text")).to_have_text(
        "7.5 USDX arrived after this payment request expired: the merchant will contact you.")
    expect(shop_events(page)).to_have_text(["payment-expired"])
    assert demo.events(pid)[-1] == "payment.received_late"
    screenshot(page, "live-late", full_page=True)


def test_a_euro_order_paid_in_dollar_tokens_at_the_rate(page, demo, live_server, console_errors,
                                                        screenshot, details):
    """A EUR price (the demo shop's currency select) paid in a USD token at a manual EUR/USD rate:
    the price in euros, what each token costs, the quote's line, and the payment of the quoted
    amount completing the process."""
    live_server.cli("rates", "set", "EUR/USD", "1.0842")
    rate_time = time.strftime("%H:%M", time.gmtime(demo.clock.now))
    page.goto(live_server.url + "/")
    page.get_by_label("Amount").fill("19.99")
    page.get_by_label("Currency").select_option("EUR")
    page.get_by_label("Order reference").fill("A-7011")
    page.get_by_role("button", name="Create preorder").click()
    expect(btn(page, ".methods")).to_be_visible()
    pid = page.locator("payment-button").get_attribute("process-id")

    expect(btn(page, ".amount-value")).to_have_text("€19.99")
    expect(btn(page, ".choice")).to_have_text(["TUSDTest USDpay 21.673158 TUSD",  # 19.99 × 1.0842
                                               "USDX on Local HardhatOther USDpay 21.673158 USDX"])
    expect(btn(page, ".quote")).to_be_hidden()
    btn(page, ".choice").nth(1).click()  # USDX: one network, so this click confirms
    expect(btn(page, ".send-amount")).to_have_text("21.673158 USDX")
    expect(btn(page, ".quote")).to_have_text(
        f"19.99 EUR · pay 21.673158 USDX at 1 EUR = 1.0842 USD, {rate_time} UTC")
    quote = demo.public(pid)["payment"]["quote"]
    assert (quote["currency"], quote["amount"], quote["rate"], quote["pair"], quote["source"]) == (
        "EUR", "19.99", "1.0842", "EUR/USD", "manual")
    screenshot(page, "live-euro-quoted", full_page=True)

    wallet(page, "Send 21.673158")
    expect_logged(page, r"Sent 21\.673158 in block #\d+")
    demo.watch()
    freshness(page, ".pay-status", "Payment seen, waiting for confirmations (1 of 3).")
    demo.chain.mine(2)
    demo.watch()
    freshness(page, ".outcome-title", "Payment received")
    expect(btn(page, ".outcome-text")).to_have_text("Thank you. 21.673158 USDX has been paid.")
    # the quote was for paying: the outcome says what was paid
    expect(btn(page, ".quote")).to_be_hidden()
    paid = demo.public(pid)
    assert (paid["status"], paid["currency"], paid["payment"]["amountPaid"]) == (
        "completed", "EUR", "21.673158")
    assert details("payment-success") == [paid]


def test_paid_in_time_is_held_past_expiry_until_confirmed(page, demo, live_server, console_errors):
    pid = place_order(page, live_server, "3", "A-7004")
    btn(page, ".choice").nth(1).click()
    wallet(page, "Send 3")
    expect_logged(page, r"Sent 3 in block")
    demo.watch()
    freshness(page, ".pay-status", "Payment seen, waiting for confirmations (1 of 3).")

    demo.clock.advance(TTL)  # expiresAt passes while the in-time transfer confirms
    expect(btn(page, ".countdown")).to_have_text("Expired")
    page.wait_for_timeout(2000)
    expect(btn(page, ".pay-status")).to_have_text(
        "Payment seen, waiting for confirmations (1 of 3).")
    assert demo.public(pid)["status"] == "pending"
    demo.chain.mine(2)
    demo.watch()
    freshness(page, ".outcome-title", "Payment received")
    expect(shop_events(page)).to_have_text(["payment-success", "payment-pending"])


def test_live_payment_at_360_px_by_keyboard(page, demo, live_server, merchant_site, console_errors,
                                            screenshot):
    api = live_server.merchant_api(demo.keys["secretKey"])
    pid = api.preorder("1000000.00")["processId"]  # the longest amount: MAX_AMOUNT
    page.set_viewport_size({"width": 360, "height": 800})
    page.goto(merchant_site.checkout_url(live_server.url, pid, demo.keys["publicKey"]))
    expect(btn(page, ".choice")).to_have_count(2)

    tab_from(page, "h1")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # TUSD
    expect(btn(page, ".step-title")).to_have_text("Pay with TUSD on")
    page.keyboard.press("Enter")  # focus moved to the first network: Local Hardhat
    expect(btn(page, ".send-amount")).to_have_text("1000000 TUSD")
    assert page.evaluate(
        "document.activeElement.shadowRoot.activeElement.className") == "send-title"
    expect(btn(page, ".live")).to_have_attribute("aria-live", "polite")

    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    for css in (".send-amount", ".copy-amount", ".address", ".copy-address", ".qr", ".wallet",
                ".pay"):
        box = btn(page, css).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 360, css
    assert qr_of(page) == [demo.public(pid)["payment"]["paymentUri"]]
    screenshot(page, "live-360", full_page=True)


def test_the_sandbox_still_pays_beside_the_live_instructions(page, demo, live_server,
                                                             console_errors, details):
    pid = place_order(page, live_server, "4", "A-7005")
    btn(page, ".choice").nth(1).click()  # USDX: the choice is confirmed, an address given out
    expect(btn(page, ".send-amount")).to_have_text("4 USDX")
    expect_sandbox(page)
    btn(page, ".pay").click()
    expect(btn(page, "dialog")).to_be_visible()
    btn(page, ".sim-success").click()
    expect(btn(page, ".outcome-title")).to_have_text("Payment received")
    # the process's price
    expect(btn(page, ".outcome-text")).to_have_text("Thank you. $4.00 has been paid.")
    expect(btn(page, ".instructions")).to_be_hidden()
    completed = demo.public(pid)
    assert completed["status"] == "completed"
    assert details("payment-success") == [completed]
    assert demo.events(pid) == ["payment.completed"]


def test_an_overpayment_from_the_wallet_panel(page, demo, live_server, console_errors, screenshot,
                                              details):
    pid = place_order(page, live_server, "10", "A-7006")
    btn(page, ".choice").nth(1).click()
    expect(btn(page, ".send-amount")).to_have_text("10 USDX")
    wallet(page, "Send 1 more")
    expect_logged(page, r"Sent 11 in block #\d+")
    demo.watch()
    freshness(page, ".pay-status", "Payment seen, waiting for confirmations (1 of 3).")
    expect(btn(page, ".send")).to_be_hidden()
    demo.chain.mine(2)
    demo.watch()
    freshness(page, ".outcome-title", "Payment received")
    expect(btn(page, ".outcome-text")).to_have_text(
        "Thank you. 11 USDX has been paid. That is 1 USDX more than due:"
        " the merchant will contact you about it.")
    paid = demo.public(pid)
    assert (paid["status"], paid["payment"]["amountDue"], paid["payment"]["amountPaid"]) == (
        "completed", "10", "11")
    assert details("payment-success") == [paid]
    assert demo.events(pid) == ["payment.pending", "payment.completed"]
    screenshot(page, "live-overpaid", full_page=True)


def test_a_live_mode_merchant_pays_on_chain_without_the_sandbox(page, demo, live_server,
                                                                merchant_site, console_errors):
    # Every other test here pays a test-mode merchant (the demo's); a pk_live merchant has no badge
    # and no sandbox, only the live choice, and only the live network (chain 137) to choose.
    keys = json.loads(live_server.cli("merchants", "create", "--name", "Live shop", "--live",
                                      "--json"))
    assert keys["publicKey"].startswith("pk_live_")
    live_server.cli("merchants", "set-xpub", keys["merchantId"], OTHER_XPUB)
    pid = live_server.merchant_api(keys["secretKey"]).preorder("12.5")["processId"]
    page.goto(merchant_site.checkout_url(live_server.url, pid, keys["publicKey"]))
    expect(btn(page, ".choice")).to_have_text(["TUSD on Polygon PoSTest USDpay 12.5 TUSD"])
    expect(btn(page, ".badge")).to_be_hidden()
    expect(btn(page, ".pay")).to_be_hidden()
    btn(page, ".choice").nth(0).click()
    expect(btn(page, ".send-amount")).to_have_text("12.5 TUSD")
    expect(btn(page, ".network")).to_have_text("Polygon PoS (chain 137)")
    expect(btn(page, ".pay")).to_be_hidden()

    payment = live_server.public(pid, keys["publicKey"])["payment"]
    assert payment["address"] != DEMO_FIRST_ADDRESS  # the live merchant's own wallet
    assert (payment["networkId"], payment["chainId"]) == ("polygon", 137)
    demo.live_chain.transfer(payment["address"], 12_500_000)
    demo.watch()
    freshness(page, ".pay-status", "Payment seen, waiting for confirmations (1 of 3).")
    expect(btn(page, ".pay")).to_be_hidden()
    demo.live_chain.mine(2)
    demo.watch()
    freshness(page, ".outcome-title", "Payment received")
    expect(btn(page, ".outcome-text")).to_have_text("Thank you. 12.5 TUSD has been paid.")
    expect(btn(page, ".badge")).to_be_hidden()
    events = page.evaluate("window.__events")
    assert [e["type"] for e in events] == ["payment-success"]
    paid = live_server.public(pid, keys["publicKey"])
    assert (paid["status"], paid["livemode"]) == ("completed", True)
    assert events[0]["detail"] == paid


def test_a_delayed_network_is_said_to_the_customer_paying_on_it(page, demo, live_server,
                                                                second_test_chain_node,
                                                                console_errors):
    """The chosen network becomes unavailable (its head older than its --max-block-age): the
    button says it is delayed beside the instructions, and stops saying so when it is back."""
    place_order(page, live_server, "4", "A-7010")
    btn(page, ".choice").first.click()
    btn(page, ".choice").nth(1).click()  # TUSD on the second testnet
    waiting = "Waiting for your payment of 4 TUSD…"
    expect(btn(page, ".pay-status")).to_have_text(waiting)
    live_server.cli("networks", "set-max-block-age", "second", "30")
    demo.watch()
    demo.clock.now = max(demo.clock.now, second_test_chain_node.timestamp()) + 31
    expect(btn(page, ".pay-status")).to_have_text(
        f"{waiting} Second testnet is delayed: a payment sent is credited once it is back.",
        timeout=20_000)
    live_server.cli("networks", "set-max-block-age", "second", "0")
    expect(btn(page, ".pay-status")).to_have_text(waiting, timeout=20_000)
