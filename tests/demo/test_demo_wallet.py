"""The demo shop's test wallet routes (DEMO_SHOP with DEMO_WALLET_RPC_URL), through the Flask test
client, on the real Hardhat node of tests/support/chain_node.py: what they send is read back through
the real watcher and the Button API. In Chromium with the button:
tests/button/test_button_live.py."""
import json
import uuid

import pytest
from support.helpers import assert_error
from support.servers import free_port

from app.demo.merchant import (
    DEMO_FIRST_ADDRESS,
    DEMO_OPERATOR_KEY,
    DEMO_PAYOUT_ADDRESS,
    DEMO_XPUB,
)


@pytest.fixture
def app_config(chain_node):
    return {"DEMO_SHOP": True, "DEMO_WALLET_RPC_URL": chain_node.url}


@pytest.fixture
def shop(runner, app, chain, clock):
    """The demo merchant with its live wallet, TUSD on the node; an order placed in the shop."""
    clock.now = chain.timestamp()
    for args in (["networks", "add", "hardhat", "--name", "Local Hardhat", "--chain-id", "31337",
                  "--rpc-url", chain.url, "--confirmations", "3"],
                 ["assets", "add", "tusd", "--network", "hardhat", "--symbol", "TUSD",
                  "--name", "Test USD", "--contract", chain.token, "--decimals", "6"],
                 ["demo-merchant"]):
        result = runner.invoke(args=args)
        assert result.exit_code == 0, result.output
    with open(app.config["DEMO_MERCHANT_FILE"]) as f:
        keys = json.load(f)
    assert runner.invoke(
        args=["merchants", "set-xpub", keys["merchantId"], DEMO_XPUB]).exit_code == 0
    return keys


def order(client, amount="19.99"):
    response = client.post("/", data={"amount": amount, "order_ref": "A-1"})
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    process_id = html.split('data-process-id="', 1)[1].split('"', 1)[0]
    assert f'<payment-button process-id="{process_id}"' in html
    return process_id


def confirm(client, keys, process_id):
    response = client.post(f"/payment-button/process/{process_id}/confirm",
                           json={"assetId": "tusd", "networkId": "hardhat"},
                           headers={"x-public-key": keys["publicKey"]})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["payment"]


def public_payment(client, keys, process_id):
    return client.get(f"/payment-button/process/{process_id}/public",
                      headers={"x-public-key": keys["publicKey"]}).get_json()["payment"]


def send(client, process_id, kind):
    return client.post(f"/demo/wallet/{process_id}/send", json={"kind": kind})


def test_the_wallet_pays_what_is_outstanding_half_or_more(client, runner, chain, shop):
    pid = order(client)
    state = client.get(f"/demo/wallet/{pid}")
    assert (state.status_code, state.get_json()) == (200, {"account": chain.accounts[0],
                                                          "head": chain.head(),
                                                          "payment": None})
    assert_error(send(client, pid, "full"), 409, "invalid_state",
                 "Choose a coin and network in the payment button first.")

    payment = confirm(client, shop, pid)
    assert payment["address"] == DEMO_FIRST_ADDRESS
    state = client.get(f"/demo/wallet/{pid}").get_json()
    assert state["payment"] == {"token": payment["tokenContract"], "symbol": "TUSD",
                                "address": DEMO_FIRST_ADDRESS, "balance": "1000000000",
                                "full": "19.99", "refunds": []}

    half = send(client, pid, "partial")
    assert half.status_code == 200
    assert half.get_json() | {"txHash": "", "blockNumber": 0} == {
        "txHash": "", "blockNumber": 0, "amount": "9.995", "to": DEMO_FIRST_ADDRESS}
    assert half.get_json()["blockNumber"] == chain.head()
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    assert public_payment(client, shop, pid)["amountPending"] == "9.995"
    # what is left
    assert client.get(f"/demo/wallet/{pid}").get_json()["payment"]["full"] == "9.995"

    over = send(client, pid, "over").get_json()
    assert over["amount"] == "10.995"  # the rest and one token more
    chain.mine(2)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    paid = public_payment(client, shop, pid)
    assert (paid["amountPaid"], paid["amountPending"]) == ("20.99", "0")
    assert client.get(f"/demo/wallet/{pid}").get_json()["payment"]["balance"] == "999999979.01"
    assert client.get(f"/demo/wallet/{pid}").get_json()["payment"]["full"] == "0"  # paid in full
    assert_error(send(client, pid, "full"), 409, "invalid_state",
                 'The payment is paid in full: "Send 1 more" pays over it.')


