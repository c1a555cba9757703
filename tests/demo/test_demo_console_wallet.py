"""The console's own wallet buttons in the demo: with the demo shop's test wallet on (a local node,
as `make demo-onchain` runs it), the demo merchant's "Collect with my wallet" (Payouts) and "Pay
with my wallet" (a refund) send from its payout address, a dev account the node signs for, where the
browser has no wallet; in real Chromium against the real service. Without it, each button says how
to do without one, pointing at what its page shows."""
import re

import pytest
from support.chain_shop import NETWORK, add_network, cli
from support.helpers import Api

try:
    from playwright.sync_api import expect
except ImportError:
    # the page fixture (tests/support/browser.py) skips, or fails in CI, before it is used
    expect = None

# Hardhat dev #18
OPERATOR_KEY = "0xde9be858da4a475276426320d5e9262ecfc3ba460bfac56360bfa6c4c28b4ee0"
CONFIRMATIONS = 2


@pytest.fixture
def app_config():
    return {"DEMO_SHOP": True}


def log_in(page, live_server, output):
    email, password = re.search(r"console login:   (\S+)  password (\S+)", output).groups()
    page.goto(live_server.url + "/dashboard/login")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()


def token_balance(chain, holder):
    data = "0x70a08231" + holder[2:].lower().rjust(64, "0")
    return int(chain.rpc("eth_call", {"to": chain.token, "data": data}, "latest"), 16)


def test_the_demo_test_wallet_collects_and_pays_a_refund_from_the_console(page, live_server, app,
                                                                            runner, chain, clock,
                                                                            tmp_path, screenshot):
    from app.evm.addresses import to_checksum_address

    app.config["DEMO_WALLET_RPC_URL"] = chain.url  # make demo-onchain's FLASK_DEMO_WALLET_RPC_URL
    made = runner.invoke(args=["demo-merchant", "--console-login"])
    assert made.exit_code == 0, made.output
    keys = Api(app.test_client(), re.search(r"secret key:      (\S+)", made.output)[1])
    merchant_id = re.search(r"merchant id:     (\S+)", made.output)[1]
    key_file = tmp_path / "operator.key"
    key_file.write_text(OPERATOR_KEY + "\n")
    key_file.chmod(0o600)
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    cli(runner, "networks", "deploy-factory", NETWORK, "--key-file", str(key_file))
    # make demo-onchain's payout wallet: dev account #1
    payout = to_checksum_address(chain.accounts[1])
    cli(runner, "merchants", "set-payout", merchant_id, payout)
    public_key = re.search(r"public key:      (\S+)", made.output)[1]
    clock.now = chain.timestamp()
    pid = keys.preorder({"amount": 12.5, "metadata": {"orderRef": "D-1"}}).get_json()["processId"]
    confirmed = keys.client.post(f"/payment-button/process/{pid}/confirm",
                                 json={"assetId": "tusd", "networkId": NETWORK},
                                 headers={"x-public-key": public_key})
    deposit = confirmed.get_json()["payment"]["address"]
    chain.transfer(deposit, 12_500_000)
    chain.mine(CONFIRMATIONS)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    before = token_balance(chain, payout)

    log_in(page, live_server, made.output)
    assert page.evaluate("window.ethereum === undefined")  # no wallet in this browser
    page.goto(live_server.url + "/dashboard/payouts")
    network = page.locator(f"#network-{NETWORK}")
    expect(network.locator(f"#demo-wallet-{NETWORK}")).to_have_text(
        "In this demo the demo's test wallet is your browser wallet: your payout address on the"
        " local node, which signs for it.")
    network.get_by_role("button", name="Collect with my wallet").click()
    expect(network.locator(f"#collect-result-{NETWORK}")).to_contain_text(
        "recorded as a collection")
    assert token_balance(chain, payout) == before + 12_500_000
    screenshot(page, "demo-console-collected", full_page=True)

    refund = keys.client.post(f"/payment-button/process/{pid}/refunds", headers=keys.headers(),
                              json={"amount": 2.5, "address": chain.accounts[6]}).get_json()
    page.goto(f"{live_server.url}/dashboard/processes/{pid}/refunds/{refund['refundId']}")
    expect(page.locator("#demo-wallet")).to_contain_text(
        f"your payout address {payout} on the local node")
    page.get_by_role("button", name="Pay with my wallet").click()
    expect(page.locator("#wallet-result")).to_contain_text("named for this refund")
    assert token_balance(chain, payout) == before + 10_000_000
    chain.mine(CONFIRMATIONS)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    page.reload()
    expect(page.locator("#refund-status")).to_have_text("completed")
    expect(page.locator("#sender-payout")).to_have_text("sent from your payout address")


def test_without_a_wallet_each_button_says_what_its_page_offers_instead(page, live_server, app,
                                                                        runner, chain, clock,
                                                                        tmp_path):
    """The demo shop without its local node (make run): no test wallet is offered, and the buttons
    point at what their pages show: the call's address and data on Payouts."""
    from app.evm.addresses import to_checksum_address

    made = runner.invoke(args=["demo-merchant", "--console-login"])
    merchant_id = re.search(r"merchant id:     (\S+)", made.output)[1]
    api = Api(app.test_client(), re.search(r"secret key:      (\S+)", made.output)[1])
    public_key = re.search(r"public key:      (\S+)", made.output)[1]
    key_file = tmp_path / "operator.key"
    key_file.write_text(OPERATOR_KEY + "\n")
    key_file.chmod(0o600)
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    cli(runner, "networks", "deploy-factory", NETWORK, "--key-file", str(key_file))
    cli(runner, "merchants", "set-payout", merchant_id, to_checksum_address(chain.accounts[2]))
    clock.now = chain.timestamp()
    pid = api.preorder({"amount": 3}).get_json()["processId"]
    deposit = api.client.post(f"/payment-button/process/{pid}/confirm",
                              json={"assetId": "tusd", "networkId": NETWORK},
                              headers={"x-public-key": public_key}).get_json()["payment"]["address"]
    chain.transfer(deposit, 3_000_000)
    log_in(page, live_server, made.output)
    page.goto(live_server.url + "/dashboard/payouts")
    network = page.locator(f"#network-{NETWORK}")
    expect(network.locator(f"#demo-wallet-{NETWORK}")).to_have_count(0)
    network.get_by_role("button", name="Collect with my wallet").click()
    expect(network.locator(f"#collect-result-{NETWORK}")).to_have_text(
        "No browser wallet in this browser: send the call below from any wallet (to the forwarder"
        " factory, with its data), or have the operator run collect; then give the transaction's"
        " hash in the field below.")
    factory = network.locator(f"#call-to-{NETWORK}")
    expect(factory).to_have_attribute("data-value", re.compile("^0x[0-9a-fA-F]{40}$"))
    expect(network.locator(f"#call-data-{NETWORK}")).to_have_attribute(
        "data-value",
        network.get_by_role("button", name="Collect with my wallet").get_attribute("data-data"))
    expect(network.get_by_label(
        "Collected from another wallet? Its transaction hash")).to_be_visible()
