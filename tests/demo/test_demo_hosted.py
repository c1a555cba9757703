"""The demo shop without frontend code (DEMO_SHOP on): "Pay on a hosted page" creates the preorder
with a description and the shop's success and cancel URLs and sends the customer to the checkout
page, which sends them back to the shop's thanks page once paid; `flask demo-merchant` makes the
demo's payment link once (reused while it takes payments), prints it with the console login, and the
shop shows it. Test client for the routes and the command; Chromium for the whole way
(tests/artifacts/demo-hosted-*.png)."""
import json
import re

import pytest
from support.browser import expect_ready
from support.helpers import Api

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None


@pytest.fixture
def app_config():
    return {"DEMO_SHOP": True}


def keys_of(app):
    with open(app.config["DEMO_MERCHANT_FILE"]) as f:
        return json.load(f)


@pytest.fixture
def demo(runner, app):
    result = runner.invoke(args=["demo-merchant", "--webhook-url", "http://127.0.0.1:5000/demo/webhooks",
                                 "--console-login", "--base-url", "http://127.0.0.1:5000"])
    assert result.exit_code == 0, result.output
    return keys_of(app)


def sandbox_pay(client, public_key, process_id):
    paid = client.post(f"/payment-button/process/{process_id}/sandbox/pay",
                       json={"outcome": "success"}, headers={"x-public-key": public_key})
    assert paid.status_code == 200, paid.get_data(as_text=True)


def test_pay_on_a_hosted_page_redirects_to_the_checkout_page(client, demo):
    response = client.post("/", data={"amount": "12.50", "currency": "EUR", "order_ref": "A-7",
                                      "hosted": "1"})
    assert response.status_code == 303
    process_id = re.fullmatch(r"/checkout/([0-9a-f-]{36})", response.headers["Location"])[1]
    process = Api(client, demo["secretKey"]).get(process_id).get_json()
    assert (process["amount"], process["currency"], process["metadata"]) == (
        12.5, "EUR", {"orderRef": "A-7"})
    assert (process["description"], process["successUrl"], process["cancelUrl"]) == (
        "Demo shop order A-7", "http://localhost/demo/thanks", "http://localhost/")
    assert process["checkoutUrl"] == f"http://localhost/checkout/{process_id}"
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert ("Demo shop order A-7" in page and "€12.50" in page
            and 'href="http://localhost/" id="back">Back to the shop' in page)

    sandbox_pay(client, demo["publicKey"], process_id)
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert f'url=http://localhost/demo/thanks?processId={process_id}"' in page
    thanks = client.get(f"/demo/thanks?processId={process_id}")
    text = thanks.get_data(as_text=True)
    assert thanks.status_code == 200 and "Thank you: your order is paid" in text
    assert '<strong id="order-ref">A-7</strong>' in text


def test_a_hosted_order_is_refused_like_any_other(client, demo, app):
    from support import dbutil

    refused = client.post("/", data={"amount": "0", "hosted": "1"})
    assert (refused.status_code == 400
            and "Must be greater than 0." in refused.get_data(as_text=True))
    assert dbutil.scalar(app.config["DATABASE"], "SELECT count(*) FROM processes") == 0


def test_the_thanks_page_trusts_the_service_not_the_address(client, demo):
    process_id = (client.post("/", data={"amount": "5", "hosted": "1"})
                  .headers["Location"].rsplit("/", 1)[1])
    text = client.get(f"/demo/thanks?processId={process_id}").get_data(as_text=True)
    assert "Your order is not paid" in text and '<strong id="status">pending</strong>' in text
    for query in ("", "?processId=nope", "?processId=00000000-0000-4000-8000-000000000000"):
        assert client.get(f"/demo/thanks{query}").status_code == 404


def test_demo_merchant_makes_its_payment_link_once_and_prints_it(runner, app, client, demo):
    link_id = demo["paymentLinkId"]
    again = runner.invoke(args=["demo-merchant", "--base-url", "http://127.0.0.1:5000"])
    assert again.exit_code == 0, again.output
    assert (f"  payment link:    http://127.0.0.1:5000/l/{link_id}  (Demo: a cup of coffee"
            in again.output)
    assert keys_of(app)["paymentLinkId"] == link_id
    as_json = runner.invoke(args=["demo-merchant", "--json"])
    assert json.loads(as_json.output)["paymentLinkId"] == link_id
    link = client.get(f"/payment-button/links/{link_id}",
                      headers={"x-secret-key": demo["secretKey"]}).get_json()
    assert (link["amount"], link["currency"], link["successUrl"], link["active"]) == (
        4.5, "USD", "http://127.0.0.1:5000/demo/thanks", True)
    # The shop shows it; it opens and sells.
    assert f'<a href="/l/{link_id}" id="payment-link">' in client.get("/").get_data(as_text=True)
    assert client.get(f"/l/{link_id}").status_code == 200
    # A link that no longer takes payments is replaced by a new one.
    assert runner.invoke(args=["links", "deactivate", link_id]).exit_code == 0
    replaced = runner.invoke(args=["demo-merchant"])
    new_id = keys_of(app)["paymentLinkId"]
    assert new_id != link_id and f"/l/{new_id}" in replaced.output
    assert "console login:" not in replaced.output and keys_of(app)["consolePassword"]


def test_pay_on_a_hosted_page_in_chromium_back_to_the_shop(page, live_server, app, screenshot):
    live_server.cli("demo-merchant", "--webhook-url", f"{live_server.url}/demo/webhooks",
                    "--base-url", live_server.url)
    page.goto(live_server.url + "/")
    page.get_by_label("Amount").fill("42.00")
    page.get_by_label("Order reference").fill("A-4242")
    page.get_by_role("button", name="Pay on a hosted page").click()
    expect(page).to_have_url(re.compile(re.escape(live_server.url) + r"/checkout/[0-9a-f-]{36}$"))
    process_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("heading", name="Demo shop order A-4242")).to_be_visible()
    expect(page.locator("#seller")).to_have_text("Demo shop")
    expect_ready(page.locator("payment-button .pay"))
    screenshot(page, "demo-hosted-checkout", full_page=True)
    page.locator("payment-button .pay").click()
    page.locator("payment-button dialog").get_by_role(
        "button", name="Simulate successful payment").click()
    expect(page).to_have_url(f"{live_server.url}/demo/thanks?processId={process_id}",
                             timeout=12_000)
    expect(page.get_by_role("heading", name="Thank you: your order is paid")).to_be_visible()
    expect(page.locator("#order-ref")).to_have_text("A-4242")
    screenshot(page, "demo-hosted-thanks", full_page=True)


def test_the_demos_payment_link_in_chromium(page, live_server, app):
    live_server.cli("demo-merchant", "--base-url", live_server.url)
    page.goto(live_server.url + "/")
    page.locator("#payment-link").click()
    expect(page.get_by_role("heading", name="Demo: a cup of coffee")).to_be_visible()
    expect(page.locator("#price")).to_have_text("$4.50")
    page.get_by_role("button", name="Pay").click()
    expect_ready(page.locator("payment-button .pay"))
    process_id = page.url.rsplit("/", 1)[1]
    page.locator("payment-button .pay").click()
    page.locator("payment-button dialog").get_by_role(
        "button", name="Simulate successful payment").click()
    expect(page).to_have_url(f"{live_server.url}/demo/thanks?processId={process_id}",
                             timeout=12_000)
    expect(page.get_by_role("heading", name="Thank you: your order is paid")).to_be_visible()
