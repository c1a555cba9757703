"""The customers' pages over HTTP (Flask test client, real database): the checkout page of a process
(app/web/checkout.py) in each state, its headers, its 404/405 pages; a payment link's page, its
click (303 to the checkout page, a process with the link's price and metadata), every 410 case
creating nothing, the rate limit per client address (429 with Retry-After). In Chromium:
tests/checkout/test_checkout_browser.py; through nginx:
tests/checkout/test_link_rate_limit_nginx.py."""
import html
import json
import re

import pytest
from support import dbutil
from support.chain_shop import XPUB, cli
from support.helpers import Api
from support.live_payments import USDC_LOCAL, Button, add_transfer

from app.domain import processes

SHOP = "http://shop.test"


def preorder(api, **fields):
    body = {"amount": 19.99, "currency": "EUR", "metadata": {"email": "customer@private.example"},
            "description": "Blue mug <b>&amp;</b>", "successUrl": f"{SHOP}/thanks?order=A-1",
            "cancelUrl": f"{SHOP}/cart"}
    body.update(fields)
    response = api.preorder({k: v for k, v in body.items() if v is not None})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def sandbox_pay(client, merchant, process_id, outcome="success"):
    paid = client.post(f"/payment-button/process/{process_id}/sandbox/pay",
                       json={"outcome": outcome}, headers={"x-public-key": merchant["publicKey"]})
    assert paid.status_code == 200, paid.get_data(as_text=True)


def text_of(page):
    """The page's visible text, tags left out, spaces joined."""
    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def count_processes(app):
    return dbutil.scalar(app.config["DATABASE"], "SELECT count(*) FROM processes")


def assert_page_headers(response):
    csp = response.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
    assert re.search(r"(^|; )script-src 'self';", csp) and "default-src 'self'" in csp
    # The button's modules and its shadow style sheet are files of this service: nothing inline.
    assert re.search(r"(^|; )style-src 'self';", csp) and "sha256-" not in csp, csp
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.mimetype == "text/html"


def test_a_pending_checkout_page_shows_the_name_description_price_and_button(client, api, merchant,
                                                                             runner):
    runner.invoke(args=["merchants", "set-display-name", merchant["merchantId"], "Pottery & Co <3"])
    process = preorder(api)
    assert process["checkoutUrl"] == f"http://localhost/checkout/{process['processId']}"
    response = client.get(f"/checkout/{process['processId']}")
    assert response.status_code == 200
    assert_page_headers(response)
    page = response.get_data(as_text=True)
    assert '<p class="seller-name" id="seller">Pottery &amp; Co &lt;3</p>' in page
    # The description literally: its markup is text, never markup.
    assert '<h1 id="what" class="what">Blue mug &lt;b&gt;&amp;amp;&lt;/b&gt;</h1>' in page
    assert '<span id="price">€19.99</span>' in page
    assert (f'<payment-button process-id="{process["processId"]}"'
            f' public-key="{merchant["publicKey"]}">' in page)
    assert '<script src="/payment-button/button.js"></script>' in page
    assert '<script src="/checkout/assets/checkout.js"></script>' in page
    assert f'<a href="{SHOP}/cart" id="back">Back to the shop</a>' in page
    assert "TEST MODE" in page
    # Never the metadata, never a secret.
    assert "customer@private.example" not in page and "email" not in page
    assert merchant["secretKey"] not in page and merchant["webhookSecret"] not in page
    # Every asset is this service's own: no other origin.
    assert not re.search(r'(src|href)="(https?:)?//', page.replace(f'href="{SHOP}/cart"', ""))


