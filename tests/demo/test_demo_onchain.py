"""`make demo-onchain`, the one documented command of the local on-chain demo (test mode), run for
real: a Hardhat node with the test token, the operator CLI setup, the chain watcher and the webhook
worker in their loops, the demo shop with its test wallet. A person's session in Chromium: an order,
the coin, the QR code (decoded with zbar), the test wallet's transfer, confirmations arriving by
themselves (a block every 3 s: the watcher, polling every second, sees the transfer before it is
deep enough), the payment received, the verified webhooks, the payout mode's collection arriving in
the payout wallet; then Ctrl-C (SIGINT to the terminal's process group) stops every process the
command started.
"""
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import requests
from support.qr_decode import qr_texts
from support.servers import free_port, wait_for

from app.demo.merchant import DEMO_OPERATOR_KEY, DEMO_PAYOUT_ADDRESS, DEMO_RELAYER_KEY
from app.evm import forwarder

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None

ROOT = Path(__file__).resolve().parent.parent.parent


def _terminal_signals():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as in a terminal, whatever ran these tests


def _group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_make_demo_onchain_takes_a_payment_end_to_end(page, tmp_path, screenshot):
    port, rpc_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "MAKE"))}
    log_path = tmp_path / "make.log"
    with open(log_path, "w") as log:
        make = subprocess.Popen(
            ["make", "--no-print-directory", "demo-onchain", f"PORT={port}",
             f"DEMO_RPC_PORT={rpc_port}", f"DEMO_DIR={tmp_path / 'demo'}", "DEMO_BLOCK_SECONDS=3"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, preexec_fn=_terminal_signals,
        )
    shop = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_for(shop + "/", timeout=180)
        except RuntimeError:
            raise AssertionError(
                f"make demo-onchain did not serve the shop:\n{log_path.read_text()[-4000:]}"
            ) from None
        keys = json.loads((tmp_path / "demo" / "demo-merchant.json").read_text())

        errors = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.set_viewport_size({"width": 1100, "height": 1000})
        page.goto(shop + "/")
        page.get_by_label("Amount").fill("12.34")
        page.get_by_label("Order reference").fill("A-9001")
        page.get_by_role("button", name="Create preorder").click()
        pid = page.locator("payment-button").get_attribute("process-id")
        choice = page.locator("payment-button .choice")
        # one asset, one network
        expect(choice).to_have_text(["TUSDC on Local HardhatTest USD Coinpay 12.34 TUSDC"])
        choice.click()
        expect(page.locator("payment-button .send-amount")).to_have_text("12.34 TUSDC")
        factory = re.search(
            r"Deployed the forwarder factory of network local at (0x[0-9a-fA-F]{40})",
            log_path.read_text()).group(1)
        deposit = forwarder.deposit_address(factory, DEMO_PAYOUT_ADDRESS, forwarder.salt(pid))
        expect(page.locator("payment-button .address")).to_have_text(deposit)
        public = requests.get(f"{shop}/payment-button/process/{pid}/public",
                              headers={"x-public-key": keys["publicKey"]}, timeout=10).json()
        expect(page.locator("payment-button .qr svg")).to_be_visible()  # the service's SVG is in
        assert qr_texts(page.locator("payment-button .qr").screenshot()) == [
            public["payment"]["paymentUri"]]

        page.locator("#test-wallet").get_by_role("button", name="Send 12.34").click()
        expect(page.locator("#wallet-log li").first).to_have_text(
            re.compile(r"Sent 12\.34 in block #\d+"))
        expect(page.locator("payment-button .pay-status")).to_have_text(
            re.compile(r"^Payment seen, waiting for confirmations \([12] of 3\)\.$"))
        expect(page.locator("payment-button .outcome-title")).to_have_text("Payment received",
                                                                           timeout=20_000)
        wallet = page.locator("#test-wallet")
        expect(wallet.locator("#payout-address")).to_have_text(DEMO_PAYOUT_ADDRESS)
        expect(wallet.locator("#deposit-balance")).to_have_text("12.34")
        expect(wallet.locator("#payout-balance")).to_have_text("0")  # dev account #1 holds no TUSDC
        wallet.get_by_role("button", name="Collect to the payout wallet").click()
        expect(page.locator("#wallet-log li").first).to_have_text(
            re.compile(r"Collected 12\.34 to the payout wallet \(tx 0x[0-9a-f]{8}…\)"))
        expect(wallet.locator("#deposit-balance")).to_have_text("0")
        expect(wallet.locator("#payout-balance")).to_have_text("12.34")
        screenshot(page, "demo-onchain-paid", full_page=True)

        page.goto(shop + "/demo/webhooks")
        entries = page.locator("li.delivery")
        expect(entries).to_have_count(2, timeout=20_000)  # the worker's loop delivers them
        assert sorted(entries.locator(".type").all_inner_texts()) == ["payment.completed",
                                                                      "payment.pending"]
        expect(entries.locator(".badge")).to_have_text(["Signature verified"] * 2)

        # A second order paid without gas: the shop's test wallet, announced to the button as a
        # browser wallet, signs the ERC-3009 authorization; the relayer (dev account #3) sends it.
        page.goto(shop + "/")
        page.get_by_label("Amount").fill("5")
        page.get_by_role("button", name="Create preorder").click()
        page.locator("payment-button .choice").click()
        expect(page.locator("payment-button .pay-wallet")).to_have_text("Pay with Test wallet")
        page.locator("payment-button").get_by_role(
            "button", name="Pay with Test wallet without gas").click()
        expect(page.locator("payment-button .wallet-tx")).to_contain_text("Transaction sent: 0x")
        expect(page.locator("payment-button .outcome-title")).to_have_text("Payment received",
                                                                           timeout=20_000)
        screenshot(page, "demo-onchain-gasless", full_page=True)

        # A euro order, paid in dollar tokens at the rate of the demo's EUR / USD feed (1.0842).
        page.goto(shop + "/")
        page.get_by_label("Amount").fill("10")
        page.get_by_label("Currency").select_option("EUR")
        page.get_by_role("button", name="Create preorder").click()
        page.locator("payment-button .choice").click()
        expect(page.locator("payment-button .send-amount")).to_have_text("10.842 TUSDC")
        expect(page.locator("payment-button")).to_contain_text("1 EUR = 1.0842 USD")
        page.locator("#test-wallet").get_by_role("button", name="Send 10.842").click()
        expect(page.locator("payment-button .outcome-title")).to_have_text("Payment received",
                                                                           timeout=20_000)
        screenshot(page, "demo-onchain-euro", full_page=True)
        assert errors == []

        # The console login the command printed opens the demo merchant's console.
        login = re.search(r"console login:   (\S+)  password (\S+)  \(/dashboard/\)",
                          log_path.read_text())
        page.goto(shop + "/dashboard/")
        page.get_by_label("Email").fill(login[1])
        page.get_by_label("Password").fill(login[2])
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("#asset-tusd tr.paid td").first).to_have_text("28.182 (3)")
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGINT)  # Ctrl-C in the terminal
            try:
                make.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(make.pid, signal.SIGKILL)
                make.wait()
                raise AssertionError(
                    f"make demo-onchain ignored Ctrl-C:\n{log_path.read_text()[-4000:]}") from None
    deadline = time.monotonic() + 30
    while _group_alive(make.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _group_alive(make.pid), "a process of make demo-onchain outlived Ctrl-C"
    output = log_path.read_text()
    assert DEMO_OPERATOR_KEY[2:] not in output  # the key files are read, never printed
    assert DEMO_RELAYER_KEY[2:] not in output
    assert f"Payout address of {keys['merchantId']} set to {DEMO_PAYOUT_ADDRESS}." in output
    assert " collect local --key-file " in output
    database = tmp_path / "demo" / "preorder.sqlite3"
    assert f"give every flask command FLASK_DATABASE={database}; make run keeps its own" in output
