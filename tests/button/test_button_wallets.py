"""Paying from a browser wallet, in Chromium, on the real service and the real Hardhat node: two
EIP-6963 wallets injected into the merchant's checkout page (tests/support/wallets.py), one starting
on another chain, one that declines; the real chain watcher; the relayer (RELAYER_KEY_FILE,
Hardhat's dev account #3) for the payer without gas. What each wallet was asked, in which order and
on which chain, is read from the wallets' own records."""
import json
import re

import pytest
from support import eip3009 as signing
from support import wallets
from support.chain_shop import XPUB

from app.evm.addresses import to_checksum_address

try:
    from playwright.sync_api import expect
except ImportError:  # the page fixture skips, or fails in CI, before it is used
    expect = None

RELAYER_KEY = "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"
RELAYER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
PAYER = signing.payer("browser gasless payer")
UNIT = 10**6


@pytest.fixture
def app_config(tmp_path):
    key = tmp_path / "relayer.key"
    key.write_text(RELAYER_KEY)
    return {"RELAYER_KEY_FILE": str(key)}


class Checkout:
    """A test-mode merchant taking TUSD (a plain ERC-20) and TUSDC (ERC-3009) on the test chain."""

    def __init__(self, live_server, merchant_site, chain, clock, page):
        self.live, self.site, self.chain, self.page = live_server, merchant_site, chain, page
        clock.now = chain.timestamp()
        self.usdc = to_checksum_address(chain.deploy_token(contract="TestUSDC"))
        cli = live_server.cli
        cli("networks", "add", "hardhat", "--name", "Hardhat", "--chain-id", "31337",
            "--rpc-url", chain.url, "--confirmations", "2")
        cli("assets", "add", "tusd", "--network", "hardhat", "--symbol", "TUSD", "--name",
            "Test USD", "--contract", chain.token, "--decimals", "6")
        cli("assets", "add", "usdc", "--network", "hardhat", "--symbol", "TUSDC", "--name",
            "USD Coin", "--contract", self.usdc, "--decimals", "6", "--eip3009")
        self.keys = json.loads(cli("merchants", "create", "--name", "Wallet shop", "--json"))
        cli("merchants", "set-xpub", self.keys["merchantId"], XPUB)

    def open(self, amount, choice):
        """A preorder, its checkout page, and the customer's choice: the deposit address."""
        pid = self.live.merchant_api(self.keys["secretKey"]).preorder(amount)["processId"]
        self.page.goto(self.site.checkout_url(self.live.url, pid, self.keys["publicKey"]))
        self.btn(".choice").filter(has_text=re.compile(f"^{choice} on")).click()
        expect(self.btn(".instructions")).to_be_visible()
        return pid, self.public(pid)["payment"]["address"]

    def btn(self, css):
        return self.page.locator(f"payment-button {css}")

    def public(self, pid):
        return self.live.public(pid, self.keys["publicKey"])

    def watch(self):
        self.live.cli("watch-payments", "--once")

    def nonce(self, address):
        return int(self.chain.rpc("eth_getTransactionCount", address, "pending"), 16)

    def gas_coin(self, address):
        return int(self.chain.rpc("eth_getBalance", address, "latest"), 16)

    def balance(self, token, address):
        data = "0x70a08231" + address[2:].lower().rjust(64, "0")
        return int(self.chain.rpc("eth_call", {"to": token, "data": data}, "latest"), 16)


@pytest.fixture
def checkout(live_server, merchant_site, chain, clock, page):
    return Checkout(live_server, merchant_site, chain, clock, page)