def test_the_checkout_address_takes_any_case_and_unknown_ids_are_pages(client, api):
    process_id = preorder(api)["processId"]
    assert client.get(f"/checkout/{process_id.upper()}").status_code == 200
    for path in (f"/checkout/{'0' * 8}-0000-4000-8000-{'0' * 12}", "/checkout/nope", "/checkout/",
                 "/checkout", f"/checkout/{process_id}/more", "/checkout/%C2%B3"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert_page_headers(response)
        assert "<h1 id=\"what\">Not found</h1>" in response.get_data(as_text=True)
    refused = client.post(f"/checkout/{process_id}")
    assert refused.status_code == 405 and refused.headers["Allow"] == "GET, HEAD"
    assert refused.mimetype == "text/html"
    assert client.get("/checkout/assets/checkout.css").status_code == 200
    assert client.get("/checkout/assets/nope.css").status_code == 404


def test_a_sandbox_payment_shows_a_receipt_and_sends_the_customer_on(client, api, merchant):
    process_id = preorder(api)["processId"]
    sandbox_pay(client, merchant, process_id)
    response = client.get(f"/checkout/{process_id}")
    page = response.get_data(as_text=True)
    assert response.status_code == 200
    assert_page_headers(response)
    onward = f"{SHOP}/thanks?order=A-1&amp;processId={process_id}"
    assert f'<meta http-equiv="refresh" content="5; url={onward}">' in page
    assert (f'<a class="button primary" id="continue" href="{onward}">Continue to the shop</a>'
            in page)
    shown = text_of(page)
    assert ("Payment received Amount €19.99 Payment Test payment (sandbox): no real money moved."
            in shown)
    assert ("<payment-button" not in page and "button.js" not in page
            and "Back to the shop" not in page)
    assert "customer@private.example" not in page


def test_without_a_success_url_the_receipt_stays(client, api, merchant):
    process_id = preorder(api, successUrl=None, cancelUrl=None, description=None)["processId"]
    page = client.get(f"/checkout/{process_id}").get_data(as_text=True)
    assert "Back to the shop" not in page and '<h1 id="what" class="what">Payment</h1>' in page
    sandbox_pay(client, merchant, process_id)
    page = client.get(f"/checkout/{process_id}").get_data(as_text=True)
    assert "Payment received" in page and "http-equiv" not in page and "Continue" not in page


def test_the_success_url_gets_process_id_added_to_its_query(client, api, merchant):
    for url, onward in ((f"{SHOP}/done", f"{SHOP}/done?processId={{}}"),
                        (f"{SHOP}/done?x=1&y=%20#top",
                         f"{SHOP}/done?x=1&amp;y=%20&amp;processId={{}}#top")):
        process_id = preorder(api, successUrl=url)["processId"]
        sandbox_pay(client, merchant, process_id)
        page = client.get(f"/checkout/{process_id}").get_data(as_text=True)
        assert f'href="{onward.format(process_id)}"' in page, page


def test_a_live_payment_shows_asset_network_and_transaction(client, api, merchant, runner, app,
                                                            clock):
    cli(runner, "networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
        "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
    cli(runner, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_LOCAL, "--decimals", "6", "--skip-contract-check")
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    process_id = preorder(api, amount=12, currency="USD")["processId"]
    assert Button(client, merchant["publicKey"]).confirm(process_id).status_code == 200
    add_transfer(app, process_id, "ab", 0, 12_000_000, 10, "confirmed")
    with app.app_context():
        processes.complete(app.extensions["db"], process_id, clock(), by="operator")
    page = client.get(f"/checkout/{process_id}").get_data(as_text=True)
    assert ("Payment received Amount $12.00 Paid 12 USDC Network Local chain Transaction 0x"
            + "ab" * 32) in text_of(page)
    assert "Test payment" not in page


@pytest.mark.parametrize("final", ["cancelled", "expired"])
def test_a_cancelled_or_expired_process_says_so(client, api, clock, final):
    process_id = preorder(api)["processId"]
    if final == "cancelled":
        assert api.cancel(process_id).status_code == 200
    else:
        clock.advance(1800)
    page = client.get(f"/checkout/{process_id}").get_data(as_text=True)
    assert f"This payment {'was cancelled' if final == 'cancelled' else 'has expired'}" in page
    assert "nothing was charged" in page
    assert "<payment-button" not in page and "http-equiv" not in page
    assert f'<a href="{SHOP}/cart">Back to the shop</a>' in page


def test_a_disabled_merchants_checkout_page_shows_no_button(client, api, merchant, runner):
    process_id = preorder(api)["processId"]
    assert runner.invoke(args=["merchants", "disable", merchant["merchantId"]]).exit_code == 0
    page = client.get(f"/checkout/{process_id}").get_data(as_text=True)
    assert "The seller cannot take payments right now." in page and "<payment-button" not in page


# --- Payment links ------------------------------------------------------------------------------

def make_link(api, **fields):
    body = {"amount": 25, "currency": "EUR", "description": "Pottery class, Saturday",
            "metadata": {"sku": "CLS-1", "note": "private note"}, "successUrl": f"{SHOP}/booked"}
    body.update(fields)
    response = api.client.post("/payment-button/links",
                               json={k: v for k, v in body.items() if v is not None},
                               headers=api.headers())
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_the_link_page_creates_nothing_and_its_click_makes_a_process(client, api, app, merchant):
    link = make_link(api)
    for _ in range(3):
        response = client.get(f"/l/{link['linkId']}")
        assert response.status_code == 200
    assert client.head(f"/l/{link['linkId']}").status_code == 200
    assert count_processes(app) == 0
    assert_page_headers(response)
    page = response.get_data(as_text=True)
    assert "<title>Pottery class, Saturday · Test shop</title>" in page
    assert '<span id="price">€25.00</span>' in page
    assert f'<form method="post" action="/l/{link["linkId"]}">' in page
    assert '<button type="submit" class="button primary pay">Pay</button>' in page
    assert "csrf" not in page and "CLS-1" not in page and "private note" not in page

    clicked = client.post(f"/l/{link['linkId']}")
    assert clicked.status_code == 303
    process_id = clicked.headers["Location"].removeprefix("/checkout/")
    assert count_processes(app) == 1
    body = Api(client, merchant["secretKey"]).get(process_id).get_json()
    assert (body["amount"], body["currency"], body["description"], body["successUrl"],
            body["cancelUrl"]) == (25, "EUR", "Pottery class, Saturday", f"{SHOP}/booked", None)
    assert body["metadata"] == {"sku": "CLS-1", "note": "private note",
                                "paymentLinkId": link["linkId"]}
    page = client.get(clicked.headers["Location"]).get_data(as_text=True)
    assert f'<a href="/l/{link["linkId"]}" id="back">Back</a>' in page  # "Back" is the link's page
    assert "private note" not in page and "paymentLinkId" not in page


def count_unavailable(client, app, link_id, reason_text):
    before = count_processes(app)
    for method in ("get", "post"):
        response = getattr(client, method)(f"/l/{link_id}")
        assert response.status_code == 410, (method, response.get_data(as_text=True))
        assert_page_headers(response)
        page = response.get_data(as_text=True)
        assert "No longer available" in page and reason_text in page
    assert count_processes(app) == before


def test_a_deactivated_link_is_gone_and_creates_nothing(client, api, app, merchant):
    link = make_link(api)
    started = client.post(f"/l/{link['linkId']}").headers["Location"]
    response = api.client.post(f"/payment-button/links/{link['linkId']}/deactivate",
                               headers=api.headers())
    assert response.status_code == 200
    count_unavailable(client, app, link["linkId"], "The seller has turned this payment link off.")
    # A process already made from it can still be paid.
    sandbox_pay(client, merchant, started.removeprefix("/checkout/"))
    assert "Payment received" in client.get(started).get_data(as_text=True)


def test_an_expired_link_is_gone_and_creates_nothing(client, api, app, clock):
    link = make_link(api, expiresAt="2026-11-18T12:00:00Z")
    assert client.post(f"/l/{link['linkId']}").status_code == 303
    clock.advance(3600)
    count_unavailable(client, app, link["linkId"], "This payment link has expired.")


def test_a_sold_out_link_is_gone_and_creates_nothing_yet_counts_every_payment(client, api, app,
                                                                              merchant):
    link = make_link(api, maxPayments=1)
    first = client.post(f"/l/{link['linkId']}").headers["Location"].removeprefix("/checkout/")
    second = client.post(f"/l/{link['linkId']}").headers["Location"].removeprefix("/checkout/")
    sandbox_pay(client, merchant, first)
    count_unavailable(client, app, link["linkId"], "reached the number of payments it takes")
    sandbox_pay(client, merchant, second)  # started before it sold out: it still completes
    shown = api.client.get(f"/payment-button/links/{link['linkId']}",
                           headers=api.headers()).get_json()
    assert (shown["payments"], shown["maxPayments"], shown["active"]) == (2, 1, False)


def test_a_disabled_merchants_link_is_gone(client, api, app, merchant, runner):
    link = make_link(api)
    assert runner.invoke(args=["merchants", "disable", merchant["merchantId"]]).exit_code == 0
    count_unavailable(client, app, link["linkId"], "no longer takes payments")


def test_unknown_links_are_404_pages(client):
    for path in ("/l/link_" + "0" * 24, "/l/nope", "/l/", "/l", "/l/link_" + "A" * 24, "/l/x/y"):
        for method in ("get", "post"):
            response = getattr(client, method)(path)
            assert response.status_code == 404, (method, path)
            assert (response.mimetype == "text/html"
                    and "Not found" in response.get_data(as_text=True))
    refused = client.put("/l/link_" + "0" * 24)
    assert refused.status_code == 405 and refused.headers["Allow"] == "GET, HEAD, POST"


def test_ten_clicks_from_one_client_then_429_while_others_still_click(client, api, app, clock):
    link = make_link(api)
    path = f"/l/{link['linkId']}"
    one = {"REMOTE_ADDR": "198.51.100.7"}
    for _ in range(10):
        assert client.post(path, environ_base=one).status_code == 303
    refused = client.post(path, environ_base=one)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "60"
    assert_page_headers(refused)
    assert "Wait 60 seconds" in refused.get_data(as_text=True)
    assert count_processes(app) == 10
    # Another address is counted apart; so is one forwarded by the local proxy (nginx).
    assert client.post(path, environ_base={"REMOTE_ADDR": "198.51.100.8"}).status_code == 303
    proxied = {"REMOTE_ADDR": "127.0.0.1"}
    assert client.post(path, environ_base=proxied,
                       headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 303
    # A forged X-Forwarded-For from elsewhere is not believed.
    assert client.post(path, environ_base=one,
                       headers={"X-Forwarded-For": "203.0.113.10"}).status_code == 429
    assert count_processes(app) == 12
    # Showing the page is never limited; a minute later the client may click again.
    assert client.get(path, environ_base=one).status_code == 200
    clock.advance(60)
    assert client.post(path, environ_base=one).status_code == 303


def test_a_live_link_page_has_no_test_badge(client, make_merchant):
    live = make_merchant(name="Live shop", live=True)
    link = make_link(Api(client, live["secretKey"]), successUrl="https://shop.example/ok")
    page = client.get(f"/l/{link['linkId']}").get_data(as_text=True)
    assert "TEST MODE" not in page and "test mode" not in page


def test_a_page_says_so_when_the_database_cannot_serve(client, api, app, monkeypatch):
    from app.db import DatabaseUnavailable
    from app.web import checkout

    process_id = preorder(api)["processId"]

    def gone(*args, **kwargs):
        raise DatabaseUnavailable("the database file was replaced")

    monkeypatch.setattr(checkout.processes, "get", gone)
    response = client.get(f"/checkout/{process_id}")
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert (response.mimetype == "text/html"
            and "Try again in a moment" in response.get_data(as_text=True))
    assert_page_headers(response)


def test_no_metadata_value_reaches_the_page_pending_or_paid(client, api, merchant):
    metadata = {"email": "a@b.example", "nested": {"phone": "+1 555 0100"}}
    process_id = preorder(api, metadata=metadata)["processId"]
    pending = client.get(f"/checkout/{process_id}").get_data(as_text=True)
    sandbox_pay(client, merchant, process_id)
    paid = client.get(f"/checkout/{process_id}").get_data(as_text=True)
    for page in (pending, paid):
        assert not any(v in page
                       for v in ("a@b.example", "555 0100", json.dumps(metadata), "metadata"))


def test_an_ipv6_client_is_counted_by_its_64(client, api, app):
    """One host holds a whole /64: ten clicks from ten of its addresses, then 429; another /64 is
    another client."""
    path = f"/l/{make_link(api)['linkId']}"
    for n in range(1, 11):
        assert client.post(path,
                           environ_base={"REMOTE_ADDR": f"2001:db8:0:1::{n:x}"}).status_code == 303
    assert client.post(path, environ_base={"REMOTE_ADDR": "2001:db8:0:1::ff"}).status_code == 429
    assert client.post(path, environ_base={"REMOTE_ADDR": "2001:db8:0:2::1"}).status_code == 303
    assert count_processes(app) == 11
