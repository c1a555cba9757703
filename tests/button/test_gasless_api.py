"""Paying without gas (POST /payment-button/process/<processId>/authorization) on a real node: the
test ERC-3009 token (tests/chain/token/TestUSDC.sol) added with `assets add --eip3009`, a payer
holding none of the gas coin, the relayer a funded dev account whose key is in RELAYER_KEY_FILE.
Every refusal is checked to broadcast nothing: the relayer's nonce (pending transactions included)
is unchanged."""
import itertools
import json

import pytest
from support import eip3009 as signing
from support.chain_shop import XPUB, cli
from support.helpers import Api

from app.evm.addresses import to_checksum_address
from app.evm.eip3009 import Domain

# Hardhat's published dev account #3 (the demo's relayer too): gas coin, no token.
RELAYER_KEY = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"
RELAYER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
PAYER = signing.payer("gasless payer")
PAYER_CLIENT = "203.0.113.7"  # the payer's address, as nginx forwards it (X-Forwarded-For)
CONFIRMATIONS = 2
GWEI = 10**9


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
        self.app, self.client, self.runner = app, client, runner
        self.chain, self.clock = chain, clock
        self.merchant, self.api = merchant, Api(client, merchant["secretKey"])
        self.clients = itertools.count(1)
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

    def post(self, process_id, body, client=PAYER_CLIENT):
        """POST the authorization from `client` (the address the shipped nginx forwards)."""
        return self.client.post(f"/payment-button/process/{process_id}/authorization",
                                data=json.dumps(body), content_type="application/json",
                                headers={**self.headers(), "X-Forwarded-For": client})

    def relayer_nonce(self):
        return int(self.chain.rpc("eth_getTransactionCount", RELAYER, "pending"), 16)

    def through(self, proxy):
        """The network's node is now `proxy` (a pool's URL, in front of the real node)."""
        with self.app.extensions["db"].transaction() as conn:
            conn.execute("UPDATE networks SET rpc_url = ? WHERE id = 'hardhat'", (proxy.url,))

    def funded_payer(self, seed, amount):
        payer = signing.payer(seed)
        self.chain.transfer(payer.address, amount, token=self.usdc)
        return payer

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

    def refused(self, process_id, body, status, code, field=None, client=None):
        """The answer to `body` is `status` `code` (naming `field`), and nothing was broadcast.
        Sent from `client`, by default an address of its own: the refusals a test makes to see
        each check are not what limits the client (test_relayer_limits.py counts them)."""
        nonce = self.relayer_nonce()
        n = next(self.clients)
        answer = self.post(process_id, body, client or f"198.51.{n // 256}.{n % 256}")
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
    # unchanged shape
    assert set(listed["tusd"]) == {"id", "name", "chainId", "confirmations", "finality"}
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
    from app.evm.eip3009 import calldata
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


class Paused:
    """The node mines nothing while inside (a real chain's block time): what is sent waits."""

    def __init__(self, chain):
        self.chain = chain

    def __enter__(self):
        self.chain.rpc("evm_setAutomine", False)

    def __exit__(self, *exc):
        self.chain.rpc("evm_setAutomine", True)


def test_a_mined_authorization_counts_as_paid_until_the_watcher_records_it(shop, chain):
    """The first authorization is mined and the watcher has not polled yet (it may be behind or
    down): the process still shows the whole amount due, yet a second authorization of it (a double
    click, a reload) is refused, and the payer is charged once."""
    process_id, process = shop.order(3)
    before = shop.token_balance(PAYER.address)
    first = shop.post(process_id, signing.body(shop.authorization(process, value=3_000_000)))
    assert first.status_code == 202, first.get_json()
    assert chain.rpc("eth_getTransactionReceipt", first.get_json()["txHash"])["status"] == "0x1"
    assert shop.api.get(process_id).get_json()["payment"]["amountPaid"] == "0"

    second = signing.body(shop.authorization(process, value=3_000_000))
    answer = shop.refused(process_id, second, 409, "invalid_state")
    assert answer["message"] == (
        f"An authorization of process {process_id} paid 3000000 base units; it counts once the"
        " chain watcher has recorded its transfer (in a few seconds). Nothing more is due for it.")
    assert before - shop.token_balance(PAYER.address) == 3_000_000
    watch(shop)
    answer = shop.refused(process_id, second, 409, "invalid_state")
    assert "nothing left to pay" in answer["message"]
    assert before - shop.token_balance(PAYER.address) == 3_000_000


