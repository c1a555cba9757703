"""Browser tests of the <payment-button> web component (app/static/button.js) in real Chromium.

The Button API they talk to is ``tests/button_api_double.py``: a TEST DOUBLE of an external API, for
the component test only (the server core is built separately and tested against the Flask app).
What these tests prove is the component's side of the contract: the requests it sends, how it shows
each answer, the events it dispatches, its polling, countdown and keyboard behaviour.
"""

import json
import re
import time
import uuid

import pytest

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect
except ImportError:  # the page fixture (tests/browser.py) skips, or fails in CI, before these are used
    PlaywrightTimeout = expect = None


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


def test_shows_exact_amount_test_mode_and_countdown(page, button_double, screenshot):
    pid = button_double.add(amount="1234.50")
    page.goto(button_double.page_url(pid, currency="EUR"))

    expect(button(page, ".amount-value")).to_have_text("1234.50")
    expect(button(page, ".currency")).to_have_text("EUR")
    expect(button(page, ".pay")).to_have_text("Pay 1234.50 EUR")
    expect(button(page, ".pay")).to_be_enabled()
    expect(button(page, ".badge")).to_have_text("TEST MODE")
    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in (29:5\d|30:00)$"))
    expect(button(page, ".note")).to_be_hidden()
    (_, method, path, headers, _) = button_double.api_requests()[0]
    assert (method, path) == ("GET", f"/payment-button/process/{pid}/public")
    assert headers["x-public-key"] == "pk_test_shop"
    assert page.evaluate("window.__events") == []
    screenshot(button(page), "button-pending")


def test_successful_sandbox_payment(page, button_double, screenshot):
    pid = button_double.add(amount="19.99")
    page.goto(button_double.page_url(pid))
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
        "detail": {**button_double.public_dict(pid), "status": "completed"},
    }]
    (_, _, path, headers, body) = button_double.api_requests("POST")[0]
    assert path == f"/payment-button/process/{pid}/sandbox/pay"
    assert (headers["content-type"], headers["x-public-key"], body) == (
        "application/json", "pk_test_shop", b'{"outcome":"success"}')
    assert button_double.status(pid) == "completed"
    screenshot(button(page), "button-paid")


def test_failed_sandbox_payment_leaves_it_pending_and_can_be_retried(page, button_double, screenshot):
    pid = button_double.add(amount="5")
    page.goto(button_double.page_url(pid))
    button(page, ".pay").click()
    button(page, ".sim-failure").click()

    expect(button(page, ".notice")).to_have_text("Payment failed. No money was taken. You can try again.")
    expect(button(page, "dialog")).to_be_hidden()
    expect(button(page, ".pay")).to_be_enabled()
    expect_focus(page, "pay")
    first = events(page, 1)
    assert first == [{"type": "payment-failure", "bubbles": True, "composed": True,
                      "detail": {**button_double.public_dict(pid), "status": "pending"}}]
    assert button_double.api_requests("POST")[0][4] == b'{"outcome":"failure"}'
    assert button_double.status(pid) == "pending"
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
def test_final_status_at_load_shows_state_and_fires_its_event_once(page, button_double, screenshot, status, title, event):
    pid = button_double.add(status=status)
    pause_clock(page)
    page.goto(button_double.page_url(pid))

    expect(button(page, ".outcome-title")).to_have_text(title)
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".countdown")).to_be_hidden()
    assert events(page, 1) == [{"type": event, "bubbles": True, "composed": True,
                                "detail": button_double.public_dict(pid)}]
    page.clock.run_for(120_000)  # a final state is never polled
    assert len(button_double.api_requests()) == 1
    assert len(page.evaluate("window.__events")) == 1
    screenshot(button(page), f"button-{status}")


@pytest.mark.parametrize("status, title, event", [
    ("completed", "Payment received", "payment-success"),
    ("cancelled", "Payment cancelled", "payment-cancelled"),
    ("expired", "Payment expired", "payment-expired"),
])
def test_status_changed_elsewhere_is_followed_by_polling(page, button_double, status, title, event):
    pid = button_double.add()
    page.goto(button_double.page_url(pid))
    expect(button(page, ".pay")).to_be_enabled()
    button_double.set_status(pid, status)

    expect(button(page, ".outcome-title")).to_have_text(title)
    assert [(e["type"], e["detail"]["status"]) for e in events(page, 1)] == [(event, status)]