def test_the_wallet_pays_a_refund_and_names_its_transaction(client, runner, chain, shop):
    pid = order(client, "10")
    payment = confirm(client, shop, pid)
    assert send(client, pid, "full").status_code == 200
    chain.mine(2)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    refund = client.post(f"/payment-button/process/{pid}/refunds",
                         headers={"x-secret-key": shop["secretKey"]},
                         json={"amount": 4, "address": chain.accounts[5]}).get_json()
    owed = client.get(f"/demo/wallet/{pid}").get_json()["payment"]["refunds"]
    assert owed == [{"id": refund["refundId"], "amount": "4", "to": refund["address"],
                     "named": False}]
    paid = client.post(f"/demo/wallet/{pid}/refunds/{refund['refundId']}")
    # xpub mode: no payout wallet
    assert paid.status_code == 200 and paid.get_json()["from"] == "deposit address"
    data = "0x70a08231" + chain.accounts[5][2:].lower().rjust(64, "0")  # balanceOf
    assert int(chain.rpc("eth_call", {"to": payment["tokenContract"], "data": data}, "latest"),
               16) == 4_000_000
    chain.mine(2)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    shown = client.get(f"/payment-button/process/{pid}/refunds",
                       headers={"x-secret-key": shop["secretKey"]})
    assert shown.get_json()["data"][0]["status"] == "completed"
    assert client.get(f"/demo/wallet/{pid}").get_json()["payment"]["refunds"] == []
    assert_error(client.post(f"/demo/wallet/{pid}/refunds/{refund['refundId']}"), 404, "not_found")


def test_mine(client, chain, shop):
    head = chain.head()
    response = client.post("/demo/wallet/mine", json={"blocks": 3})
    assert (response.status_code, response.get_json()) == (200, {"head": head + 3})
    assert client.post("/demo/wallet/mine", json={}).get_json() == {"head": head + 4}


@pytest.mark.parametrize("body", [{"blocks": 0}, {"blocks": 101}, {"blocks": "2"}, {"blocks": 1.5},
                                  {"blocks": True}, []])
def test_mine_refuses_what_is_not_1_to_100_blocks(client, shop, body):
    assert_error(client.post("/demo/wallet/mine", json=body), 400, "validation_error")


def test_bad_requests_get_the_error_envelope(client, shop):
    pid = order(client)
    confirm(client, shop, pid)
    body = assert_error(send(client, pid, "all"), 400, "validation_error")
    assert body["errors"] == {"kind": ["Must be one of: full, partial, over."]}
    assert_error(client.post(f"/demo/wallet/{pid}/send", data="kind=full"), 415,
                 "unsupported_media_type")
    assert_error(client.get(f"/demo/wallet/{uuid.uuid4()}"), 404, "not_found")
    assert_error(send(client, str(uuid.uuid4()), "full"), 404, "not_found")


@pytest.mark.parametrize("app_config", [{"DEMO_SHOP": True, "DEMO_WALLET_RPC_URL": f"http://127.0.0.1:{free_port()}/"}])
def test_a_node_that_does_not_answer_is_503(client, runner):
    assert runner.invoke(args=["demo-merchant"]).exit_code == 0
    pid = order(client)
    body = assert_error(client.get(f"/demo/wallet/{pid}"), 503, "node_unavailable")
    assert body["message"].startswith("The local node did not answer as expected: eth_accounts: http://127.0.0.1:")
    assert_error(client.post("/demo/wallet/mine", json={"blocks": 1}), 503, "node_unavailable")


