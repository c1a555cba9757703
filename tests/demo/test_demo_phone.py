"""The demo shop on a 390-px phone in real Chromium, with its test wallet on a real Hardhat node and
an ERC-3009 token (so the button offers "Pay without gas" beside the wallet): a new form places an
order as it is (its fields hold values, not placeholders that look like them); the wallet's button
keeps its label on one line; the test wallet's balance reads as an amount of the token, grouped."""
import re

import pytest

from app.demo.merchant import DEMO_XPUB
from app.evm.addresses import to_checksum_address

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None

RELAYER_KEY = "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"  # Hardhat dev #3
PHONE = 390
LINES = """(button) => {
  const text = [...button.childNodes].find((node) => node.nodeType === Node.TEXT_NODE);
  const range = document.createRange();
  range.selectNodeContents(text);
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}"""


@pytest.fixture
def app_config(chain_node, tmp_path):
    key = tmp_path / "relayer.key"
    key.write_text(RELAYER_KEY)
    return {"DEMO_SHOP": True, "DEMO_WALLET_RPC_URL": chain_node.url, "RELAYER_KEY_FILE": str(key)}


def test_the_demo_shop_on_a_phone(page, live_server, runner, chain, clock, screenshot):
    clock.now = chain.timestamp()
    usdc = to_checksum_address(chain.deploy_token(contract="TestUSDC"))  # dev account #0 holds it
    for args in (["networks", "add", "hardhat", "--name", "Local Hardhat", "--chain-id", "31337",
                  "--rpc-url", chain.url, "--confirmations", "2"],
                 ["assets", "add", "usdc", "--network", "hardhat", "--symbol", "TUSDC",
                  "--name", "Test USD Coin", "--contract", usdc, "--decimals", "6", "--eip3009"],
                 ["demo-merchant"]):
        result = runner.invoke(args=args)
        assert result.exit_code == 0, result.output
    merchant_id = result.output.split("merchant id:", 1)[1].split()[0]
    assert runner.invoke(args=["merchants", "set-xpub", merchant_id, DEMO_XPUB]).exit_code == 0

    page.set_viewport_size({"width": PHONE, "height": 844})
    page.goto(live_server.url + "/")
    expect(page.get_by_label("Amount")).to_have_value("19.99")
    expect(page.get_by_label("Order reference")).to_have_value(f"A-{int(clock.now) % 100_000:05d}")
    assert page.get_by_label("Amount").get_attribute("placeholder") is None
    page.get_by_role("button", name="Create preorder").click()  # sent as it is: an order
    expect(page.locator("payment-button")).to_have_count(1)
    page.locator("payment-button .choice").click()
    pay = page.locator("payment-button .pay-wallet")
    expect(pay).to_have_text("Pay with Test wallet")
    expect(page.locator("payment-button").get_by_role(
        "button", name="Pay with Test wallet without gas")).to_be_visible()
    assert pay.evaluate(LINES) == 1
    # grouped
    expect(page.locator("#wallet-balance")).to_have_text(
        re.compile(r"^[1-9]\d{0,2}(,\d{3})+ TUSDC$"))
    assert page.evaluate("document.documentElement.scrollWidth") == PHONE
    screenshot(page, "demo-shop-phone", full_page=True)