def test_one_balance_backs_one_authorization_in_flight(shop, chain, proxy):
    """A payer holding 5 USDC signs authorizations for three processes of 5 USDC before the first is
    mined: each alone passes against the latest state (the node estimates as geth does), but the
    balance is reserved for the first, so the others are refused; so is an authorization reusing a
    nonce in flight. Nothing the relayer sends reverts."""
    proxy.estimates_on_latest = True
    shop.through(proxy)
    poor = shop.funded_payer("one balance", 5_000_000)
    orders = [shop.order(5) for _ in range(3)]
    rich_id, rich = shop.order(1)
    sent = []
    with Paused(chain):
        process_id, process = orders[0]
        first = shop.post(process_id, signing.body(
            shop.authorization(process, value=5_000_000, signer=poor)))
        assert first.status_code == 202, first.get_json()
        sent.append(first.get_json()["txHash"])
        for process_id, process in orders[1:]:
            answer = shop.refused(process_id, signing.body(
                shop.authorization(process, value=5_000_000, signer=poor)),
                400, "validation_error", "from")
            assert answer["errors"]["from"] == [
                "Holds less than `value` of the token once its authorizations in flight"
                " (5000000 base units) are paid."]
        # Another payer's authorization, then one of its own for another process on that nonce.
        paying = shop.authorization(orders[1][1], value=5_000_000)
        answer = shop.post(orders[1][0], signing.body(paying))
        assert answer.status_code == 202, answer.get_json()
        sent.append(answer.get_json()["txHash"])
        reused = shop.authorization(rich, value=1_000_000, nonce=paying.nonce)
        answer = shop.refused(rich_id, signing.body(reused), 400, "validation_error",
                              "nonce")
        assert answer["errors"]["nonce"] == [
            "An authorization with this nonce is already being sent."]
    chain.mine(1)
    assert [chain.rpc("eth_getTransactionReceipt", h)["status"] for h in sent] == ["0x1", "0x1"]
    assert shop.token_balance(poor.address) == 0


def test_the_call_is_simulated_on_the_pending_state(shop, chain, proxy):
    """The payer's own transfer of its whole balance waits in the node's pool when its authorization
    arrives: on the latest state (what geth simulates without a block) the call passes, and sent it
    would revert; simulated on the pending state it is refused (409: the option is not available
    for it now), the node's words not quoted."""
    proxy.estimates_on_latest = True
    shop.through(proxy)
    payer = shop.funded_payer("moves its balance away", 5_000_000)
    chain.rpc("hardhat_setBalance", payer.address, hex(10**18))
    chain.rpc("hardhat_impersonateAccount", payer.address)
    process_id, process = shop.order(5)
    with Paused(chain):
        chain.rpc("eth_sendTransaction", {"from": payer.address, "to": shop.usdc,
                                          "data": "0xa9059cbb"
                                          + chain.accounts[5][2:].lower().rjust(64, "0")
                                          + format(5_000_000, "064x")})
        answer = shop.refused(process_id, signing.body(
            shop.authorization(process, value=5_000_000, signer=payer)), 409,
            "payment_method_unavailable")
    chain.rpc("hardhat_stopImpersonatingAccount", payer.address)
    assert answer["message"] == (
        "Paying without gas is not available now: the token would refuse this authorization now"
        " (simulated on the network's pending state; the tokens may be leaving the address);"
        " nothing was sent.")


def test_one_payer_cannot_fill_the_hourly_cap(shop, app):
    """Every transaction sent counts against RELAYER_MAX_PER_HOUR (a reverted one cost gas too), and
    one payer may have at most RELAYER_MAX_PER_PAYER_PER_HOUR of them: others still pay."""
    app.config["RELAYER_MAX_PER_PAYER_PER_HOUR"] = 1
    first_id, first = shop.order(1)
    assert shop.post(first_id, signing.body(
        shop.authorization(first, value=1_000_000))).status_code == 202
    second_id, second = shop.order(1)
    answer = shop.refused(second_id, signing.body(shop.authorization(second, value=1_000_000)), 409,
                          "payment_method_unavailable")
    assert answer["message"] == (
        f"Paying without gas is not available now: {PAYER.address} has had as many payments sent"
        " without gas as it may this hour; pay with gas from the wallet.")
    other = shop.funded_payer("another payer", 1_000_000)
    answer = shop.post(second_id, signing.body(
        shop.authorization(second, value=1_000_000, signer=other)))
    assert answer.status_code == 202, answer.get_json()
    assert shop.gasless() is True


def test_a_pool_node_that_never_saw_the_relay_frees_nothing(shop, chain, live_chain, proxy):
    """The relay is pending; the one node of the pool asked about it has never seen it (here
    another chain's node answers that call): the process stays in flight, the payer charged once."""
    shop.through(proxy)
    process_id, process = shop.order(2)
    before = shop.token_balance(PAYER.address)
    with Paused(chain):
        first = shop.post(process_id, signing.body(shop.authorization(process, value=2_000_000)))
        assert first.status_code == 202, first.get_json()
        proxy.route(live_chain.url, "eth_getTransactionByHash", times=1)
        answer = shop.refused(process_id,
                              signing.body(shop.authorization(process, value=2_000_000)),
                              409, "invalid_state")
        assert "is in flight" in answer["message"]
        assert proxy.calls["eth_getTransactionByHash"] == 1
    chain.mine(1)
    assert before - shop.token_balance(PAYER.address) == 2_000_000


