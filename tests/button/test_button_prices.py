"""Prices in the merchant's currency, as the <payment-button> shows them, in real Chromium against
the real service (``live_server``): the process's currency from the service, formatted for the
page's language; per network, what the customer would pay (GET /payment-button/assets?processId=…);
after the choice, the quote's line ("19.99 EUR · pay 21.673158 USDC at 1 EUR = 1.0842 USD, 10:02
UTC"); nothing of a rate at par; a token that cannot be quoted is not offered, and a choice that
cannot be quoted any more (503 rate_unavailable) says why and offers the rest.

Set up as an operator does, through the CLI: a test network and two tokens (USDC pegged to USD,
EURC to EUR), the merchant's wallet (`merchants set-xpub`) and currency (`merchants set-currency`),
and a manual rate (`rates set EUR/USD 1.0842`). No node is needed: the network is added from a start
block and the tokens without the contract check, as tests/console/test_console_unexpected.py does,
and nothing here is paid on chain (tests/button/test_button_live.py pays on the real node).
"""
import calendar
import json

import pytest
from support.chain_shop import XPUB
from support.live_payments import USDC_LOCAL, USDC_TEST

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None

RATE_AT = calendar.timegm((2026, 11, 28, 10, 2, 0))  # the rate is set at 10:02 UTC
EURC = USDC_TEST  # any contract address: the contract is not read
CHOICES = ["EURC on Local chainEuro Coin", "USDC on Local chainUSD Coin"]  # in the order of the ids


