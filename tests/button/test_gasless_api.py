"""Paying without gas (POST /payment-button/process/<processId>/authorization) on a real node: the test
ERC-3009 token (tests/chain/token/TestUSDC.sol) added with `assets add --eip3009`, a payer holding none
of the gas coin, the relayer a funded dev account whose key is in RELAYER_KEY_FILE. Every refusal is
checked to broadcast nothing: the relayer's nonce (pending transactions included) is unchanged."""
import json

import pytest

from app.chain.addresses import to_checksum_address
from app.chain.eip3009 import Domain
from support import eip3009 as signing
from support.chain_shop import XPUB, cli
from support.helpers import Api

# Hardhat's published dev account #3 (the demo's relayer too): gas coin, no token.
RELAYER_KEY = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"
RELAYER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
PAYER = signing.payer("gasless payer")
CONFIRMATIONS = 2


@pytest.fixture
def relayer_key(tmp_path):
    path = tmp_path / "relayer.key"
    path.write_text(RELAYER_KEY[2:] + "\n")
    return str(path)


@pytest.fixture
def app_config(relayer_key):
    return {"RELAYER_KEY_FILE": relayer_key}


class Gasless:
    """A merchant taking TestUSDC (ERC-3009) and TUSD (a plain ERC-20) on the test chain."""

    def __init__(self, app, client, runner, chain, clock, merchant):
        self.app, self.client, self.runner, self.chain, self.clock = app, client, runner, chain, clock
        self.merchant, self.api = merchant, Api(client, merchant["secretKey"])
        clock.now = chain.timestamp()
        self.usdc = to_checksum_address(chain.deploy_token(contract="TestUSDC"))
        chain.transfer(PAYER.address, 100_000_000, token=self.usdc)
        cli(runner, "networks", "add", "hardhat", "--name", "Hardhat", "--chain-id", "31337",
            "--rpc-url", chain.url, "--confirmations", str(CONFIRMATIONS))
        added = cli(runner, "assets", "add", "usdc", "--network", "hardhat", "--symbol", "TUSDC",
                    "--name", "USD Coin", "--contract", self.usdc, "--decimals", "6", "--eip3009")
        assert "Payable without gas" in added.output
        cli(runner, "assets", "add", "tusd", "--network", "hardhat", "--symbol", "TUSD",
            "--name", "Test USD", "--contract", chain.token, "--decimals", "6")
        cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
        self.domain = Domain("Test USD Coin", "2", 31337, self.usdc)

    def headers(self):
        return {"x-public-key": self.merchant["publicKey"], "Origin": "https://shop.example"}

    def order(self, amount, asset="usdc"):
        process_id = self.api.preorder({"amount": amount}).get_json()["processId"]
        confirmed = self.client.post(f"/payment-button/process/{process_id}/confirm",
                                     json={"assetId": asset, "networkId": "hardhat"},
                                     headers=self.headers())
        assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
        return process_id, confirmed.get_json()

    def authorization(self, process, value=None, signer=PAYER, **fields):
        expires = int(self.clock.now) + 1800
        args = dict(to=process["payment"]["address"], value=value, valid_before=expires)
        args.update(fields)
        return signing.sign(signer, self.domain, **args)

    def post(self, process_id, body):
        return self.client.post(f"/payment-button/process/{process_id}/authorization",
                                data=json.dumps(body), content_type="application/json",
                                headers=self.headers())

    def relayer_nonce(self):
        return int(self.chain.rpc("eth_getTransactionCount", RELAYER, "pending"), 16)

    def gas_coin(self, address):
        return int(self.chain.rpc("eth_getBalance", address, "latest"), 16)

    def token_balance(self, address):
        data = "0x70a08231" + address[2:].lower().rjust(64, "0")
        return int(self.chain.rpc("eth_call", {"to": self.usdc, "data": data}, "latest"), 16)

    def assets(self):
        return self.client.get("/payment-button/assets", headers=self.headers()).get_json()["data"]

    def gasless(self):
        """Whether the listing offers USDC without gas."""
        return {a["id"]: a for a in self.assets()}["usdc"]["networks"][0]["gasless"]

    def refused(self, process_id, body, status, code, field=None):
        """The answer to `body` is `status` `code` (naming `field`), and nothing was broadcast."""
        nonce = self.relayer_nonce()
        answer = self.post(process_id, body)
        assert (answer.status_code, answer.get_json()["code"]) == (status, code), answer.get_json()
        if field is not None:
            assert list(answer.get_json()["errors"]) == [field]
        assert answer.headers["Access-Control-Allow-Origin"] == "*"
        assert self.relayer_nonce() == nonce
        return answer.get_json()


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    return Gasless(app, client, runner, chain, clock, make_merchant())


