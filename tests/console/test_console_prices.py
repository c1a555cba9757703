"""Prices in the merchant's currency in the console (docs/console.md): amounts in each process's
currency ("€19.99", "¥1,200") on the list, the process page, the refund form and the overview; a
payment's locked quote on the process page (what to pay in the token, the rate with its pair, its
source and times); the currency setting on the payouts page (owner only); the overview's exact sums
per currency; the CSV's currency, rate, rateSource and rateRound columns. Test client over HTTP,
real database, the live payment confirmed through the Button API with a manual EUR/USD rate."""
import csv
import html
import io
import json
import re
from decimal import Decimal

import pytest
from support import dbutil
from support.chain_shop import XPUB, cli
from support.console import csrf_of, log_in
from support.live_payments import USDC_LOCAL, Button, add_transfer

DAY = 86_400
FEED = "0x694AA1769357215DE4FAC081bf1f309aDC325306"
ROUND = "18446744073709562301"


@pytest.fixture
def console(runner, client, merchant):
    return log_in(runner, client, merchant)


@pytest.fixture
def euro_shop(runner, merchant):
    """A EUR merchant with a wallet, USDC (pegged to USD) on a local network added without asking
    a node (as tests/chain/conftest.py `chains`), and a manual EUR/USD rate of 1.0842."""
    cli(runner, "rates", "set", "EUR/USD", "1.0842")
    cli(runner, "merchants", "set-currency", merchant["merchantId"], "EUR")
    cli(runner, "networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
        "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
    cli(runner, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_LOCAL, "--decimals", "6", "--skip-contract-check")
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    return merchant


def order(api, amount, currency=None):
    body = {"amount": amount, "metadata": {"orderRef": "A-1"}}
    if currency:
        body["currency"] = currency
    response = api.preorder(body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["processId"]


def confirm(client, merchant, pid):
    confirmed = Button(client, merchant["publicKey"]).confirm(pid)
    assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
    return confirmed.get_json()["payment"]


def sandbox_pay(api, merchant, pid):
    paid = api.client.post(f"/payment-button/process/{pid}/sandbox/pay",
                           json={"outcome": "success"},
                           headers={"x-public-key": merchant["publicKey"]})
    assert paid.status_code == 200, paid.get_data(as_text=True)


def dd(text, dd_id):
    """The text of the page's <dd id=...>, its tags left out and spaces joined."""
    found = re.search(rf'<dd id="{dd_id}">(.*?)</dd>', text, re.S)
    assert found, dd_id
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", found[1])).split())


def read_csv(console):
    response = console.get("/dashboard/processes.csv")
    assert response.status_code == 200 and response.mimetype == "text/csv"
    text = response.get_data(as_text=True)
    return text.split("\r\n", 1)[0], {r["processId"]: r for r in csv.DictReader(io.StringIO(text))}


def test_a_euro_process_shows_euros_on_the_list_and_its_page_and_its_quote(
        console, euro_shop, api, client, app, runner, clock):
    pid = order(api, 19.99)
    yen = order(api, 1200, currency="JPY")
    list_page = console.get("/dashboard/").text
    assert '<td class="num" data-label="Amount">€19.99</td>' in list_page
    assert '<td class="num" data-label="Amount">¥1,200</td>' in list_page
    page = console.get(f"/dashboard/processes/{pid}").text
    assert '<dd id="amount">€19.99</dd>' in page
    assert ('<span class="tl-title">Created</span>'
            ' <span class="tl-detail">Amount €19.99</span>') in page
    assert "No on-chain payment chosen" in page and 'id="quote"' not in page
    confirmation = console.get(f"/dashboard/processes/{pid}/cancel").text
    assert "The customer can no longer pay its €19.99; a process.cancelled event" in confirmation

    clock.advance(60)  # quoted a minute after the rate was set
    payment = confirm(client, euro_shop, pid)
    assert payment["amountDue"] == "21.673158"  # 19.99 × 1.0842, exactly
    assert payment["quote"]["source"] == "manual" and payment["quote"]["rate"] == "1.0842"
    page = console.get(f"/dashboard/processes/{pid}").text
    assert dd(page, "quote-pay") == "€19.99 · pay 21.673158 USDC"
    assert dd(page, "quote-rate") == "1 EUR = 1.0842 USD"
    assert dd(page, "quote-source") == "manual rate, set by the operator"
    assert dd(page, "quote-rate-updated") == "2026-11-18 11:06:40 UTC"
    assert dd(page, "quote-quoted") == ("2026-11-18 11:07:40 UTC (held until the process expires;"
                                        " another token or network quotes again)")
    assert '<dd id="amount">€19.99</dd>' in page

    add_transfer(app, pid, "aa", 0, 21_673_158, 10, "confirmed")
    cli(runner, "processes", "complete", pid)
    page = console.get(f"/dashboard/processes/{pid}").text
    assert dd(page, "quote-quoted") == "2026-11-18 11:07:40 UTC"  # final: no longer held
    refund = console.get(f"/dashboard/processes/{pid}/refund").text
    assert '<strong id="process-amount">€19.99</strong>' in refund
    assert "Up to <strong>21.673158 USDC</strong> on Local chain can be refunded" in refund
    row = re.search(rf'<a class="mono" href="/dashboard/processes/{pid}">.*?</tr>',
                    console.get("/dashboard/").text, re.S)[0]
    assert '<td class="num" data-label="Amount">€19.99</td>' in row
    assert '<td class="num paid" data-label="Paid">21.673158</td>' in row  # token units stay
    assert yen in list_page


def test_a_payment_at_par_and_one_quoted_by_a_price_feed(console, euro_shop, api, client, app):
    dollars = order(api, 10, currency="USD")
    confirm(client, euro_shop, dollars)
    page = console.get(f"/dashboard/processes/{dollars}").text
    assert dd(page, "quote-pay") == "$10.00 · pay 10 USDC at par"
    assert 'id="quote-rate"' not in page and 'id="quote-source"' not in page
    assert dd(page, "quote-quoted").startswith("2026-11-18 11:06:40 UTC")

    euros = order(api, 19.99)
    confirm(client, euro_shop, euros)
    feed_quote = {"currency": "EUR", "amount": "19.99", "rate": "1.08421500", "pair": "EUR/USD",
                  "inverse": False, "source": "feed", "networkId": "local", "feed": FEED,
                  "roundId": ROUND, "rateUpdatedAt": "2026-11-18T10:59:59Z",
                  "quotedAt": "2026-11-18T11:06:40Z"}
    with dbutil.connect(app.config["DATABASE"]) as conn:  # as a confirm quoted by a feed writes it
        conn.execute("UPDATE payments SET quote = ? WHERE process_id = ?",
                     (json.dumps(feed_quote, separators=(",", ":")), euros))
    page = console.get(f"/dashboard/processes/{euros}").text
    assert dd(page, "quote-rate") == "1 EUR = 1.08421500 USD"
    assert dd(page, "quote-source") == (f"price feed {FEED[:10]}…{FEED[-8:]} Copy on Local chain,"
                                        f" round {ROUND}")
    assert f'data-value="{FEED}"' in page  # what Copy copies: the whole address
    assert dd(page, "quote-rate-updated") == "2026-11-18 10:59:59 UTC"


def test_the_csv_has_the_currency_and_the_quotes_rate_source_and_round(console, euro_shop, api,
                                                                        client, app):
    manual = order(api, 19.99)
    confirm(client, euro_shop, manual)
    fed = order(api, 5)
    confirm(client, euro_shop, fed)
    legacy = order(api, 3, currency="USD")
    confirm(client, euro_shop, legacy)
    unpaid = order(api, 1200, currency="JPY")
    feed_quote = {"currency": "EUR", "amount": "5", "rate": "1.08420000", "pair": "EUR/USD",
                  "inverse": False, "source": "feed", "networkId": "local", "feed": FEED,
                  "roundId": ROUND,
                  "rateUpdatedAt": "2026-11-18T10:59:59Z", "quotedAt": "2026-11-18T11:06:40Z"}
    with dbutil.connect(app.config["DATABASE"]) as conn:
        conn.execute("UPDATE payments SET quote = ? WHERE process_id = ?",
                     (json.dumps(feed_quote), fed))
        # before quotes
        conn.execute("UPDATE payments SET quote = NULL WHERE process_id = ?", (legacy,))
    header, rows = read_csv(console)
    assert header == ("processId,status,amount,livemode,createdAt,updatedAt,expiresAt,metadata,"
                      "assetId,networkId,amountDue,amountPaid,amountRefunded,marks,transferTxHashes,"
                      "transferLogIndexes,transferBlockNumbers,transferBlockHashes,"
                      "currency,rate,rateSource,rateRound")

    def priced(pid):
        row = rows[pid]
        return (row["amount"], row["amountDue"], row["currency"], row["rate"], row["rateSource"],
                row["rateRound"])

    assert priced(manual) == ("19.99", "21.673158", "EUR", "1.0842", "manual", "")
    # Every amount with its currency's places at least, more only where the value has them.
    assert priced(fed) == ("5.00", "5.421", "EUR", "1.08420000", "feed", ROUND)
    assert priced(legacy) == ("3.00", "3.00", "USD", "1", "par", "")
    assert priced(unpaid) == ("1200", "", "JPY", "", "", "")


def test_the_owner_sets_the_currency_on_the_settings_page(console, merchant, api):
    page = console.get("/dashboard/settings")
    assert page.status_code == 200
    section = re.search(r'<section class="panel" id="currency">(.*?)</section>', page.text, re.S)[1]
    assert '<strong id="merchant-currency">USD</strong> (US Dollar)' in section
    assert '<option value="USD" selected>USD · US Dollar</option>' in section
    assert '<option value="EUR">EUR · Euro</option>' in section and "Save currency" in section
    panels = [page.text.index(f'<section class="panel" id="{panel}">')
              for panel in ("display-name", "currency", "tolerance", "payout")]
    assert panels == sorted(panels)  # in the page's order
    token = csrf_of(page.text)
    saved = console.post("/dashboard/settings/currency",
                         data={"currency": "EUR", "csrf_token": token})
    assert (saved.status_code, saved.headers["Location"]) == (
        303, "/dashboard/settings?done=currency#currency")
    shown = console.get(saved.headers["Location"]).text
    section = re.search(r'<section class="panel" id="currency">(.*?)</section>', shown, re.S)[1]
    assert ("Currency saved: processes created from now on whose preorder names none are priced in"
            " it; those made before keep theirs.") in section
    assert '<strong id="merchant-currency">EUR</strong> (Euro)' in section
    assert '<option value="EUR" selected>EUR · Euro</option>' in section
    pid = order(api, 19.99)
    assert api.get(pid).get_json()["currency"] == "EUR"

    refused = console.post("/dashboard/settings/currency",
                           data={"currency": "EURO", "csrf_token": token})
    assert refused.status_code == 400
    section = re.search(r'<section class="panel" id="currency">(.*?)</section>', refused.text,
                        re.S)[1]
    assert ('<p class="alert error" role="alert">The currency: Must be an ISO 4217 currency code in'
            ' use, in capital letters (e.g. USD, EUR, JPY): &#39;EURO&#39; is not'
            ' one.</p>') in section
    tolerance = re.search(r'<section class="panel" id="tolerance">(.*?)</section>', refused.text,
                          re.S)[1]
    assert "alert" not in tolerance  # the error is the currency form's
    assert console.post("/dashboard/settings/currency",
                        data={"currency": "eur", "csrf_token": token}).status_code == 400
    # no token
    assert console.post("/dashboard/settings/currency",
                        data={"currency": "JPY"}).status_code == 400
    assert '<strong id="merchant-currency">EUR</strong>' in console.get("/dashboard/settings").text


def test_a_viewer_sees_the_currency_and_cannot_change_it(runner, client, merchant):
    cli(runner, "merchants", "set-currency", merchant["merchantId"], "JPY")
    viewer = log_in(runner, client, merchant, role="viewer")
    page = viewer.get("/dashboard/settings")
    section = re.search(r'<section class="panel" id="currency">(.*?)</section>', page.text, re.S)[1]
    assert '<strong id="merchant-currency">JPY</strong> (Japanese Yen)' in section
    assert "<form" not in section and "<select" not in section and "Save currency" not in section
    refused = viewer.post("/dashboard/settings/currency",
                          data={"currency": "EUR", "csrf_token": csrf_of(page.text)})
    assert refused.status_code == 403 and "viewer" in refused.text
    assert '<strong id="merchant-currency">JPY</strong>' in viewer.get("/dashboard/settings").text


def test_the_overview_sums_completed_processes_per_currency_exactly(euro_shop, api, client, app,
                                                                     runner, clock):
    def completed(amount, currency=None):
        pid = order(api, amount, currency)
        sandbox_pay(api, euro_shop, pid)
        return pid

    completed(500, "EUR")  # 30 days before "today": out of every window
    clock.advance(25 * DAY)
    for amount in (0.1, 0.2):  # 0.30000000000000004 as floats
        completed(amount, "USD")
    completed(19.99)
    completed(1200, "JPY")
    clock.advance(5 * DAY)
    cli(runner, "rates", "set", "EUR/USD", "1.0842")  # fresh again for today's live payment
    completed(19.99)
    completed(1, "JPY")
    live = order(api, 19.99)
    confirm(client, euro_shop, live)
    add_transfer(app, live, "bb", 0, 21_673_158, 10, "confirmed", timestamp=clock.now)
    cli(runner, "processes", "complete", live)
    order(api, 7)  # pending: not counted
    cancelled = order(api, 8)
    api.cancel(cancelled)

    console = log_in(runner, client, euro_shop)  # 30 days on: a new session
    page = console.get("/dashboard/overview").text
    section = re.search(r'<section class="panel" id="completed">(.*?)</section>', page, re.S)[1]
    assert "Completed in the last 30 days, by currency" in section

    def figures(code):
        row = re.search(rf'<tr id="completed-{code}">(.*?)</tr>', section, re.S)[1]
        return [f"{amount} {count}" for amount, count in re.findall(
            r'<td class="num" data-label="[^"]+"><a href="[^"]+">([^<]+)</a>'
            r' <span class="hint">(\([0-9]+\))</span>', row)]

    # the merchant's first
    assert re.findall(r'<tr id="completed-(\w+)">', section) == ["EUR", "JPY", "USD"]
    assert figures("EUR") == ["€39.98 (2)", "€59.97 (3)", "€59.97 (3)"]  # today, 7 days, 30 days
    assert figures("JPY") == ["¥1 (1)", "¥1,201 (2)", "¥1,201 (2)"]
    assert figures("USD") == ["$0.00 (0)", "$0.30 (2)", "$0.30 (2)"]
    sandbox = re.search(r'<section class="panel" id="sandbox">(.*?)</section>', page, re.S)[1]
    assert re.findall(r'<th scope="row">(\w+)</th>', sandbox) == ["EUR", "JPY", "USD"]
    assert ">€19.99</a> <span class=\"hint\">(1)</span>" in sandbox  # today's, without the live one
    assert "the highest day ¥1,200" in sandbox

    # the figures themselves: exact decimals, never floats
    from app.domain import merchants, overview
    with app.app_context():
        db = app.extensions["db"]
        sums = {c.code: c.amount[30] for c in overview.of_merchant(
            db, merchants.get(db, euro_shop["merchantId"]), clock.now).completed}
    assert all(type(amount) is Decimal for amount in sums.values())
    assert {code: str(amount.normalize()) for code, amount in sums.items()} == {
        "EUR": "59.97", "JPY": "1201", "USD": "0.3"}