class PricedShop:
    """A test-mode merchant (made with the CLI) taking USDC and EURC on one test network."""

    def __init__(self, live_server, merchant_site, make_merchant, page):
        self.live, self.site, self.page = live_server, merchant_site, page
        cli = live_server.cli
        cli("networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
            "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
        cli("assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name", "USD Coin",
            "--contract", USDC_LOCAL, "--decimals", "6", "--skip-contract-check")
        cli("assets", "add", "eurc", "--network", "local", "--symbol", "EURC",
            "--name", "Euro Coin", "--contract", EURC, "--decimals", "6", "--skip-contract-check",
            "--peg", "EUR")
        self.keys = make_merchant(name="Priced shop")
        cli("merchants", "set-xpub", self.keys["merchantId"], XPUB)
        self.api = live_server.merchant_api(self.keys["secretKey"])
        self.asset_lists = []  # the URLs of the button's GET /payment-button/assets calls
        page.on("request", lambda r: self.asset_lists.append(r.url)
                if r.method == "GET" and "/payment-button/assets" in r.url else None)

    def set_currency(self, code):
        self.live.cli("merchants", "set-currency", self.keys["merchantId"], code)

    def set_rate(self, *args):
        self.live.cli("rates", "set", "EUR/USD", "1.0842", *args)

    def open(self, amount="19.99", **attrs):
        pid = self.api.preorder(amount)["processId"]
        self.page.goto(self.site.checkout_url(self.live.url, pid, self.keys["publicKey"], **attrs))
        return pid

    def public(self, pid):
        return self.live.public(pid, self.keys["publicKey"])


@pytest.fixture
def shop(live_server, merchant_site, make_merchant, page, clock):
    clock.now = RATE_AT
    return PricedShop(live_server, merchant_site, make_merchant, page)


def btn(page, css):
    return page.locator(f"payment-button {css}")


def fulfill(route, response, body):
    """Answer with `response` (read from the real server) but another body."""
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    route.fulfill(status=response.status, headers=headers, body=body)


def expect_choices(page, texts, dues):
    """The choices (text, then the asset's name) and what each costs (its .due line)."""
    expect(btn(page, ".choice")).to_have_text([f"{t}{d}" for t, d in zip(texts, dues, strict=True)])
    expect(btn(page, ".choice .due")).to_have_text(dues)


def choose(page, symbol):
    btn(page, ".choice").filter(has_text=f"{symbol} on").click()
    expect(btn(page, ".instructions")).to_be_visible()


def test_a_eur_price_in_euros_what_each_token_costs_and_the_rate_after_the_choice(page, shop,
                                                                                  screenshot):
    shop.set_currency("EUR")
    shop.set_rate()
    pid = shop.open()

    expect(btn(page, ".amount-value")).to_have_text("€19.99")  # <html lang="en">
    expect(btn(page, ".currency")).to_be_hidden()
    expect_choices(page, CHOICES, ["pay 19.99 EURC", "pay 21.673158 USDC"])
    expect(btn(page, ".quote")).to_be_hidden()  # nothing is chosen yet
    assert shop.asset_lists == [f"{shop.live.url}/payment-button/assets?processId={pid}"]
    screenshot(btn(page, ".card"), "prices-eur-choice")

    choose(page, "USDC")  # 19.99 × 1.0842 = 21.673158 (exact at 6 decimals)
    expect(btn(page, ".quote")).to_have_text(
        "19.99 EUR · pay 21.673158 USDC at 1 EUR = 1.0842 USD, 10:02 UTC")
    expect(btn(page, ".send-amount")).to_have_text("21.673158 USDC")
    expect(btn(page, ".pay-status")).to_have_text("Waiting for your payment of 21.673158 USDC…")
    expect(btn(page, ".amount-value")).to_have_text("€19.99")
    payment = shop.public(pid)["payment"]
    assert payment["amountDue"] == "21.673158"
    assert {k: payment["quote"][k] for k in ("currency", "amount", "rate", "pair", "inverse",
                                               "source", "rateUpdatedAt")} == {
        "currency": "EUR", "amount": "19.99", "rate": "1.0842", "pair": "EUR/USD", "inverse": False,
        "source": "manual", "rateUpdatedAt": "2026-11-28T10:02:00Z"}
    screenshot(btn(page, ".card"), "prices-eur-quoted")

    btn(page, ".change").click()  # choosing again: the line is the current choice's, not shown
    expect(btn(page, ".methods")).to_be_visible()
    expect(btn(page, ".quote")).to_be_hidden()
    choose(page, "EURC")  # the token's peg is the price's currency: at par, no rate to show
    expect(btn(page, ".send-amount")).to_have_text("19.99 EURC")
    expect(btn(page, ".quote")).to_be_hidden()
    assert shop.public(pid)["payment"]["quote"]["source"] == "par"


def test_a_usd_price_at_par_shows_no_rate(page, shop):
    shop.set_rate()  # the merchant's currency is USD (the default)
    pid = shop.open()

    expect(btn(page, ".amount-value")).to_have_text("$19.99")
    choose(page, "USDC")
    expect(btn(page, ".send-amount")).to_have_text("19.99 USDC")
    expect(btn(page, ".pay-status")).to_have_text("Waiting for your payment of 19.99 USDC…")
    expect(btn(page, ".quote")).to_be_hidden()
    expect(btn(page, ".quote")).to_have_text("")
    assert shop.public(pid)["payment"]["quote"]["source"] == "par"


def test_an_inverse_quote_reads_the_pair_as_written_with_the_day_of_an_older_rate(page, shop,
                                                                                  clock):
    clock.now = RATE_AT - 10 * 3600 - 22 * 60  # 2026-11-27 23:40 UTC
    shop.set_rate()
    clock.now = RATE_AT  # the next day: the rate (a manual one counts for a day) still counts
    pid = shop.open()

    # A USD price paid in EURC is due amount ÷ rate: 19.99 / 1.0842 = 18.4375576…, rounded up.
    expect_choices(page, CHOICES, ["pay 18.437558 EURC", "pay 19.99 USDC"])
    choose(page, "EURC")
    expect(btn(page, ".quote")).to_have_text(
        "19.99 USD · pay 18.437558 EURC at 1 EUR = 1.0842 USD, 2026-11-27 23:40 UTC")
    quote = shop.public(pid)["payment"]["quote"]
    assert (quote["pair"], quote["inverse"]) == ("EUR/USD", True)


@pytest.mark.parametrize("rate", ["none", "stale"])
def test_a_token_without_a_rate_is_not_offered(page, shop, clock, rate):
    shop.set_currency("EUR")
    if rate == "stale":
        shop.set_rate("--max-age", "60")
        clock.advance(61)
    shop.open()

    expect_choices(page, CHOICES[:1], ["pay 19.99 EURC"])
    choose(page, "EURC")
    expect(btn(page, ".send-amount")).to_have_text("19.99 EURC")
    expect(btn(page, ".quote")).to_be_hidden()


def test_a_choice_that_cannot_be_quoted_any_more_says_why_and_offers_the_rest(page, shop,
                                                                              screenshot):
    shop.set_currency("EUR")
    shop.set_rate()
    pid = shop.open()
    expect(btn(page, ".choice")).to_have_count(2)
    shop.live.cli("rates", "remove", "EUR/USD")  # while the customer reads the list

    btn(page, ".choice").filter(has_text="USDC on").click()
    message = ("usdc on local cannot be quoted now (no rate for EUR/USD): try again later,"
               " or choose another asset.")
    expect(btn(page, ".notice")).to_have_text(message)
    expect_choices(page, CHOICES[:1], ["pay 19.99 EURC"])  # the list read again
    assert shop.asset_lists == [f"{shop.live.url}/payment-button/assets?processId={pid}"] * 2
    assert page.evaluate("window.__events") == [{
        "type": "payment-error", "bubbles": True, "composed": True,
        "detail": {"code": "rate_unavailable", "message": message, "status": 503}}]
    assert shop.public(pid)["payment"] is None
    screenshot(btn(page, ".card"), "prices-rate-unavailable")

    choose(page, "EURC")
    expect(btn(page, ".send-amount")).to_have_text("19.99 EURC")
    expect(btn(page, ".notice")).to_be_hidden()


def test_the_price_is_written_as_the_page_s_language_writes_it(browser, shop):
    shop.set_currency("EUR")
    context = browser.new_context(locale="fr-FR")  # the browser's language: French
    try:
        french = context.new_page()
        pid = shop.api.preorder("19.99")["processId"]
        french.goto(shop.site.checkout_url(shop.live.url, pid, shop.keys["publicKey"]))
        expect(btn(french, ".amount-value")).to_have_text("€19.99")  # the page's <html lang="en">
        # Without a lang attribute, the browser's language (re-rendered by the attribute's change).
        french.evaluate("""() => { document.documentElement.removeAttribute('lang');
            document.querySelector('payment-button').setAttribute('currency', 'GBP'); }""")
        expect(btn(french, ".amount-value")).to_have_text("19,99\u00a0€")
        expect(btn(french, ".dlg-amount")).to_have_text("19,99\u00a0€")
        # The nearest lang attribute: here the element's own.
        french.goto(shop.site.checkout_url(shop.live.url, pid, shop.keys["publicKey"],
                                           lang="de-DE"))
        expect(btn(french, ".amount-value")).to_have_text("19,99\u00a0€")
        pid = shop.api.preorder("1234.50")["processId"]
        french.goto(shop.site.checkout_url(shop.live.url, pid, shop.keys["publicKey"],
                                           lang="de-DE"))
        expect(btn(french, ".amount-value")).to_have_text("1.234,50\u00a0€")
    finally:
        context.close()


def test_the_currency_attribute_is_a_fallback_for_a_service_that_sends_none(page, shop):
    shop.set_currency("EUR")
    pid = shop.open(currency="USD")  # the service's currency wins
    expect(btn(page, ".amount-value")).to_have_text("€19.99")
    expect(btn(page, ".currency")).to_be_hidden()

    # An older service (before currencies) is the one thing the real one cannot be: its answers,
    # read from the real service, without their currency field.
    def without_currency(route):
        response = route.fetch()
        body = response.json()
        body.pop("currency", None)
        fulfill(route, response, json.dumps(body))

    page.route(f"{shop.live.url}/payment-button/process/*/public", without_currency)
    page.goto(shop.site.checkout_url(shop.live.url, pid, shop.keys["publicKey"], currency="CHF"))
    expect(btn(page, ".amount-value")).to_have_text("CHF\u00a019.99")
    page.goto(shop.site.checkout_url(shop.live.url, pid, shop.keys["publicKey"], currency="Euro"))
    # not a code Intl knows: written after it
    expect(btn(page, ".amount-value")).to_have_text("19.99")
    expect(btn(page, ".currency")).to_have_text("Euro")
    page.goto(shop.site.checkout_url(shop.live.url, pid, shop.keys["publicKey"]))
    expect(btn(page, ".amount-value")).to_have_text("19.99")  # no currency at all: the amount alone
    expect(btn(page, ".currency")).to_be_hidden()