def watch(shop):
    result = shop.runner.invoke(args=["watch-payments", "--once"])
    assert result.exit_code == 0, result.output


def test_a_payer_without_gas_pays_exactly_and_the_relayer_pays_the_gas(shop, chain):
    listed = {a["id"]: a["networks"][0] for a in shop.assets()}
    assert listed["usdc"]["gasless"] is True
    assert listed["usdc"]["eip712Domain"] == {"name": "Test USD Coin", "version": "2",
                                              "chainId": 31337, "verifyingContract": shop.usdc}
    assert set(listed["tusd"]) == {"id", "name", "chainId", "confirmations", "finality"}  # unchanged shape
    process_id, process = shop.order(12.34)
    assert shop.gas_coin(PAYER.address) == 0
    authorization = shop.authorization(process, value=12_340_000)

    answer = shop.post(process_id, signing.body(authorization))
    assert answer.status_code == 202, answer.get_json()
    assert answer.headers["Access-Control-Allow-Origin"] == "*"
    tx_hash = answer.get_json()["txHash"]
    assert answer.get_json() == {"txHash": tx_hash}
    receipt = chain.rpc("eth_getTransactionReceipt", tx_hash)
    assert receipt["status"] == "0x1" and receipt["from"].lower() == RELAYER.lower()
    assert receipt["to"].lower() == shop.usdc.lower()

    chain.mine(CONFIRMATIONS)
    watch(shop)
    paid = shop.api.get(process_id).get_json()
    assert paid["status"] == "completed"
    assert paid["payment"]["amountPaid"] == "12.34"
    assert [t["txHash"] for t in paid["payment"]["transfers"]] == [tx_hash]
    assert shop.gas_coin(PAYER.address) == 0
    assert shop.token_balance(RELAYER) == 0
    # Once paid, nothing is left to authorize.
    again = shop.authorization(process, value=12_340_000)
    shop.refused(process_id, signing.body(again), 409, "invalid_state")


def test_every_wrong_field_is_refused_before_anything_is_broadcast(shop, chain):
    process_id, process = shop.order(5)
    now = int(shop.clock.now)
    good = dict(value=5_000_000)
    stranger = signing.payer("a stranger")
    cases = [
        ("to", shop.authorization(process, **good, to=chain.accounts[4])),
        ("value", shop.authorization(process, value=4_999_999)),
        ("value", shop.authorization(process, value=5_000_001)),
        ("validBefore", shop.authorization(process, **good, valid_before=now + 59)),
        ("validBefore", shop.authorization(process, **good, valid_before=now + 1800 + 601)),
        ("validAfter", shop.authorization(process, **good, valid_after=now + 10)),
        ("signature", shop.authorization(process, **good, signer=stranger,
                                         tamper={"from_address": PAYER.address})),
        ("signature", shop.authorization(process, **good, tamper={"nonce": "0x" + "11" * 32})),
        ("from", shop.authorization(process, **good, signer=stranger)),  # holds no token
    ]
    for field, authorization in cases:
        shop.refused(process_id, signing.body(authorization), 400, "validation_error", field)
    other_chain = signing.sign(PAYER, Domain("Test USD Coin", "2", 1, shop.usdc),
                               to=process["payment"]["address"], value=5_000_000,
                               valid_before=now + 1800)
    shop.refused(process_id, signing.body(other_chain), 400, "validation_error", "signature")
    # A nonce already used on chain (the payer spent it elsewhere).
    elsewhere = signing.sign(PAYER, shop.domain, to=chain.accounts[4], value=1,
                             valid_before=now + 600)
    from app.chain.eip3009 import calldata
    chain.send(chain.accounts[1], shop.usdc, "0x" + calldata(elsewhere).hex())
    reused = shop.authorization(process, **good, nonce=elsewhere.nonce)
    shop.refused(process_id, signing.body(reused), 400, "validation_error", "nonce")
    # Malformed bodies.
    body = signing.body(shop.authorization(process, **good))
    for name, value in (("validBefore", "1700000000"), ("validBefore", 1.5), ("value", 5000000),
                        ("from", PAYER.address.lower()[:-1]), ("nonce", "0x12"),
                        ("signature", "0x" + "ab" * 64)):
        shop.refused(process_id, dict(body, **{name: value}), 400, "validation_error", name)
    shop.refused(process_id, dict(body, extra=1), 400, "validation_error", "extra")
    mixed = PAYER.address[:-1] + ("a" if PAYER.address[-1] == "A" else "A")
    shop.refused(process_id, dict(body, **{"from": mixed}), 400, "validation_error", "from")