def test_wallets_listed_one_declines_then_the_other_switches_chain_and_pays_exactly_the_rest(
        page, checkout, chain):
    payer = chain.accounts[0]  # holds the tokens; the node keeps it unlocked
    switching = wallets.TestWallet(chain, "test-wallet", "Test Wallet", wallets.ICON,
                                   address=payer, chain_id=1)
    declining = wallets.TestWallet(chain, "declining", "Refusing Wallet",
                                   "https://wallet.example/icon.png", address=chain.accounts[1],
                                   refuses=True)
    wallets.install(page, [switching, declining])
    pid, address = checkout.open("10", "TUSD")

    pay_buttons = checkout.btn(".wallet-row .pay-wallet")
    expect(pay_buttons).to_have_text(["Pay with Test Wallet", "Pay with Refusing Wallet"])
    expect(pay_buttons.nth(0).locator("img")).to_have_attribute("src", wallets.ICON)
    expect(pay_buttons.nth(1).locator("img")).to_have_count(0)  # not a data:image/ URI: no icon
    expect(checkout.btn(".gasless")).to_have_count(0)  # TUSD has no ERC-3009

    refusing_nonce = checkout.nonce(chain.accounts[1])
    pay_buttons.nth(1).click()
    expect(checkout.btn(".notice")).to_have_text(
        "You declined the request in your wallet. Nothing was sent.")
    assert declining.methods() == ["eth_requestAccounts", "eth_chainId", "eth_chainId",
                                   "eth_sendTransaction"]
    assert checkout.nonce(chain.accounts[1]) == refusing_nonce
    expect(checkout.btn(".address")).to_have_text(address)  # the manual way stays
    expect(checkout.btn(".qr svg")).to_be_visible()

    chain.transfer(address, 4 * UNIT)  # a first payment by hand, short of the amount
    chain.mine(1)
    checkout.watch()
    expect(checkout.btn(".pay-status")).to_have_text(
        "Received 4 of 10 TUSD: send the remaining 6 TUSD.")

    pay_buttons.nth(0).click()
    expect(checkout.btn(".wallet-tx")).to_contain_text("Transaction sent: 0x")
    methods = switching.methods()
    assert methods == ["eth_requestAccounts", "eth_chainId", "wallet_switchEthereumChain",
                       "eth_chainId", "eth_sendTransaction"]
    assert [c for _, _, c in switching.calls] == [1, 1, 1, 31337, 31337]  # sent on 31337 only
    sent = switching.calls[-1][1][0]
    assert sent["to"].lower() == chain.token.lower()
    assert sent["data"] == ("0xa9059cbb" + address[2:].lower().rjust(64, "0")
                            + format(6 * UNIT, "064x"))  # exactly the rest
    tx_hash = checkout.btn(".wallet-tx").inner_text().split()[2].rstrip(".")
    chain.mine(1)
    checkout.watch()
    expect(checkout.btn(".outcome-title")).to_have_text("Payment received")
    paid = checkout.public(pid)
    assert (paid["status"], paid["payment"]["amountPaid"], paid["payment"]["amountDue"]) == (
        "completed", "10", "10")
    assert tx_hash in [t["txHash"] for t in paid["payment"]["transfers"]]


def test_a_payer_without_gas_pays_through_the_relayer_by_keyboard(page, checkout, chain,
                                                                  screenshot):
    chain.transfer(PAYER.address, 50 * UNIT, token=checkout.usdc)
    wallet = wallets.TestWallet(chain, "test-wallet", "Test Wallet", wallets.ICON,
                                address=PAYER.address, key=PAYER.key)
    wallets.install(page, [wallet])
    pid, address = checkout.open("12.5", "TUSDC")
    assert checkout.gas_coin(PAYER.address) == 0
    gasless = checkout.btn(".gasless")
    expect(gasless).to_have_text("Pay without gas")
    expect(gasless).to_have_attribute("aria-label", "Pay with Test Wallet without gas")
    screenshot(page, "wallet-buttons", full_page=True)
    gasless.focus()
    page.keyboard.press("Enter")
    expect(checkout.btn(".wallet-tx")).to_contain_text("Transaction sent: 0x")
    screenshot(page, "wallet-gasless-sent", full_page=True)
    assert wallet.methods() == ["eth_requestAccounts", "eth_chainId", "eth_chainId",
                                "eth_signTypedData_v4"]
    typed = json.loads(wallet.calls[-1][1][1])
    assert typed["domain"] == {"name": "Test USD Coin", "version": "2", "chainId": 31337,
                               "verifyingContract": checkout.usdc}
    assert (typed["message"]["to"], typed["message"]["value"]) == (address, "12500000")
    chain.mine(1)
    checkout.watch()
    expect(checkout.btn(".outcome-title")).to_have_text("Payment received")
    assert checkout.public(pid)["payment"]["amountPaid"] == "12.5"
    assert checkout.gas_coin(PAYER.address) == 0
    assert checkout.balance(checkout.usdc, RELAYER) == 0


def test_a_wallet_that_does_not_know_the_chain_and_the_window_ethereum_fallback(page, checkout,
                                                                                 chain, browser):
    stranger = wallets.TestWallet(chain, "test-wallet", "Test Wallet", wallets.ICON,
                                  address=chain.accounts[0], chain_id=1)
    stranger.known = {1}
    wallets.install(page, [stranger])
    nonce = checkout.nonce(chain.accounts[0])
    pid, _ = checkout.open("3", "TUSD")
    checkout.btn(".pay-wallet").click()
    expect(checkout.btn(".notice")).to_have_text(
        "Your wallet does not know Hardhat (chain id 31337). Add that network to your wallet, then"
        " try again, or send with the address and QR code. Nothing was sent.")
    assert "eth_sendTransaction" not in stranger.methods()
    assert checkout.nonce(chain.accounts[0]) == nonce

    # No wallet announces itself: a bare window.ethereum is offered as "browser wallet".
    other = browser.new_page()
    try:
        other.add_init_script("window.ethereum = { request: async () => { throw Object.assign("
                              "new Error('User rejected the request.'), { code: 4001 }); } };")
        other.goto(checkout.site.checkout_url(checkout.live.url, pid, checkout.keys["publicKey"]))
        fallback = other.locator("payment-button .pay-wallet")
        expect(fallback).to_have_text("Pay with browser wallet")
        fallback.click()
        expect(other.locator("payment-button .notice")).to_have_text(
            "You declined the request in your wallet. Nothing was sent.")
    finally:
        other.close()
