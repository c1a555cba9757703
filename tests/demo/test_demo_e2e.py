"""The whole loop in Chromium, against the real service with DEMO_SHOP on (``live_server``):
the demo shop creates a preorder server-side, the customer pays with the button, the process
completes, the signed webhook reaches the built-in receiver, which verifies it and shows the order
reference from the metadata. Also the failure path and the expiry path.

Webhooks are delivered by the real delivery worker (`Worker.run_once`, which also sweeps expired
processes with `app.domain.processes.expire_due`), to the receiver over real HTTP.
Screenshots of each final state: tests/artifacts/demo-*.png.
"""
import json
import re

import pytest
from support.browser import expect_ready

from app.data import outbox as event_rows

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None


@pytest.fixture
def app_config():
    return {"DEMO_SHOP": True}


@pytest.fixture
def demo(live_server, app):
    live_server.cli("demo-merchant", "--webhook-url", f"{live_server.url}/demo/webhooks")
    with open(app.config["DEMO_MERCHANT_FILE"]) as f:
        return json.load(f)


def place_order(page, live_server, amount, order_ref):
    page.goto(live_server.url + "/")
    page.get_by_label("Amount").fill(amount)
    page.get_by_label("Order reference").fill(order_ref)
    page.get_by_role("button", name="Create preorder").click()
    expect_ready(page.locator("payment-button .pay"))
    return page.locator("payment-button").get_attribute("process-id")


def pay(page, outcome):
    page.locator("payment-button .pay").click()
    page.locator("payment-button dialog").get_by_role(
        "button", name=f"Simulate {outcome} payment").click()


def shop_events(page):
    return page.locator("#button-events li code")


def events(live_server, process_id):
    return event_rows.for_process(live_server.app.extensions["db"].connection(), process_id)


def event_ids(live_server, process_id):
    return [e.id for e in events(live_server, process_id)]


def delivered(live_server, process_id):
    return [(e.type, e.status, e.attempts) for e in events(live_server, process_id)]


def receiver_entries(page):
    return page.locator("li.delivery")


def expect_entry(entry, event_type, webhook_id, *body_parts):
    expect(entry).to_have_class("delivery verified")
    expect(entry).to_have_attribute("data-webhook-id", webhook_id)
    expect(entry.locator(".type")).to_have_text(event_type)
    expect(entry.locator(".badge")).to_have_text("Signature verified")
    for part in body_parts:
        expect(entry.locator("pre")).to_contain_text(part)


def test_pay_in_the_demo_shop_and_see_the_verified_webhook(page, live_server, demo, worker,
                                                           screenshot):
    page.set_viewport_size({"width": 1100, "height": 900})
    pid = place_order(page, live_server, "42.00", "A-1001")
    assert demo["secretKey"] not in page.content()
    expect(page.locator("dl.summary dd").first).to_have_text("A-1001")
    expect(page.locator("payment-button .amount-value")).to_have_text("$42.00")

    pay(page, "successful")
    expect(page.locator("payment-button .outcome-title")).to_have_text("Payment received")
    expect(shop_events(page)).to_have_text(["payment-success"])
    assert live_server.merchant_api(demo["secretKey"]).get(pid)["status"] == "completed"
    screenshot(page, "demo-shop-paid", full_page=True)

    worker.run_once()
    assert delivered(live_server, pid) == [("payment.completed", "delivered", 1)]
    page.goto(live_server.url + "/demo/webhooks")
    expect(receiver_entries(page)).to_have_count(1)
    expect_entry(receiver_entries(page).first, "payment.completed", event_ids(live_server, pid)[0],
                 f'"processId": "{pid}"', '"status": "completed"', '"amount": 42.00',
                 '"metadata": {\n      "orderRef": "A-1001"\n    }')
    screenshot(page, "demo-webhooks-paid", full_page=True)


def test_failed_payment_then_success_both_reach_the_receiver(page, live_server, demo, worker,
                                                             screenshot):
    pid = place_order(page, live_server, "5", "A-2002")
    pay(page, "failed")
    expect(page.locator("payment-button .notice")).to_have_text(
        "Payment failed. No money was taken. You can try again.")
    expect(shop_events(page)).to_have_text(["payment-failure"])
    assert live_server.merchant_api(demo["secretKey"]).get(pid)["status"] == "pending"
    worker.run_once()

    receiver = page.context.new_page()  # a second tab on the receiver, refreshing itself
    receiver.clock.install()
    receiver.goto(live_server.url + "/demo/webhooks")
    expect_entry(receiver_entries(receiver).first, "payment.failed", event_ids(live_server, pid)[0],
                 '"status": "pending"', '"orderRef": "A-2002"')

    page.bring_to_front()
    pay(page, "successful")
    expect(page.locator("payment-button .outcome-title")).to_have_text("Payment received")
    expect(shop_events(page)).to_have_text(["payment-success", "payment-failure"])  # newest first
    screenshot(page, "demo-shop-failed-then-paid", full_page=True)
    worker.run_once()
    assert delivered(live_server, pid) == [("payment.failed", "delivered", 1),
                                           ("payment.completed", "delivered", 1)]

    receiver.clock.run_for(3000)  # its refresh tick: the list is replaced in place
    expect(receiver.locator("#count")).to_have_text("2")
    failed_id, completed_id = event_ids(live_server, pid)
    expect_entry(receiver_entries(receiver).nth(0), "payment.completed", completed_id,
                 '"orderRef": "A-2002"')
    expect_entry(receiver_entries(receiver).nth(1), "payment.failed", failed_id)
    screenshot(receiver, "demo-webhooks-failed-then-paid", full_page=True)


def test_expiry_shows_in_the_button_and_reaches_the_receiver(page, live_server, demo, worker, clock,
                                                             screenshot):
    page.goto(live_server.url + "/")
    page.get_by_label("Amount").fill("0")
    page.get_by_role("button", name="Create preorder").click()
    expect(page.locator("#amount-error")).to_have_text("Must be greater than 0.")
    expect(page.get_by_label("Amount")).to_have_attribute("aria-invalid", "true")

    pid = place_order(page, live_server, "12.50", "A-3003")
    clock.advance(1800)  # PROCESS_TTL_SECONDS: the process is past its expiresAt
    expect(page.locator("payment-button .outcome-title")).to_have_text("Payment expired")
    expect(shop_events(page)).to_have_text(["payment-expired"])
    expect(page.locator("#button-events li")).to_contain_text(
        re.compile(r"payment-expired status expired$"))
    screenshot(page, "demo-shop-expired", full_page=True)

    worker.run_once()  # its sweep, then delivery
    assert delivered(live_server, pid) == [("process.expired", "delivered", 1)]
    page.goto(live_server.url + "/demo/webhooks")
    expect(receiver_entries(page)).to_have_count(1)
    expect_entry(receiver_entries(page).first, "process.expired", event_ids(live_server, pid)[0],
                 '"status": "expired"', '"orderRef": "A-3003"')
    screenshot(page, "demo-webhooks-expired", full_page=True)