def test_one_authorization_in_flight_per_process(shop, chain):
    process_id, process = shop.order(3)
    chain.rpc("evm_setAutomine", False)
    try:
        first = shop.post(process_id, signing.body(shop.authorization(process, value=3_000_000)))
        assert first.status_code == 202, first.get_json()
        second = shop.authorization(process, value=3_000_000)
        answer = shop.refused(process_id, signing.body(second), 409, "invalid_state")
        assert "in flight" in answer["message"]
    finally:
        chain.rpc("evm_setAutomine", True)
    chain.mine(1)
    assert chain.rpc("eth_getTransactionReceipt", first.get_json()["txHash"])["status"] == "0x1"


def test_a_dropped_authorization_no_longer_blocks_the_process(shop, chain):
    process_id, process = shop.order(2)
    chain.rpc("evm_setAutomine", False)
    try:
        first = shop.post(process_id, signing.body(shop.authorization(process, value=2_000_000)))
        assert first.status_code == 202
        chain.rpc("hardhat_dropTransaction", first.get_json()["txHash"])  # lost by the node
    finally:
        chain.rpc("evm_setAutomine", True)
    again = shop.post(process_id, signing.body(shop.authorization(process, value=2_000_000)))
    assert again.status_code == 202, again.get_json()


def test_states_and_assets_that_cannot_be_paid_without_gas(shop, client):
    pending_id = shop.api.preorder({"amount": 1}).get_json()["processId"]
    body = signing.body(signing.sign(PAYER, shop.domain, to=PAYER.address, value=1_000_000,
                                     valid_before=int(shop.clock.now) + 600))
    answer = shop.refused(pending_id, body, 409, "invalid_state")
    assert "confirm" in answer["message"]
    plain_id, plain = shop.order(1, asset="tusd")
    shop.refused(plain_id, signing.body(shop.authorization(plain, value=1_000_000)), 409,
                 "payment_method_unavailable")
    cancelled_id, cancelled = shop.order(1)
    assert shop.api.cancel(cancelled_id).status_code == 200
    shop.refused(cancelled_id, signing.body(shop.authorization(cancelled, value=1_000_000)), 409,
                 "invalid_state")
    # Another merchant's key: 404, as for every process of another merchant.
    other = shop.runner.invoke(args=["merchants", "create", "--name", "Other", "--json"])
    headers = {"x-public-key": json.loads(other.stdout)["publicKey"]}
    answer = client.post(f"/payment-button/process/{plain_id}/authorization", json=body,
                         headers=headers)
    assert (answer.status_code, answer.get_json()["code"]) == (404, "not_found")
    missing = client.post(f"/payment-button/process/{plain_id}/authorization", json=body)
    assert (missing.status_code, missing.get_json()["code"]) == (401, "missing_public_key")
    preflight = client.options(f"/payment-button/process/{plain_id}/authorization",
                               headers={"Origin": "https://shop.example",
                                        "Access-Control-Request-Method": "POST"})
    assert preflight.headers["Access-Control-Allow-Origin"] == "*"
    assert "x-public-key" in preflight.headers["Access-Control-Allow-Headers"]


def test_the_hourly_cap_hides_the_option(shop, app):
    app.config["RELAYER_MAX_PER_HOUR"] = 1
    first_id, first = shop.order(1)
    assert shop.post(first_id, signing.body(shop.authorization(first, value=1_000_000))).status_code == 202
    assert shop.gasless() is False
    second_id, second = shop.order(1)
    answer = shop.refused(second_id, signing.body(shop.authorization(second, value=1_000_000)), 409,
                          "payment_method_unavailable")
    assert "this hour" in answer["message"]
    shop.clock.advance(3601)  # an hour later it may send again
    assert shop.gasless() is True


def test_no_relayer_or_no_gas_hides_the_option(shop, app, chain):
    process_id, process = shop.order(1)
    body = signing.body(shop.authorization(process, value=1_000_000))
    chain.rpc("hardhat_setBalance", RELAYER, "0x0")
    assert shop.gasless() is False
    answer = shop.refused(process_id, body, 409, "payment_method_unavailable")
    assert "no gas" in answer["message"]
    app.config["RELAYER_KEY_FILE"] = None
    answer = shop.refused(process_id, body, 409, "payment_method_unavailable")
    assert "no relayer" in answer["message"]
    assert shop.gasless() is False


def test_an_unreachable_node_sends_nothing(shop, app):
    process_id, process = shop.order(1)
    body = signing.body(shop.authorization(process, value=1_000_000))
    with app.extensions["db"].transaction() as conn:
        conn.execute("UPDATE networks SET rpc_url = 'http://127.0.0.1:9/' WHERE id = 'hardhat'")
    nonce = shop.relayer_nonce()
    answer = shop.post(process_id, body)
    assert (answer.status_code, answer.get_json()["code"]) == (503, "network_unavailable")
    assert answer.headers["Retry-After"] == "5"
    assert shop.relayer_nonce() == nonce