def test_countdown_running_out_shows_expired_even_before_the_service_says_so(page, button_double, screenshot):
    pid = button_double.add(ttl=2)
    page.goto(button_double.page_url(pid))
    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in 0:0[12]$"))

    expect(button(page, ".outcome-title")).to_have_text("Payment expired")
    detail = events(page, 1)[0]["detail"]
    assert events(page, 1)[0]["type"] == "payment-expired"
    assert detail == button_double.public_dict(pid)  # as last read: the double never swept it
    assert detail["status"] == "pending"


@pytest.mark.parametrize("skew", [3600, -3600])
def test_countdown_runs_on_the_server_clock(page, button_double, skew):
    button_double.skew = skew  # the double's clock (its Date header and expiresAt) is an hour off the browser's
    pid = button_double.add(ttl=600)
    page.goto(button_double.page_url(pid))

    expect(button(page, ".countdown")).to_have_text(re.compile(r"^Expires in (9:5\d|10:00)$"))
    expect(button(page, ".pay")).to_be_enabled()


@pytest.mark.parametrize("process, key, code, message", [
    ("unknown", "pk_test_shop", "not_found", "No such payment process."),
    ("known", "pk_test_other", "not_found", "No such payment process."),
])
def test_load_error_shows_the_api_message(page, button_double, screenshot, process, key, code, message):
    pid = button_double.add() if process == "known" else str(uuid.uuid4())
    page.goto(button_double.page_url(pid, public_key=key))

    expect(button(page, ".notice")).to_have_text(message)
    expect(button(page, ".pay")).to_be_hidden()
    expect(button(page, ".retry")).to_be_hidden()
    assert events(page, 1) == [{"type": "payment-error", "bubbles": True, "composed": True,
                                "detail": {"code": code, "message": message, "status": 404}}]
    screenshot(button(page), "button-error")


def test_server_error_can_be_retried(page, button_double):
    pid = button_double.add(amount="7.50")
    button_double.force_next("GET", 500, '{"code": "internal_error", "message": "Something went wrong on our side."}')
    page.goto(button_double.page_url(pid))

    expect(button(page, ".notice")).to_have_text("Something went wrong on our side.")
    assert events(page, 1)[0]["detail"] == {
        "code": "internal_error", "message": "Something went wrong on our side.", "status": 500}
    button(page, ".retry").click()
    expect(button(page, ".amount-value")).to_have_text("7.50")
    expect(button(page, ".notice")).to_be_hidden()


def test_error_without_json_body_still_says_something(page, button_double):
    pid = button_double.add()
    button_double.force_next("GET", 502, "<html>Bad gateway</html>")
    page.goto(button_double.page_url(pid))

    expect(button(page, ".notice")).to_have_text("The payment service answered with status 502.")
    assert events(page, 1)[0]["detail"] == {
        "code": "http_502", "message": "The payment service answered with status 502.", "status": 502}


def test_payment_error_shows_message_and_keeps_the_process_payable(page, button_double):
    pid = button_double.add()
    page.goto(button_double.page_url(pid))
    button_double.force_next("POST", 429, '{"code": "rate_limited", "message": "Too many requests: try again in a moment."}')
    button(page, ".pay").click()
    button(page, ".sim-success").click()

    expect(button(page, ".notice")).to_have_text("Too many requests: try again in a moment.")
    expect(button(page, ".pay")).to_be_enabled()
    assert events(page, 1) == [{"type": "payment-error", "bubbles": True, "composed": True, "detail": {
        "code": "rate_limited", "message": "Too many requests: try again in a moment.", "status": 429}}]
    assert button_double.status(pid) == "pending"


def test_paying_a_process_cancelled_meanwhile_shows_the_cancellation(page, button_double):
    pid = button_double.add()
    page.goto(button_double.page_url(pid))
    button(page, ".pay").click()
    button_double.set_status(pid, "cancelled")
    button(page, ".sim-success").click()

    expect(button(page, ".outcome-title")).to_have_text("Payment cancelled")
    got = events(page, 2)
    assert got[0]["detail"] == {"code": "invalid_state", "message": "This payment is cancelled and cannot be paid.",
                                "status": 409}
    assert [e["type"] for e in got] == ["payment-error", "payment-cancelled"]