def test_a_relay_the_node_lost_is_sent_again(shop, chain):
    """The node drops the relay's transaction: the process's next authorization finds it unknown,
    and the relayer broadcasts it again from its signed bytes (another node may hold it: it stays
    in flight). The payer's first signature pays, once."""
    process_id, process = shop.order(2)
    before = shop.token_balance(PAYER.address)
    with Paused(chain):
        first = shop.post(process_id, signing.body(shop.authorization(process, value=2_000_000)))
        assert first.status_code == 202, first.get_json()
        tx_hash = first.get_json()["txHash"]
        chain.rpc("hardhat_dropTransaction", tx_hash)  # lost by the node
    assert chain.rpc("eth_getTransactionByHash", tx_hash) is None
    again = shop.post(process_id, signing.body(shop.authorization(process, value=2_000_000)))
    assert (again.status_code, again.get_json()["code"]) == (409, "invalid_state")
    assert chain.rpc("eth_getTransactionReceipt", tx_hash)["status"] == "0x1"
    assert before - shop.token_balance(PAYER.address) == 2_000_000
    chain.mine(CONFIRMATIONS)
    watch(shop)
    assert shop.api.get(process_id).get_json()["status"] == "completed"


def test_a_lost_relay_frees_the_process_once_it_can_no_longer_pay(shop, chain):
    """A lost relay is over when its relayer nonce is taken by another transaction while its
    authorization stayed unused (here the next relay's: the node's pending count), or once its
    validBefore is past: a new authorization of the process is then sent, and the payer's balance
    it held is free for its other payments."""
    lost_id, lost = shop.order(2)
    other_id, other = shop.order(1)
    nonce = shop.relayer_nonce()
    with Paused(chain):
        first = shop.post(lost_id, signing.body(shop.authorization(lost, value=2_000_000)))
        assert first.status_code == 202, first.get_json()
        chain.rpc("hardhat_dropTransaction", first.get_json()["txHash"])
    taker = shop.post(other_id, signing.body(shop.authorization(  # another payer: its relays alone
        other, value=1_000_000, signer=shop.funded_payer("takes the nonce", 1_000_000))))
    assert taker.status_code == 202, taker.get_json()
    assert int(chain.rpc("eth_getTransactionByHash",
                         taker.get_json()["txHash"])["nonce"], 16) == nonce
    again = shop.post(lost_id, signing.body(shop.authorization(lost, value=2_000_000)))
    assert again.status_code == 202, again.get_json()

    expiring_id, expiring = shop.order(1)
    later_id, later = shop.order(1)
    short_payer = shop.funded_payer("its relay expires", 1_000_000)
    shop.clock.now = chain.timestamp()  # the module's chain time may have been moved on
    with Paused(chain):
        short = shop.post(expiring_id, signing.body(shop.authorization(
            expiring, value=1_000_000, signer=short_payer, valid_before=int(shop.clock.now) + 100)))
        assert short.status_code == 202, short.get_json()
        chain.rpc("hardhat_dropTransaction", short.get_json()["txHash"])
        shop.clock.advance(100 + 60)  # validBefore, and a minute for clocks that differ
        answer = shop.post(later_id, signing.body(
            shop.authorization(later, value=1_000_000, signer=short_payer)))
        assert answer.status_code == 202, answer.get_json()
    again = shop.post(expiring_id, signing.body(shop.authorization(expiring, value=1_000_000)))
    assert again.status_code == 202, again.get_json()
    assert shop.token_balance(short_payer.address) == 0


def _base_fee(chain, gwei):
    """The latest block's base fee made `gwei`."""
    chain.rpc("hardhat_setNextBlockBaseFeePerGas", hex(gwei * GWEI))
    chain.mine(1)


def test_one_node_s_tip_does_not_set_what_the_relayer_pays(shop, chain, proxy):
    """One node of the pool answers eth_maxPriorityFeePerGas with 1,000 gwei (a tip paid in full to
    the block's producer: about 0.08 ETH for one payment): the tip sent is at most the base fee or
    what recent blocks paid."""
    shop.through(proxy)
    honest = int(chain.rpc("eth_maxPriorityFeePerGas"), 16)
    _base_fee(chain, 10)
    proxy.lie("eth_maxPriorityFeePerGas", hex(1000 * GWEI))
    process_id, process = shop.order(1)
    answer = shop.post(process_id, signing.body(shop.authorization(process, value=1_000_000)))
    assert answer.status_code == 202, answer.get_json()
    sent = chain.rpc("eth_getTransactionByHash", answer.get_json()["txHash"])
    assert int(sent["maxPriorityFeePerGas"], 16) <= max(10 * GWEI, honest)
    assert int(sent["maxFeePerGas"], 16) <= 3 * 10 * GWEI