@pytest.mark.parametrize("app_config", [{"DEMO_SHOP": True}])
def test_without_a_node_there_is_no_test_wallet(client, runner):
    assert runner.invoke(args=["demo-merchant"]).exit_code == 0
    response = client.post("/", data={"amount": "5", "order_ref": "A-2"})
    assert response.status_code == 200
    assert "Test wallet" not in response.get_data(as_text=True)
    body = assert_error(client.post("/demo/wallet/mine", json={"blocks": 1}), 404, "not_found")
    assert body["message"] == (
        "The test wallet is off: set DEMO_WALLET_RPC_URL (make demo-onchain does).")


@pytest.fixture
def payout_shop(runner, app, chain, clock, tmp_path):
    """The demo merchant in the payout mode, as `make demo-onchain` sets it up: the factory deployed
    with the published dev key, dev account #1 as the payout wallet."""
    clock.now = chain.timestamp()
    key_file = tmp_path / "operator.key"
    key_file.write_text(DEMO_OPERATOR_KEY + "\n")
    app.config["DEMO_COLLECT_KEY_FILE"] = str(key_file)
    for args in (["networks", "add", "hardhat", "--name", "Local Hardhat", "--chain-id", "31337",
                  "--rpc-url", chain.url, "--confirmations", "3"],
                 ["assets", "add", "tusd", "--network", "hardhat", "--symbol", "TUSD",
                  "--name", "Test USD", "--contract", chain.token, "--decimals", "6"],
                 ["networks", "deploy-factory", "hardhat", "--key-file", str(key_file)],
                 ["demo-merchant"]):
        result = runner.invoke(args=args)
        assert result.exit_code == 0, result.output
    with open(app.config["DEMO_MERCHANT_FILE"]) as f:
        keys = json.load(f)
    assert runner.invoke(args=["merchants", "set-payout", keys["merchantId"],
                               DEMO_PAYOUT_ADDRESS]).exit_code == 0
    return keys


def test_collect_moves_the_payment_to_the_payout_wallet(client, payout_shop):
    pid = order(client, "7.5")
    assert_error(client.post(f"/demo/wallet/{pid}/collect"), 409, "invalid_state",
                 "This order's payment is not in the payout mode: nothing to collect.")
    payment = confirm(client, payout_shop, pid)
    assert payment["address"] != DEMO_FIRST_ADDRESS
    assert send(client, pid, "full").status_code == 200
    state = client.get(f"/demo/wallet/{pid}").get_json()
    assert state["payout"] == {"address": DEMO_PAYOUT_ADDRESS, "balance": "0",
                               "atDepositAddress": "7.5"}
    collected = client.post(f"/demo/wallet/{pid}/collect")
    assert collected.status_code == 200, collected.get_data(as_text=True)
    body = collected.get_json()
    assert (body["amount"], body["to"], len(body["transactions"])) == (
        "7.5", DEMO_PAYOUT_ADDRESS, 1)
    state = client.get(f"/demo/wallet/{pid}").get_json()
    assert state["payout"] == {"address": DEMO_PAYOUT_ADDRESS, "balance": "7.5",
                               "atDepositAddress": "0"}
    again = client.post(f"/demo/wallet/{pid}/collect").get_json()
    assert again == {"amount": "0", "transactions": [], "to": DEMO_PAYOUT_ADDRESS}


def test_collect_without_a_key_file_is_404(client, shop):
    pid = order(client)
    body = assert_error(client.post(f"/demo/wallet/{pid}/collect"), 404, "not_found")
    assert body["message"] == (
        "Collecting is off: set DEMO_COLLECT_KEY_FILE (make demo-onchain does).")