def test_live_mode_has_no_payment_method_in_this_build(page, button_double, screenshot):
    pid = button_double.add(livemode=True, public_key="pk_live_shop")
    page.goto(button_double.page_url(pid, public_key="pk_live_shop"))

    expect(button(page, ".pay")).to_be_disabled()
    expect(button(page, ".note")).to_have_text("Live payments are not available in this build.")
    expect(button(page, ".badge")).to_be_hidden()
    screenshot(button(page), "button-live")


def test_keyboard_tab_enter_escape(page, button_double):
    pid = button_double.add()
    page.goto(button_double.page_url(pid))
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
    assert button_double.status(pid) == "completed"


def test_readable_at_320_px(page, button_double, screenshot):
    pid = button_double.add(amount="1000000.00")
    page.set_viewport_size({"width": 320, "height": 640})
    page.goto(button_double.page_url(pid, currency="EUR"))
    expect(button(page, ".amount-value")).to_have_text("1000000.00")

    assert page.evaluate("document.documentElement.scrollWidth") <= 320
    box = button(page, ".pay").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 320
    screenshot(page, "button-320")
    button(page, ".pay").click()
    dialog = button(page, "dialog").bounding_box()
    assert dialog["x"] >= 0 and dialog["x"] + dialog["width"] <= 320
    screenshot(page, "button-320-dialog")


def test_changing_process_id_reinitialises(page, button_double):
    first = button_double.add(amount="10.00")
    second = button_double.add(amount="25.50", status="completed")
    page.goto(button_double.page_url(first))
    expect(button(page, ".amount-value")).to_have_text("10.00")

    page.evaluate("id => document.querySelector('payment-button').setAttribute('process-id', id)", second)
    expect(button(page, ".amount-value")).to_have_text("25.50")
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert [(e["type"], e["detail"]["processId"]) for e in events(page, 1)] == [("payment-success", second)]


def test_api_base_attribute_overrides_the_script_origin(page, button_double):
    pid = button_double.add(amount="3.25")
    page.goto(button_double.page_url(pid, script="shop", **{"api-base": button_double.url("api") + "/"}))

    expect(button(page, ".amount-value")).to_have_text("3.25")
    assert [r[2] for r in button_double.api_requests()] == [f"/payment-button/process/{pid}/public"]


def test_polling_pauses_while_the_page_is_hidden_and_stops_when_final(page, button_double):
    pid = button_double.add()
    pause_clock(page)
    page.goto(button_double.page_url(pid))
    expect(button(page, ".pay")).to_be_enabled()
    assert len(button_double.api_requests()) == 1

    set_hidden(page, True)
    page.clock.run_for(120_000)
    assert len(button_double.api_requests()) == 1

    button_double.set_status(pid, "completed")
    set_hidden(page, False)
    expect(button(page, ".outcome-title")).to_have_text("Payment received")
    assert len(button_double.api_requests()) == 2
    page.clock.run_for(120_000)
    assert len(button_double.api_requests()) == 2


def test_animations_respect_reduced_motion(page, button_double):
    pid = button_double.add()
    page.goto(button_double.page_url(pid))
    spinner = "() => getComputedStyle(document.querySelector('payment-button').shadowRoot.querySelector('.spinner')).animationName"
    assert page.evaluate(spinner) == "spin"
    page.emulate_media(reduced_motion="reduce")
    assert page.evaluate(spinner) == "none"


def test_polling_backs_off_from_1_to_15_seconds(page, button_double):
    pid = button_double.add()
    pause_clock(page)
    page.goto(button_double.page_url(pid))
    expect(button(page, ".pay")).to_be_enabled()

    for polls in range(1, 7):  # each poll's answer schedules the next one: wait for it, then run it
        page.wait_for_function("n => window.__timeouts.length >= n", arg=polls)
        assert len(button_double.api_requests()) == polls
        page.clock.run_for(page.evaluate("window.__timeouts.at(-1)"))
    page.wait_for_function("window.__timeouts.length >= 7")
    assert page.evaluate("window.__timeouts") == [1000, 2000, 4000, 8000, 15000, 15000, 15000]
    assert len(button_double.api_requests()) == 7