def test_above_the_operator_s_ceiling_nothing_is_sent(shop, chain, runner):
    """`networks set-max-fee`: while the base fee and the tip are above it the option is hidden and
    an authorization is refused, nothing sent; below it the max fee is cut to the ceiling."""
    _base_fee(chain, 10)
    process_id, process = shop.order(1)
    body = signing.body(shop.authorization(process, value=1_000_000))
    set_to = cli(runner, "networks", "set-max-fee", "hardhat", "5")
    assert set_to.output == "Network hardhat: nothing is sent paying more than 5 gwei per gas.\n"
    assert shop.gasless() is False
    answer = shop.refused(process_id, body, 409, "payment_method_unavailable")
    assert answer["message"] == ("Paying without gas is not available now: the network's fees are"
                                 " above what the operator allows now.")
    cli(runner, "networks", "set-max-fee", "hardhat", "12.5")
    answer = shop.post(process_id, body)
    assert answer.status_code == 202, answer.get_json()
    sent = chain.rpc("eth_getTransactionByHash", answer.get_json()["txHash"])
    assert int(sent["maxFeePerGas"], 16) == 12_500_000_000
    listed = json.loads(cli(runner, "networks", "list", "--json").output)
    assert listed[0]["maxFeeGwei"] == "12.5"
    assert cli(runner, "networks", "set-max-fee", "hardhat", "0").output == (
        "Network hardhat: no ceiling on the fees it pays.\n")
    refused = runner.invoke(args=["networks", "set-max-fee", "hardhat", "0.0000000001"])
    assert refused.exit_code == 1 and "at most 9 decimal places" in refused.output


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


def test_a_network_switched_to_the_other_mode_is_not_paid_into(app, client, runner, live_chain,
                                                                clock, make_merchant):
    """A live merchant's process confirmed on a live network (chain 137); the operator then makes it
    a test network (`networks set-mode`): the watcher no longer credits the process there, so the
    relayer refuses to move the payer's tokens into it, and the listing offers it no more."""
    clock.now = live_chain.timestamp()
    usdc = to_checksum_address(live_chain.deploy_token(contract="TestUSDC"))
    live_chain.transfer(PAYER.address, 4_000_000, token=usdc)
    cli(runner, "networks", "add", "polygon", "--name", "Polygon", "--chain-id", "137",
        "--rpc-url", live_chain.url, "--confirmations", "2")
    cli(runner, "assets", "add", "usdc", "--network", "polygon", "--symbol", "TUSDC", "--name",
        "USD Coin", "--contract", usdc, "--decimals", "6", "--eip3009")
    merchant = make_merchant(live=True)
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    headers = {"x-public-key": merchant["publicKey"]}
    listed = client.get("/payment-button/assets", headers=headers).get_json()["data"]
    assert listed[0]["networks"][0]["gasless"] is True
    process_id = Api(client, merchant["secretKey"]).preorder({"amount": 4}).get_json()["processId"]
    confirmed = client.post(f"/payment-button/process/{process_id}/confirm",
                            json={"assetId": "usdc", "networkId": "polygon"}, headers=headers)
    assert confirmed.status_code == 200, confirmed.get_json()
    cli(runner, "networks", "set-mode", "polygon", "test")

    authorization = signing.sign(PAYER, Domain("Test USD Coin", "2", 137, usdc),
                                 to=confirmed.get_json()["payment"]["address"], value=4_000_000,
                                 valid_before=int(clock.now) + 1800)
    nonce = live_chain.rpc("eth_getTransactionCount", RELAYER, "pending")
    answer = client.post(f"/payment-button/process/{process_id}/authorization",
                         json=signing.body(authorization), headers=headers)
    assert (answer.status_code, answer.get_json()) == (409, {
        "code": "payment_method_unavailable", "message": "Paying without gas is not available now:"
        " network polygon no longer takes live-mode payments."})
    assert live_chain.rpc("eth_getTransactionCount", RELAYER, "pending") == nonce
    assert client.get("/payment-button/assets", headers=headers).get_json()["data"] == []


def test_the_hourly_cap_hides_the_option(shop, app):
    app.config["RELAYER_MAX_PER_HOUR"] = 1
    first_id, first = shop.order(1)
    assert shop.post(first_id, signing.body(
        shop.authorization(first, value=1_000_000))).status_code == 202
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
