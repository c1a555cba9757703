"""The merchant console in real Chromium against the real service over HTTP (``live_server``): log
in, a wrong password and the lock-out (injected clock); the processes list, its filter, metadata
search, pages and CSV export (compared with the Merchant API's list); a process page after a live
payment on the Hardhat node, with its transfer and events, and a resend making a new attempt;
cancel; a viewer's pages; keyboard-only use; a 390-px-wide phone. Screenshots:
tests/artifacts/console-*.png (the ones in docs/ are copies of these)."""
import csv
import io
import json
import re

import pytest
from support.chain_shop import add_network, open_shop
from support.helpers import Api

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None

PASSWORD = "correct horse battery"


def add_user(live_server, email, merchant_id, role="owner"):
    result = live_server.app.test_cli_runner().invoke(
        args=["users", "create", email, "--merchant", merchant_id, "--role", role],
        input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output


def log_in(page, live_server, email, password=PASSWORD):
    page.goto(live_server.url + "/dashboard/")
    expect(page).to_have_url(live_server.url + "/dashboard/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()


def to_processes(page):
    page.get_by_role("navigation").get_by_role("link", name="Processes").click()
    expect(page.get_by_role("heading", name="Processes", exact=True)).to_be_visible()


@pytest.fixture
def shop(live_server, make_merchant, receiver):
    """A test-mode merchant whose webhooks reach `receiver`, its owner and the API as its
    backend."""
    keys = make_merchant(webhook_url=receiver.url("/hooks/preorder"))
    add_user(live_server, "owner@shop.example", keys["merchantId"])
    keys["api"] = live_server.merchant_api(keys["secretKey"])
    return keys


def test_log_in_wrong_password_then_lock_out(page, live_server, shop, clock, screenshot):
    log_in(page, live_server, "owner@shop.example", "not my password")
    expect(page.get_by_role("alert")).to_have_text("Wrong email or password.")
    screenshot(page, "console-login-wrong", full_page=True)
    for _ in range(9):
        clock.advance(20)  # past each slow-down wait
        page.get_by_label("Password").fill("still not it")
        page.get_by_role("button", name="Log in").click()
    clock.advance(20)
    page.get_by_label("Password").fill(PASSWORD)  # the right one: locked all the same
    with page.expect_response(lambda r: r.url.endswith("/dashboard/login")
                              and r.request.method == "POST") as sent:
        page.get_by_role("button", name="Log in").click()
    assert sent.value.status == 429
    expect(page.get_by_role("alert")).to_contain_text(
        "this account is locked for 15 more minute(s)")
    screenshot(page, "console-locked", full_page=True)
    clock.advance(15 * 60)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(live_server.url + "/dashboard/overview")  # where a login lands
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()


def processes(shop, clock, n, start=0):
    ids = []
    for i in range(start, start + n):
        ids.append(shop["api"].preorder(f"{10 + i}.50", {
            "orderRef": f"A-{1000 + i}", "email": f"buyer{i}@example.com"})["processId"])
        clock.advance(37)
    return ids


def listed(page):
    return [re.sub(r"\s", "", t)
            for t in page.locator("table.processes tbody td:first-child a").all_inner_texts()]


def test_list_filter_search_pages_and_csv(page, live_server, shop, clock, screenshot):
    ids = processes(shop, clock, 53)
    shop["api"].cancel(ids[7])
    log_in(page, live_server, "owner@shop.example")
    to_processes(page)
    assert listed(page) == ids[::-1][:50]
    screenshot(page, "console-processes-list", full_page=False)
    # a sandbox shop's filters: no asset or network
    page.set_viewport_size({"width": 1280, "height": 800})
    assert page.evaluate(UNBROKEN) == {"broken": [], "cut": []}
    page.set_viewport_size({"width": 1024, "height": 768})
    page.get_by_role("link", name="Next page").click()
    assert listed(page) == ids[::-1][50:]

    page.get_by_label("Status").select_option("cancelled")
    page.get_by_role("button", name="Filter").click()
    assert listed(page) == [ids[7]]
    page.get_by_label("Status").select_option("")
    page.get_by_role("searchbox").fill("buyer12@example.com")
    page.get_by_role("button", name="Filter").click()
    assert listed(page) == [ids[12]]
    expect(page.locator("table.processes tbody tr")).to_contain_text("orderRef: A-1012")

    page.get_by_role("searchbox").fill("")
    page.get_by_role("button", name="Filter").click()
    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    rows = list(csv.DictReader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
    api = Api(live_server.app.test_client(), shop["secretKey"])
    listed_by_api = api.list("?limit=100").get_json()["data"]
    assert len(rows) == len(listed_by_api) == 53
    assert [(r["processId"], r["status"], r["amount"], r["createdAt"], json.loads(r["metadata"]))
            for r in rows] == [(p["processId"], p["status"], f'{p["amount"]:.2f}', p["createdAt"],
                                p["metadata"])
                               for p in listed_by_api]
    # The export form: chosen metadata keys become columns, for what the filter shows.
    page.get_by_label("Status").select_option("cancelled")
    page.get_by_role("button", name="Filter").click()
    page.get_by_label("Metadata keys as columns").fill("orderRef, email")
    with page.expect_download() as download:
        page.get_by_role("button", name="Export CSV with these columns").click()
    rows = list(csv.DictReader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
    assert [(r["processId"], r["metadata.orderRef"], r["metadata.email"]) for r in rows] == [
        (ids[7], "A-1007", "buyer7@example.com")]


def test_cancel_and_a_viewer_changes_nothing(page, live_server, shop, screenshot):
    pid = shop["api"].preorder("5.00", {"orderRef": "A-1"})["processId"]
    add_user(live_server, "viewer@shop.example", shop["merchantId"], role="viewer")
    log_in(page, live_server, "viewer@shop.example")
    to_processes(page)
    page.get_by_role("link", name=pid).click()
    expect(page.locator("#status")).to_have_text("pending")
    expect(page.get_by_role("button", name="Cancel", exact=True)).to_have_count(0)
    expect(page.get_by_role("link", name="Cancel", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Resend")).to_have_count(0)
    # A forged POST from this viewer's own page (its session, its token) is refused.
    status = page.evaluate("""async (pid) => {
        const token = document.querySelector('input[name=csrf_token]').value;
        const r = await fetch(`/dashboard/processes/${pid}/cancel`, {method: 'POST',
          headers: {'Content-Type': 'application/x-www-form-urlencoded'},
          body: 'csrf_token=' + token});
        return r.status; }""", pid)
    assert status == 403
    assert shop["api"].get(pid)["status"] == "pending"

    page.get_by_role("button", name="Log out").click()
    log_in(page, live_server, "owner@shop.example")
    to_processes(page)
    page.get_by_role("link", name=pid).click()
    page.get_by_role("link", name="Cancel", exact=True).click()  # a confirmation first
    expect(page.get_by_role("heading", name=f"Cancel process {pid}?")).to_be_visible()
    page.get_by_role("link", name="Go back").click()
    expect(page.locator("#status")).to_have_text("pending")
    assert shop["api"].get(pid)["status"] == "pending"
    page.get_by_role("link", name="Cancel", exact=True).click()
    page.get_by_role("button", name="Cancel", exact=True).click()
    expect(page.get_by_role("status")).to_have_text(
        "The process is cancelled; its process.cancelled event is queued.")
    expect(page.locator("#status")).to_have_text("cancelled")
    expect(page.get_by_role("link", name="Cancel", exact=True)).to_have_count(0)
    assert shop["api"].get(pid)["status"] == "cancelled"
    page.reload()  # redirected after the POST: a reload sends nothing again
    expect(page.locator("#status")).to_have_text("cancelled")


def test_another_merchants_process_is_the_404_page(page, live_server, shop, make_merchant):
    other = make_merchant(name="Other shop")
    pid = live_server.merchant_api(other["secretKey"]).preorder()["processId"]
    log_in(page, live_server, "owner@shop.example")
    response = page.goto(f"{live_server.url}/dashboard/processes/{pid}")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()


CONFIRMATIONS = 2


def test_process_page_after_a_live_payment_and_resend(page, live_server, app, runner, chain, clock,
                                                      make_merchant, receiver, worker, screenshot):
    merchant = make_merchant(webhook_url=receiver.url("/hooks/chain"))
    add_user(live_server, "owner@shop.example", merchant["merchantId"])
    shop = open_shop(app, app.test_client(), runner, chain, clock, merchant,
                     confirmations=CONFIRMATIONS)
    pid, address = shop.order(19.99, {"orderRef": "A-1042", "email": "buyer@example.com"})
    tx_hash, block = chain.transfer(address, 19_990_000)
    shop.watch()
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    worker.run_once()
    assert [e[0] for e in shop.events(pid)] == ["payment.pending", "payment.completed"]

    log_in(page, live_server, "owner@shop.example")
    overview = page.locator("#asset-tusd")  # the overview: paid today, its chart, each a link
    expect(overview.locator("tr.paid td").first).to_have_text("19.99 (1)")
    expect(overview.locator("svg rect.bar")).to_have_count(30)
    expect(page.locator("#partly-paid")).to_have_text("0")
    screenshot(page, "console-overview", full_page=True)
    overview.locator("tr.paid td a").first.click()  # the list it counts
    assert listed(page) == [pid]
    expect(page.locator("table.processes tbody tr")).to_contain_text("TUSD on Hardhat")
    to_processes(page)
    page.get_by_role("searchbox").fill("A-1042")
    page.get_by_role("button", name="Filter").click()
    page.get_by_role("link", name=pid).click()
    expect(page.locator("#status")).to_have_text("completed")
    expect(page.locator("#amount-paid")).to_have_text("19.99")
    transfer = page.locator("table.transfers tbody tr")
    expect(transfer).to_have_text(re.compile(rf"{tx_hash[:10]}…{tx_hash[-8:]}\s*Copy\s*{block}\s*19.99\s*{CONFIRMATIONS}"))
    expect(transfer.locator("code")).to_have_attribute("data-value", tx_hash)  # what Copy copies
    expect(page.locator("#payment-asset")).to_have_text("TUSD on Hardhat (chain 31337)")
    events = page.locator("article.event")
    expect(events.locator("h3 code")).to_have_text(["payment.pending", "payment.completed"])
    expect(events.locator("table.attempts tbody tr")).to_have_count(2)
    expect(page.locator(".timeline")).to_contain_text("Delivery attempt of payment.completed")
    expect(page.locator(".timeline")).to_contain_text(
        f"Transfer confirmed 19.99 in block {block}, tx {tx_hash}")
    screenshot(page, "console-process", full_page=True)

    completed = events.filter(has_text="payment.completed")
    completed.get_by_role("button", name="Resend").click()
    expect(page.get_by_role("status")).to_contain_text("is queued for delivery again")
    assert "done=resent" in page.url  # redirected after the POST
    worker.run_once()  # queued, sent by the delivery worker: the page reloads itself meanwhile
    expect(page.locator("article.event").filter(has_text="payment.completed")
           .locator("table.attempts tbody tr")).to_have_count(2, timeout=10_000)
    assert len(receiver.wait_for(3)) == 3


def test_webhooks_page_test_event_and_replay(page, live_server, shop, receiver, worker, screenshot):
    from support.receiver import Reply

    receiver.default = Reply(status=500)
    pid = shop["api"].preorder("5.00")["processId"]
    shop["api"].cancel(pid)
    worker.run_once()
    log_in(page, live_server, "owner@shop.example")
    page.get_by_role("link", name="Webhooks").click()
    expect(page.locator("table.failing tbody tr")).to_contain_text("HTTP 500")
    receiver.default = Reply(status=204)
    page.get_by_role("button", name="Send test event").click()
    expect(page.get_by_role("status")).to_contain_text("Test event queued")
    expect(page.locator("#test-events")).to_contain_text("queued for the delivery worker")
    worker.run_once()  # the page reloads itself (meta refresh, no script) until the outcome shows
    expect(page.locator("#test-events")).to_contain_text("HTTP 204", timeout=10_000)
    events = page.locator("table.events tbody tr")
    expect(events).to_have_count(2)  # every kind: the cancellation's event and the test event
    page.get_by_label("Delivery").select_option("retrying")
    page.get_by_role("button", name="Show").click()
    expect(events).to_have_count(1)
    expect(events).to_contain_text("process.cancelled")
    expect(events).to_contain_text("HTTP 500")
    page.get_by_label("Delivery").select_option("")
    page.get_by_label("Type").select_option("webhook.test")
    page.get_by_role("button", name="Show").click()
    expect(events).to_have_count(1)
    expect(events).to_contain_text("delivered")
    screenshot(page, "console-webhooks", full_page=True)


def test_keyboard_only(page, live_server, shop):
    pid = shop["api"].preorder("7.00", {"orderRef": "K-1"})["processId"]
    page.goto(live_server.url + "/dashboard/")
    expect(page.locator(":focus")).to_have_attribute("id", "email")  # autofocus
    page.keyboard.type("owner@shop.example")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
    tab_to(page, page.get_by_role("navigation").get_by_role("link", name="Processes"))
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Processes", exact=True)).to_be_visible()
    link = page.get_by_role("link", name=pid)
    for _ in range(30):  # Tab along the page until the process's link has the focus
        page.keyboard.press("Tab")
        if link.evaluate("el => el === document.activeElement"):
            break
    else:
        raise AssertionError("the process link is not reachable with Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text("pending")
    tab_to(page, page.get_by_role("link", name="Cancel", exact=True))
    page.keyboard.press("Enter")
    tab_to(page, page.get_by_role("button", name="Cancel", exact=True))  # on the confirmation page
    page.keyboard.press("Enter")
    expect(page.locator("#status")).to_have_text("cancelled")


def tab_to(page, target):
    """Press Tab until `target` has the focus (a keyboard user's way along a page)."""
    for _ in range(40):
        page.keyboard.press("Tab")
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"{target} is not reachable with Tab")


PHONE = 390
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth, over = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 0.5) {
      over.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(box.right)}`);
    }
  }
  return {scrollWidth: document.documentElement.scrollWidth, over: over.slice(0, 8)};
}"""


# At a desktop width: in every table no word or number breaks across lines (a hash or an address,
# shortened or wrapping by design, aside), and a text field's placeholder fits in it.
UNBROKEN = r"""() => {
  const broken = [];
  const lines = (node, start, end) => {
    const range = document.createRange();
    range.setStart(node, start);
    range.setEnd(node, end);
    return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
  };
  for (const cell of document.querySelectorAll("th, td")) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (node.parentElement.closest(".mono, code, .hash")) continue;
      for (const word of node.textContent.matchAll(/\S+/g)) {
        if (lines(node, word.index, word.index + word[0].length) > 1) broken.push(word[0]);
      }
      if (cell.matches("th, .num") && lines(node, 0, node.textContent.length) > 1) {
        broken.push(node.textContent.trim());
      }
    }
  }
  const cut = [];
  const context = document.createElement("canvas").getContext("2d");
  for (const input of document.querySelectorAll("input[placeholder]")) {
    const style = getComputedStyle(input);
    if (input.offsetParent === null) continue;
    context.font = `${style.fontSize} ${style.fontFamily}`;
    const room = input.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    if (context.measureText(input.placeholder).width > room) cut.push(input.placeholder);
  }
  return {broken: broken.slice(0, 8), cut};
}"""


CARD_LABEL = """(cell) => {
  const style = getComputedStyle(cell, "::before");
  const context = document.createElement("canvas").getContext("2d");
  context.font = `${style.fontSize} ${style.fontFamily}`;
  return {box: parseFloat(style.width), text: context.measureText(cell.dataset.label).width,
          gap: parseFloat(style.marginRight)};
}"""


def assert_fits(page, path):
    found = page.evaluate(OVERFLOW)
    assert found == {"scrollWidth": PHONE, "over": []}, f"{path} is wider than a phone: {found}"


def test_every_page_fits_a_phone(page, live_server, app, runner, chain, clock, make_merchant,
                                 tmp_path, screenshot):
    """Each console page at 390 px: nothing wider than the screen, no element past its right edge
    (long hashes shortened with a copy button, tables as cards); every page has data in it."""
    from support.chain_shop import NETWORK, cli

    from app.evm.addresses import keccak256, to_checksum_address

    key_file = tmp_path / "operator.key"
    key_file.write_text(OPERATOR_KEY + "\n")
    key_file.chmod(0o600)
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    cli(runner, "networks", "deploy-factory", NETWORK, "--key-file", str(key_file))
    payout = to_checksum_address("0x" + keccak256(b"phone payout wallet")[-20:].hex())
    merchant = make_merchant()
    cli(runner, "merchants", "set-payout", merchant["merchantId"], payout)
    add_user(live_server, "owner@shop.example", merchant["merchantId"])
    client = app.test_client()
    api = Api(client, merchant["secretKey"])
    clock.now = chain.timestamp()
    orders = []
    for amount, ref in ((19.99, "PHONE-1"), (7.5, "PHONE-2")):
        pid = api.preorder({"amount": amount, "metadata": {
            "orderRef": ref, "email": f"{ref}@example.com",
            "note": "a rather long note " * 4}}).get_json()["processId"]
        confirmed = client.post(f"/payment-button/process/{pid}/confirm",
                                json={"assetId": "tusd", "networkId": NETWORK},
                                headers={"x-public-key": merchant["publicKey"]})
        orders.append((pid, confirmed.get_json()["payment"]["address"]))
    (paid, paid_address), (partly, partly_address) = orders
    chain.transfer(paid_address, 19_990_000)
    chain.transfer(partly_address, 2_500_000)  # a third: partly paid
    chain.mine(CONFIRMATIONS)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    refund = client.post(f"/payment-button/process/{paid}/refunds", headers=api.headers(),
                         json={"amount": 4, "address": chain.accounts[7]}).get_json()
    cli(runner, "collect", NETWORK, "--key-file", str(key_file), "--merchant",
        merchant["merchantId"])
    cli(runner, "merchants", "roll-key", merchant["merchantId"])

    page.set_viewport_size({"width": PHONE, "height": 844})
    page.goto(live_server.url + "/dashboard/login")
    assert_fits(page, "/dashboard/login")
    log_in(page, live_server, "owner@shop.example")
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
    revoke = None
    base = f"/dashboard/processes/{paid}"
    for path in ("/dashboard/overview", "/dashboard/", "/dashboard/?money=partly", base,
                 f"{base}/refund", f"{base}/refunds/{refund['refundId']}",
                 f"{base}/refunds/{refund['refundId']}/cancel", f"/dashboard/processes/{partly}",
                 f"/dashboard/processes/{partly}/cancel", "/dashboard/webhooks", "/dashboard/keys",
                 "/dashboard/keys/roll", "/dashboard/keys/roll-webhook-secret", "revoke",
                 "/dashboard/payouts", "/dashboard/settings", "/dashboard/nope"):
        path = revoke if path == "revoke" else path
        page.goto(live_server.url + path)
        expect(page.locator("h1")).to_be_visible()
        if path == "/dashboard/keys":
            revoke = page.locator("a[href$='/revoke']").first.get_attribute("href")
        assert_fits(page, path)
        shots = {"/dashboard/overview": "overview", "/dashboard/": "processes", base: "process",
                 f"{base}/refunds/{refund['refundId']}": "refund", "/dashboard/payouts": "payouts"}
        if path in shots:
            screenshot(page, f"console-phone-{shots[path]}", full_page=True)
        if path == base:  # a card's label ends before its value starts ("Confirmations32")
            label = page.locator("td[data-label='Confirmations']").first.evaluate(CARD_LABEL)
            assert label["box"] >= label["text"] and label["gap"] >= 4, label
    # At 1280 px: tables size their columns to the content; no word or number breaks;
    # placeholders fit.
    page.set_viewport_size({"width": 1280, "height": 900})
    for path in ("/dashboard/overview", "/dashboard/", "/dashboard/?money=partly", base,
                 "/dashboard/payouts", "/dashboard/keys", "/dashboard/settings",
                 "/dashboard/links"):
        page.goto(live_server.url + path)
        expect(page.locator("h1")).to_be_visible()
        assert page.evaluate(UNBROKEN) == {"broken": [], "cut": []}, path
        if path == "/dashboard/settings":
            screenshot(page, "console-settings", full_page=True)
    page.goto(live_server.url + "/dashboard/")
    # the README's and docs/console.md's
    screenshot(page, "console-processes", full_page=False)
    page.set_viewport_size({"width": PHONE, "height": 844})
    # The copy button copies the whole hash that the page shortens.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(live_server.url + base)
    address = page.locator("#payment-address")
    page.get_by_role("button", name=f"Copy {paid_address}").click()
    expect(page.get_by_role("button", name=f"Copy {paid_address}")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == paid_address == (
        address.get_attribute("data-value"))
    # Without a browser wallet the refund page says how to pay it all the same.
    page.goto(f"{live_server.url}{base}/refunds/{refund['refundId']}")
    expect(page.locator("#refund-amount")).to_have_text("4 TUSD")
    page.get_by_role("button", name="Pay with my wallet").click()
    expect(page.locator("#wallet-result")).to_have_text(
        "No browser wallet in this browser: send it with any wallet to the address above (or scan"
        " the QR code), then give the transaction's hash in the field below.")
    expect(page.get_by_label("Transaction hash")).to_be_visible()


def inject_wallet(page, chain):
    """An EIP-1193 provider (window.ethereum) that forwards every request to the Hardhat node,
    whose dev accounts are unlocked: the merchant's browser wallet, approving everything. Through
    a Playwright binding, as a wallet extension talks to its page: not the page's network, so the
    console's Content-Security-Policy (connect-src 'self') is not loosened for it."""
    sent = []

    def rpc(method, params):
        if method == "eth_requestAccounts":
            method = "eth_accounts"
        result = chain.rpc(method, *params)
        if method == "eth_sendTransaction":  # Hardhat mines it in a block of its own at once
            sent.append(params[0])
        return result

    page.expose_function("__walletRpc", rpc)
    page.add_init_script("""window.ethereum = {
      request: ({method, params}) => window.__walletRpc(method, params || []),
    };""")
    return sent


def paid_live_order(live_server, app, runner, chain, clock, make_merchant, receiver):
    merchant = make_merchant(webhook_url=receiver.url("/hooks/chain"))
    add_user(live_server, "owner@shop.example", merchant["merchantId"])
    shop = open_shop(app, app.test_client(), runner, chain, clock, merchant,
                     confirmations=CONFIRMATIONS)
    pid, address = shop.order(19.99, {"orderRef": "A-2001"})
    chain.transfer(address, 19_990_000)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.process(pid)["status"] == "completed"
    return shop, pid


def test_refund_paid_with_the_browser_wallet_is_shown_completed(page, live_server, app, runner,
                                                                chain, clock, make_merchant,
                                                                receiver, screenshot):
    from support.chain_shop import cli
    from support.qr_decode import qr_texts

    from app.evm.addresses import to_checksum_address

    shop, pid = paid_live_order(live_server, app, runner, chain, clock, make_merchant, receiver)
    # The browser wallet's account is the merchant's payout address: only its own payment settles.
    payout = to_checksum_address(chain.accounts[0])
    cli(runner, "merchants", "set-payout", shop.merchant["merchantId"], payout)
    sent = inject_wallet(page, chain)
    customer = chain.accounts[5]
    log_in(page, live_server, "owner@shop.example")
    page.goto(f"{live_server.url}/dashboard/processes/{pid}")
    page.get_by_role("link", name="Refund", exact=True).click()
    expect(page.locator("main")).to_contain_text("Up to 19.99 TUSD on Hardhat can be refunded")
    # Prefilled: what may still be refunded, to the address that paid (the chain shows it).
    expect(page.get_by_label("Amount (TUSD)")).to_have_value("19.99")
    expect(page.get_by_label("Customer's address")).to_have_value(chain.accounts[0])
    page.get_by_label("Customer's address").fill("0x1234")
    page.get_by_label("Amount (TUSD)").fill("20")
    page.get_by_role("button", name="Refund", exact=True).click()
    expect(page.locator("#amount-error")).to_contain_text("Must be at most 19.99")  # both at once
    expect(page.locator("#address-error")).to_contain_text(
        "Must be 0x followed by 40 hexadecimal digits")
    page.get_by_label("Amount (TUSD)").fill("20")
    page.get_by_label("Customer's address").fill(customer)
    page.get_by_role("button", name="Refund", exact=True).click()
    expect(page.locator("#amount-error")).to_contain_text("Must be at most 19.99")

    clock.now = chain.timestamp() + 10
    created = clock.now
    page.get_by_label("Amount (TUSD)").fill("5.25")
    page.get_by_label("Customer's address").fill(customer.lower())
    page.get_by_label("Reason (optional)").fill("Returned mug")
    page.get_by_role("button", name="Refund", exact=True).click()
    expect(page.locator("#refund-status")).to_have_text("pending")
    (refund,) = shop.client.get(f"/payment-button/process/{pid}/refunds",
                                headers=shop.api.headers()).get_json()["data"]
    assert page.url == f"{live_server.url}/dashboard/processes/{pid}/refunds/{refund['refundId']}"
    assert refund["amount"] == "5.25" and refund["reason"] == "Returned mug"
    qr = page.locator("img.qr")
    expect(qr).to_have_attribute("src", re.compile("^data:image/svg"))
    page.set_viewport_size({"width": 1024, "height": 1100})
    assert qr_texts(qr.screenshot()) == [refund["paymentUri"]]
    screenshot(page, "console-refund", full_page=True)

    chain.next_timestamp(created + 1)  # the wallet's transaction: in a block after createdAt
    page.get_by_role("button", name="Pay with my wallet").click()
    # The wallet's transaction is named for the refund by itself (a browser wallet is rarely the
    # payout address; here it is, which the watcher would also find by itself).
    expect(page.locator("#wallet-result")).to_contain_text("named for this refund")
    (tx,) = sent
    assert tx["to"].lower() == chain.token.lower() and tx["from"] == chain.accounts[0]
    tx_hash = page.locator("#wallet-result").inner_text().split("transaction ")[1].split(",")[0]
    assert shop.client.get(f"/payment-button/process/{pid}/refunds", headers=shop.api.headers(),
                           ).get_json()["data"][0]["txHash"] == tx_hash
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    # The page follows the watcher by itself (it reads itself again every 5 s).
    expect(page.locator("#refund-status")).to_have_text("completed", timeout=15_000)
    # "Paid in transaction 0x…"
    expect(page.locator("#paid-tx")).to_have_attribute("data-value", tx_hash)
    # "Sent from 0x…"
    expect(page.locator("#refund-sender")).to_have_attribute("data-value", payout)
    expect(page.locator("#sender-payout")).to_have_text("sent from your payout address")
    expect(page.locator("#named-by")).to_have_text("owner@shop.example")
    refund = shop.client.get(f"/payment-button/process/{pid}/refunds", headers=shop.api.headers(),
                             ).get_json()["data"][0]
    assert (refund["sender"], refund["namedBy"], refund["clearedTxHash"]) == (
        payout, "owner@shop.example", None)
    page.goto(f"{live_server.url}/dashboard/processes/{pid}")
    expect(page.locator("table.refunds tbody tr")).to_contain_text("completed")
    expect(page.locator("article.event h3 code")).to_contain_text(["refund.created",
                                                                   "refund.completed"])


def test_roll_the_secret_key_in_the_browser(page, live_server, shop, screenshot):
    log_in(page, live_server, "owner@shop.example")
    page.get_by_role("link", name="Keys").click()
    page.get_by_role("link", name="Roll secret key").click()
    expect(page.get_by_role("heading", name="Roll the secret key?")).to_be_visible()
    page.get_by_role("button", name="Roll secret key").click()
    key = page.locator("#new-secret-value").inner_text()
    assert key.startswith("sk_test_") and key != shop["secretKey"]
    expect(page.get_by_role("status")).to_contain_text("The previous keys keep working until")
    screenshot(page, "console-keys", full_page=True)
    assert live_server.merchant_api(key).get(
        shop["api"].preorder()["processId"])["status"] == "pending"
    page.get_by_role("link", name="Keys").click()  # the same page, read again: the key is gone
    expect(page.locator("#new-secret-value")).to_have_count(0)
    assert key not in page.content()
    # The old key leaked: revoked now, after a confirmation; it answers 401 at once.
    page.get_by_role("link", name=f"Revoke {shop['secretKey'][:20]}… now").click()
    page.get_by_role("button", name="Revoke now").click()
    expect(page.get_by_role("status")).to_have_text("The key is revoked: it stopped working now.")
    api = live_server.app.test_client()
    assert api.get("/payment-button/processes",
                   headers={"x-secret-key": shop["secretKey"]}).status_code == 401
    assert api.get("/payment-button/processes", headers={"x-secret-key": key}).status_code == 200
    # the last key: roll first
    expect(page.get_by_role("link", name=re.compile("Revoke"))).to_have_count(0)


# Hardhat dev #18
OPERATOR_KEY = "0xde9be858da4a475276426320d5e9262ecfc3ba460bfac56360bfa6c4c28b4ee0"


def test_collect_with_the_browser_wallet(page, live_server, app, runner, chain, clock,
                                         make_merchant, tmp_path, screenshot):
    from support.chain_shop import NETWORK, cli

    from app.evm.addresses import keccak256, to_checksum_address

    key_file = tmp_path / "operator.key"
    key_file.write_text(OPERATOR_KEY + "\n")
    key_file.chmod(0o600)
    add_network(runner, chain)
    cli(runner, "networks", "deploy-factory", NETWORK, "--key-file", str(key_file))
    payout = to_checksum_address("0x" + keccak256(b"console payout wallet")[-20:].hex())
    merchant = make_merchant()
    cli(runner, "merchants", "set-payout", merchant["merchantId"], payout)
    add_user(live_server, "owner@shop.example", merchant["merchantId"])
    client = app.test_client()
    deposits = []
    for amount in (19.99, 5):
        clock.now = chain.timestamp()
        pid = Api(client, merchant["secretKey"]).preorder(
            {"amount": amount}).get_json()["processId"]
        confirmed = client.post(f"/payment-button/process/{pid}/confirm",
                                content_type="application/json",
                                data=json.dumps({"assetId": "tusd", "networkId": NETWORK}),
                                headers={"x-public-key": merchant["publicKey"]})
        deposits.append(confirmed.get_json()["payment"]["address"])
    chain.transfer(deposits[0], 19_990_000)
    chain.transfer(deposits[1], 5_000_000)

    def token_balance(holder):
        data = "0x70a08231" + holder[2:].lower().rjust(64, "0")
        return int(chain.rpc("eth_call", {"to": chain.token, "data": data}, "latest"), 16)

    sent = inject_wallet(page, chain)
    log_in(page, live_server, "owner@shop.example")
    page.get_by_role("link", name="Payouts", exact=True).click()
    expect(page.locator("#payout-address")).to_have_text(payout)
    network = page.locator(f"#network-{NETWORK}")
    expect(network).to_contain_text("Waiting in 2 deposit addresses:")
    expect(network.locator("ul.waiting li")).to_have_text(["24.99 TUSD"])
    expect(network).to_contain_text(
        f"flask --app app collect {NETWORK} --key-file PATH --merchant {merchant['merchantId']}")
    screenshot(page, "console-payouts", full_page=True)

    expect(network.locator(".balance")).to_contain_text("Your payout address holds: 0 TUSD")
    network.get_by_role("button", name="Collect with my wallet").click()
    expect(network.locator(f"#collect-result-{NETWORK}")).to_contain_text(
        "recorded as a collection")
    (tx,) = sent
    assert tx["from"] == chain.accounts[0]  # the merchant's wallet pays the gas
    assert token_balance(payout) == 24_990_000
    assert token_balance(deposits[0]) == token_balance(deposits[1]) == 0
    page.reload()  # the page reads the network: the collection's receipt is recorded
    expect(page.locator(f"#network-{NETWORK}")).to_contain_text("Nothing waits to be collected.")
    expect(page.locator(f"#network-{NETWORK} .balance")).to_contain_text("24.99 TUSD")
    row = page.locator("table.collections tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("24.99 TUSD")
    expect(row).to_contain_text("your browser wallet")
    expect(row.locator("code")).to_have_attribute("data-value", re.compile("^0x[0-9a-f]{64}$"))
    chain.mine(3)
    # the kept chain reaches it
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    page.reload()
    expect(row.locator(".badge")).to_have_text("confirmed")
    screenshot(page, "console-payouts-collected", full_page=True)
    # A hash the node does not know, or a transaction to another contract, is refused.
    field = page.get_by_label("Collected from another wallet? Its transaction hash")
    field.fill("0x" + "ab" * 32)
    page.get_by_role("button", name="Record collection").click()
    expect(page.get_by_role("alert")).to_contain_text("does not know transaction 0x" + "ab" * 32)
    other = chain.transfer(deposits[0], 1)[0]  # a token transfer: not a call to the factory
    page.get_by_label("Collected from another wallet? Its transaction hash").fill(other)
    page.get_by_role("button", name="Record collection").click()
    expect(page.get_by_role("alert")).to_contain_text("is not a call to the forwarder factory")
    expect(page.locator("table.collections tbody tr")).to_have_count(1)
