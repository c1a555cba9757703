"""The payout mode on the real Hardhat node, driven as in production: `networks deploy-factory`,
`merchants set-payout`, confirms through the Button API (the CREATE2 deposit address), token and
gas-coin transfers from funded dev accounts, `collect` and `collections list` through the CLI (and
as a subprocess killed mid-way, or two at once), the watcher keeping the block hashes that prove a
collection. Every amount is checked on the chain and in the records, which count a collection once
it is `confirmations` deep: two runs or a stranger's collection in one block, and a reorganisation,
never count anything twice."""
import html
import json
import re
import signal
import subprocess
import time

import pytest
from support import dbutil
from support.chain_shop import NETWORK, add_network, cli
from support.fake_rpc import FaultyRpc
from support.helpers import Api
from support.servers import BIN, ROOT, service_env

from app.evm import forwarder
from app.evm.addresses import keccak256, to_checksum_address

# Hardhat's published dev keys ("test test … junk"): accounts #18 and #19 pay the gas here.
OPERATOR_KEY = "0xde9be858da4a475276426320d5e9262ecfc3ba460bfac56360bfa6c4c28b4ee0"
COLLECTOR_KEY = "0xdf57089febbacf7ba0bc227dafbffa9fc08a93fdc68e1e42411a14efcf23656e"
EMPTY_KEY = "0x" + "42" * 32  # an account that never held anything
ETHER = 10**18
GWEI = 10**9
CONFIRMATIONS = 3  # support.chain_shop.add_network's
GAS_COIN = "0xeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"


@pytest.fixture
def keys(tmp_path):
    paths = {}
    for name, key in (("operator", OPERATOR_KEY), ("collector", COLLECTOR_KEY),
                      ("empty", EMPTY_KEY)):
        path = tmp_path / f"{name}.key"
        path.write_text(key + "\n")
        path.chmod(0o600)
        paths[name] = str(path)
    return paths


def new_address(label):
    """A fresh address nobody holds funds at (the payout wallets)."""
    return to_checksum_address("0x" + keccak256(label.encode())[-20:].hex())


class PayoutShop:
    """The operator's setup and the customers' payments of the payout mode."""

    def __init__(self, app, client, runner, chain, make_merchant, keys, clock):
        self.app, self.client, self.runner, self.chain, self.keys = app, client, runner, chain, keys
        self.clock = clock
        self.make_merchant = make_merchant
        add_network(runner, chain)
        deployed = cli(runner, "networks", "deploy-factory", NETWORK, "--key-file",
                       keys["operator"])
        self.factory = deployed.output.split(" at ")[1].split(" ")[0]
        assert OPERATOR_KEY[2:] not in deployed.output

    def merchant(self, payout, *flags):
        merchant = self.make_merchant()
        cli(self.runner, "merchants", "set-payout", merchant["merchantId"], payout, *flags)
        return merchant

    def order(self, merchant, amount):
        self.clock.now = self.chain.timestamp()  # the app's clock at the chain's time
        api = Api(self.client, merchant["secretKey"])
        process_id = api.preorder({"amount": amount}).get_json()["processId"]
        confirmed = self.client.post(
            f"/payment-button/process/{process_id}/confirm",
            data=json.dumps({"assetId": "tusd", "networkId": NETWORK}),
            content_type="application/json", headers={"x-public-key": merchant["publicKey"]})
        assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
        return process_id, confirmed.get_json()["payment"]["address"]

    def token_balance(self, holder, token=None):
        data = "0x70a08231" + holder[2:].lower().rjust(64, "0")
        return int(self.chain.rpc("eth_call", {"to": token or self.chain.token, "data": data},
                                  "latest"), 16)

    def coin_balance(self, holder):
        return int(self.chain.rpc("eth_getBalance", holder, "latest"), 16)

    def collect(self, *args, key="collector", exit_code=0):
        result = self.runner.invoke(args=["collect", NETWORK, "--key-file", self.keys[key], *args])
        assert result.exit_code == exit_code, result.output
        return result

    def collect_json(self, *args, key="collector", exit_code=0):
        return json.loads(self.collect("--json", *args, key=key, exit_code=exit_code).stdout)

    def confirm(self):
        """The network's confirmations mined and the watcher's pass: it keeps the block hashes that
        prove a collection and settles the collections (read-only), with no other collect run."""
        self.chain.mine(CONFIRMATIONS)
        self.watch()

    def watch(self):
        watched = self.runner.invoke(args=["watch-payments", "--once"])
        assert watched.exit_code == 0, watched.output
        return watched

    def records(self):
        """{(address, token): total amount} of every confirmed collection's items."""
        rows = dbutil.query(self.app.config["DATABASE"],
                            "SELECT i.address, i.token, i.amount FROM collection_items i JOIN"
                            " collections c ON c.id = i.collection_id WHERE c.status = 'confirmed'")
        totals = {}
        for address, token, amount in rows:
            totals[(address, token.lower())] = totals.get((address, token.lower()), 0) + int(amount)
        return totals


@pytest.fixture(name="shop")
def payout_shop(app, client, runner, chain, make_merchant, keys, clock):
    """The payout mode's `shop`, in place of tests/conftest.py's (test_collect_concurrent.py
    imports it by this name, so its tests' `shop` parameter shadows no import)."""
    return PayoutShop(app, client, runner, chain, make_merchant, keys, clock)


def test_the_service_s_address_is_where_the_factory_deploys_and_collect_empties_it(shop, chain):
    payout = new_address("payout-1")
    merchant = shop.merchant(payout.lower(), "--unchecked")  # all lower case: stored EIP-55
    process_id, address = shop.order(merchant, 19.99)
    salt = forwarder.salt(process_id)
    data = ("0x" + keccak256(b"depositAddress(address,bytes32)")[:4].hex()
            + payout[2:].lower().rjust(64, "0") + salt.hex())
    on_chain = chain.rpc("eth_call", {"to": shop.factory, "data": data}, "latest")
    assert to_checksum_address("0x" + on_chain[-40:]) == address
    assert address == forwarder.deposit_address(shop.factory, payout, salt)
    assert chain.rpc("eth_getCode", address, "latest") == "0x"  # handed out: no transaction

    chain.transfer(address, 19_990_000)
    report = shop.collect_json()
    assert report["error"] is None and report["dryRun"] is False
    [tx] = report["transactions"]
    assert (tx["status"], tx["confirmations"], tx["confirmationsNeeded"]) == ("pending", 1, 3)
    assert tx["addresses"] == 1 and tx["gasUsed"] > 0
    assert report["merchants"] == [{
        "merchantId": merchant["merchantId"], "payoutAddresses": [payout],
        "tokens": [{"token": to_checksum_address(chain.token), "symbol": "TUSD", "amount": "19.99",
                    "baseUnits": "19990000", "addresses": [address],
                    "transactions": [tx["txHash"]]}]}]
    assert shop.token_balance(address) == 0 and shop.token_balance(payout) == 19_990_000
    assert chain.rpc("eth_getCode", address, "latest") == "0x"  # the forwarder destroyed itself
    assert shop.records() == {}  # counted once it has the network's confirmations
    shop.confirm()  # the watcher confirms it: no other collect run
    assert dbutil.query(shop.app.config["DATABASE"], "SELECT tx_hash, status FROM collections") == [
        (tx["txHash"], "confirmed")]
    assert shop.records() == {(address, chain.token.lower()): 19_990_000}


def test_partial_over_late_payments_gas_coin_and_two_merchants(shop, chain, runner):
    payout_a, payout_b = new_address("payout-a"), new_address("payout-b")
    a, b = shop.merchant(payout_a), shop.merchant(payout_b)
    _, partial = shop.order(a, 10)
    _, over = shop.order(a, 5)
    _, late = shop.order(a, 2)
    _, other = shop.order(b, 7)
    _, unpaid = shop.order(b, 3)
    chain.transfer(partial, 4_000_000)
    chain.transfer(over, 6_000_000)
    chain.transfer(late, 2_000_000)
    chain.transfer(other, 7_000_000)
    chain.send(chain.accounts[1], other, value=ETHER)  # the gas coin, sent by mistake

    dry = shop.collect_json("--dry-run")
    assert dry["dryRun"] is True and dry["error"] is None
    assert [t["status"] for t in dry["transactions"]] == ["planned"]
    assert shop.token_balance(partial) == 4_000_000  # nothing moved
    assert dbutil.scalar(shop.app.config["DATABASE"], "SELECT count(*) FROM collections") == 0

    only_b = shop.collect_json("--merchant", b["merchantId"])
    assert [m["merchantId"] for m in only_b["merchants"]] == [b["merchantId"]]
    assert shop.token_balance(payout_b) == 7_000_000 and shop.coin_balance(payout_b) == ETHER
    assert shop.token_balance(payout_a) == 0 and shop.token_balance(partial) == 4_000_000

    report = shop.collect_json()
    [m] = report["merchants"]
    assert m["merchantId"] == a["merchantId"] and m["payoutAddresses"] == [payout_a]
    assert [(t["symbol"], t["amount"], t["addresses"]) for t in m["tokens"]] == [
        ("TUSD", "12", sorted([partial, over, late]))]
    assert shop.token_balance(payout_a) == 12_000_000 and shop.token_balance(payout_b) == 7_000_000
    assert all(shop.token_balance(x) == 0 for x in (partial, over, late, other, unpaid))
    assert shop.coin_balance(other) == 0

    # Paid again after the collection (late): left out while that collection is not yet
    # confirmed; the next run after it moves only that.
    chain.transfer(late, 1_500_000)
    held = shop.collect_json()
    assert (held["transactions"], held["leftOut"]) == ([], [late])
    shop.confirm()
    again = shop.collect_json()
    assert [(t["amount"], t["addresses"]) for t in again["merchants"][0]["tokens"]] == [
        ("1.5", [late])]
    assert shop.token_balance(payout_a) == 13_500_000
    shop.confirm()
    nothing = shop.collect()
    assert nothing.output == f"Nothing to collect on {NETWORK}.\n"

    token = chain.token.lower()
    assert shop.records() == {
        (partial, token): 4_000_000, (over, token): 6_000_000, (late, token): 3_500_000,
        (other, token): 7_000_000, (other, GAS_COIN): ETHER}
    listed = json.loads(cli(runner, "collections", "list", "--json", "--merchant",
                            b["merchantId"]).output)
    assert [(c["state"], c["networkId"], c["symbol"], c["amount"], c["addresses"])
            for c in listed] == [("confirmed", NETWORK, "TUSD", "7", [other]),
                                 ("confirmed", NETWORK, "gas coin", "1", [other])]
    assert {c["txHash"] for c in listed} == {only_b["transactions"][0]["txHash"]}
    table = cli(runner, "collections", "list").output.splitlines()
    assert table[0].split() == ["ID", "NETWORK", "TRANSACTION", "STATE", "ADDRESSES", "AMOUNTS",
                                "GAS", "CREATED"]
    assert len(table) == 4 and all(" confirmed " in line for line in table[1:])


def test_a_new_payout_address_leaves_old_deposit_addresses_paying_the_old_one(shop, chain, runner):
    old, new = new_address("old-wallet"), new_address("new-wallet")
    merchant = shop.merchant(old)
    _, first = shop.order(merchant, 1)
    changed = cli(runner, "merchants", "set-payout", merchant["merchantId"], new)
    assert changed.output == (f"Payout address of {merchant['merchantId']} set to {new}. New"
                              f" payments' deposit addresses forward to it; those already handed"
                              f" out keep forwarding to {old}.\n")
    _, second = shop.order(merchant, 2)
    chain.transfer(first, 1_000_000)
    chain.transfer(second, 2_000_000)
    report = shop.collect_json()
    assert report["merchants"][0]["payoutAddresses"] == sorted([old, new])
    assert shop.token_balance(old) == 1_000_000 and shop.token_balance(new) == 2_000_000


def test_a_key_without_gas_an_unreachable_node_and_no_factory(shop, chain, app):
    merchant = shop.merchant(new_address("payout-gas"))
    _, address = shop.order(merchant, 1)
    chain.transfer(address, 1_000_000)
    broke = shop.collect(key="empty", exit_code=1)
    assert "holds 0 wei, less than the" in broke.output
    assert "Nothing more was sent." in broke.output and EMPTY_KEY[2:] not in broke.output
    assert shop.token_balance(address) == 1_000_000
    assert dbutil.scalar(app.config["DATABASE"], "SELECT count(*) FROM collections") == 0

    dbutil.execute(app.config["DATABASE"], "UPDATE networks SET rpc_url = 'http://127.0.0.1:1/k'")
    down = shop.collect(exit_code=1)
    assert down.output.splitlines()[-1] == (
        "Error: The node did not answer as expected: eth_chainId: http://127.0.0.1:1 unreachable"
        " (ConnectionError)")
    dbutil.execute(app.config["DATABASE"], "DELETE FROM network_factories")
    none = shop.collect(exit_code=1)
    assert none.output == (f"Error: Network {NETWORK} has no forwarder factory: networks"
                           " deploy-factory or set-factory first.\n")


class HeadLiar(FaultyRpc):
    """A pool whose node answering a lone `eth_blockNumber` says the head is `ahead` blocks above
    the real one (a node on a longer fork, a bug, a misrouted request)."""

    ahead = 0

    def answer(self, body):
        status, payload = super().answer(body)
        if self.ahead and isinstance(body, dict) and body.get("method") == "eth_blockNumber":
            answer = json.loads(payload)
            answer["result"] = hex(int(answer["result"], 16) + self.ahead)
            payload = self._json(answer)
        return status, payload


def test_a_collection_counts_its_depth_from_the_head_the_watcher_proved(shop, chain, app):
    """A collection 2 blocks deep of 3 stays pending whatever one node says the head is: collect
    counts from the head the watcher read in one batch with its kept block, and reads balances in
    one batch with the block they are read at."""
    proxy = HeadLiar(chain.url)
    try:
        dbutil.execute(app.config["DATABASE"], "UPDATE networks SET rpc_url = ?", proxy.url)
        merchant = shop.merchant(new_address("payout-head"))
        _, address = shop.order(merchant, 3)
        chain.transfer(address, 3_000_000)
        proxy.ahead = 1000
        assert [t["status"] for t in shop.collect_json()["transactions"]] == ["pending"]
        chain.mine(1)  # 2 confirmations of 3
        shop.watch()
        assert _collections(app.config["DATABASE"]) == [(1, "pending", True)]  # the watcher's count
        shop.collect_json("--dry-run")
        assert _collections(app.config["DATABASE"]) == [(1, "pending", True)]  # collect's
        shop.confirm()
        assert _collections(app.config["DATABASE"]) == [(1, "confirmed", True)]
    finally:
        proxy.close()


def test_set_factory_checks_the_code(shop, chain, runner):
    token = to_checksum_address(chain.token)
    refused = runner.invoke(args=["networks", "set-factory", NETWORK, token])
    assert refused.exit_code == 1
    assert refused.output == (f"Error: The code at {token} on network {NETWORK} is not this"
                              " service's forwarder factory (networks deploy-factory deploys"
                              " one).\n")
    again = cli(runner, "networks", "set-factory", NETWORK, shop.factory.lower())
    assert again.output == f"Network {NETWORK} uses the forwarder factory at {shop.factory}.\n"


def _collections(database):
    """(id, state, mined) of every collection."""
    return [(i, state, block is not None) for i, state, block in dbutil.query(
        database, "SELECT id, status, block_number FROM collections ORDER BY id")]


def _wait(predicate, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_collect_killed_between_batches_is_completed_by_the_next_run(shop, chain, app):
    payout = new_address("payout-kill")
    merchant = shop.merchant(payout)
    addresses = []
    for i in range(5):
        _, address = shop.order(merchant, 1)
        chain.transfer(address, 1_000_000 + i)
        addresses.append(address)
    database = app.config["DATABASE"]
    env = service_env(database)
    chain.rpc("evm_setAutomine", False)
    try:
        proc = subprocess.Popen(
            [str(BIN / "flask"), "--app", "app", "collect", NETWORK, "--key-file",
             shop.keys["collector"], "--max-batch", "2"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            # signed, recorded, broadcast
            _wait(lambda: _collections(database) == [(1, "pending", False)])
            chain.rpc("evm_mine")
            # The first batch's receipt: recorded as mined; the second batch goes out.
            _wait(lambda: _collections(database) == [(1, "pending", True), (2, "pending", False)])
            _wait(lambda: chain.rpc("eth_getBlockByNumber", "pending", False)["transactions"])
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=90)
        assert proc.returncode == -signal.SIGKILL
        chain.rpc("evm_mine")  # the second batch, broadcast before the kill, is mined
    finally:
        chain.rpc("evm_setAutomine", True)
    held = [a for a in addresses if shop.token_balance(a)]
    assert len(held) == 1  # two batches of two moved; the third was never sent
    assert shop.token_balance(payout) == 5_000_010 - shop.token_balance(held[0])

    report = shop.collect_json("--max-batch", "2")
    assert [(t["earlierRun"], t["status"], t["addresses"]) for t in report["transactions"]] == [
        (True, "pending", 2), (False, "pending", 1)]
    assert shop.token_balance(payout) == 5_000_010
    assert all(shop.token_balance(a) == 0 for a in addresses)
    shop.confirm()
    token = chain.token.lower()
    assert shop.records() == {(a, token): 1_000_000 + i for i, a in enumerate(addresses)}
    items = dbutil.query(database, "SELECT address FROM collection_items")
    assert sorted(items) == sorted((a,) for a in addresses)  # each address collected once
    assert [s for _, s, _ in _collections(database)] == ["confirmed"] * 3


def test_a_reverted_collection_is_recorded_reverted_and_nothing_counts_as_collected(
        shop, chain, app):
    """The factory's code is swapped for one that reverts after the batch was estimated and sent
    (automine off, so the transaction waits in the pool): the run records the failure and exits 1;
    with the factory back, the next run collects."""
    payout = new_address("payout-revert")
    merchant = shop.merchant(payout)
    _, address = shop.order(merchant, 3)
    chain.transfer(address, 3_000_000)
    database = app.config["DATABASE"]
    code = chain.rpc("eth_getCode", shop.factory, "latest")
    chain.rpc("evm_setAutomine", False)
    try:
        proc = subprocess.Popen(
            [str(BIN / "flask"), "--app", "app", "collect", NETWORK, "--key-file",
             shop.keys["collector"]],
            cwd=ROOT, env=service_env(database), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            _wait(lambda: _collections(database) == [(1, "pending", False)])
            _wait(lambda: chain.rpc("eth_getBlockByNumber", "pending", False)["transactions"])
            chain.rpc("hardhat_setCode", shop.factory, "0x60006000fd")  # PUSH 0 PUSH 0 REVERT
            chain.rpc("evm_mine")
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        chain.rpc("evm_setAutomine", True)
        chain.rpc("hardhat_setCode", shop.factory, code)
    assert proc.returncode == 1
    [tx_hash] = [row[0] for row in dbutil.query(database, "SELECT tx_hash FROM collections")]
    assert err.splitlines()[-1].startswith(f"Error: The collection {tx_hash} reverted (block ")
    assert err.splitlines()[-1].endswith("): nothing in it moved.")
    assert f"Transaction {tx_hash} (nonce " in out and "): reverted, 1 address(es)" in out
    assert _collections(database) == [(1, "reverted", True)]
    assert shop.records() == {} and shop.token_balance(address) == 3_000_000

    report = shop.collect_json()
    assert [(t["status"], t["earlierRun"]) for t in report["transactions"]] == [("pending", False)]
    assert shop.token_balance(payout) == 3_000_000
    shop.confirm()
    assert shop.records() == {(address, chain.token.lower()): 3_000_000}


def test_the_watcher_counts_payments_to_payout_mode_addresses_and_not_their_collection(shop, chain,
                                                                                      runner):
    merchant = shop.merchant(new_address("payout-watch"))
    process_id, address = shop.order(merchant, 4)
    shop.collect()  # nothing yet
    chain.transfer(address, 4_000_000)
    chain.mine(3)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    api = Api(shop.client, merchant["secretKey"])
    paid = api.get(process_id).get_json()
    assert paid["status"] == "completed" and paid["payment"]["amountPaid"] == "4"
    shop.collect()
    chain.mine(3)
    assert runner.invoke(args=["watch-payments", "--once"]).exit_code == 0
    after = api.get(process_id).get_json()
    assert after["payment"]["amountPaid"] == "4" and len(after["payment"]["transfers"]) == 1


def test_a_factory_with_deposit_addresses_is_not_replaced(shop, chain, runner):
    merchant = shop.merchant(new_address("payout-keep"))
    shop.order(merchant, 1)
    again = runner.invoke(args=["networks", "deploy-factory", NETWORK, "--key-file",
                                shop.keys["operator"]])
    assert again.exit_code == 1
    assert again.output == (f"Error: Network {NETWORK} already has the factory {shop.factory}, and"
                            " deposit addresses made with it: they are collected through it only,"
                            " so it stays.\n")


def test_batches_fit_in_half_a_block(shop, chain):
    """With a block gas limit of 1,500,000, a transaction may use 750,000 gas: 24 addresses of
    about 43,000 gas each take two transactions, each within that."""
    payout = new_address("payout-batches")
    merchant = shop.merchant(payout)
    for _ in range(24):
        _, address = shop.order(merchant, 1)
        chain.transfer(address, 1_000_000)
    limit = int(chain.block()["gasLimit"], 16)
    chain.rpc("evm_setBlockGasLimit", hex(1_500_000))
    chain.mine()
    try:
        report = shop.collect_json()
    finally:
        chain.rpc("evm_setBlockGasLimit", hex(limit))
    sizes = [t["addresses"] for t in report["transactions"]]
    assert len(sizes) == 2 and sum(sizes) == 24, sizes
    assert all(t["gasUsed"] <= 750_000 for t in report["transactions"])
    assert shop.token_balance(payout) == 24_000_000


def test_sigterm_finishes_the_transaction_in_flight_and_sends_no_other(shop, chain, app):
    payout = new_address("payout-term")
    merchant = shop.merchant(payout)
    addresses = []
    for _ in range(3):
        _, address = shop.order(merchant, 1)
        chain.transfer(address, 1_000_000)
        addresses.append(address)
    database = app.config["DATABASE"]
    chain.rpc("evm_setAutomine", False)
    try:
        proc = subprocess.Popen(
            [str(BIN / "flask"), "--app", "app", "collect", NETWORK, "--key-file",
             shop.keys["collector"], "--max-batch", "1"],
            cwd=ROOT, env=service_env(database), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            _wait(lambda: _collections(database) == [(1, "pending", False)])
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)  # the signal is handled while the receipt is awaited
            chain.rpc("evm_mine")
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        chain.rpc("evm_setAutomine", True)
    assert proc.returncode == 1
    assert err == ("Error: Stopped (SIGTERM/SIGINT) with 2 address(es) not collected: run collect"
                   " again for them.\n")
    assert ": pending (mined in block " in out and ", 1 of 3 confirmations), 1 address(es), " in out
    assert _collections(database) == [(1, "pending", True)]
    assert shop.token_balance(payout) == 1_000_000
    shop.collect()
    assert shop.token_balance(payout) == 3_000_000
    assert all(shop.token_balance(a) == 0 for a in addresses)


def test_a_token_that_is_no_asset_is_collected_when_named(shop, chain, runner):
    payout = new_address("payout-other-token")
    merchant = shop.merchant(payout)
    _, address = shop.order(merchant, 1)
    other = chain.deploy_token()
    chain.transfer(address, 5, token=other)  # sent by mistake: not an asset of the network
    assert shop.collect().output == f"Nothing to collect on {NETWORK}.\n"
    report = shop.collect_json("--token", other)
    assert [(t["token"], t["symbol"], t["amount"], t["baseUnits"])
            for t in report["merchants"][0]["tokens"]] == [
        (to_checksum_address(other), None, None, "5")]
    assert shop.token_balance(payout, other) == 5 and shop.token_balance(address, other) == 0
    bad = runner.invoke(args=["collect", NETWORK, "--key-file", shop.keys["collector"],
                              "--token", "0x12"])
    assert (bad.exit_code, bad.output) == (1, "Error: A --token must be 0x followed by 40"
                                              " hexadecimal digits.\n")


def test_deploy_factory_with_a_key_without_gas(shop, runner, app):
    dbutil.execute(app.config["DATABASE"], "DELETE FROM network_factories")
    broke = runner.invoke(args=["networks", "deploy-factory", NETWORK, "--key-file",
                                shop.keys["empty"]])
    assert broke.exit_code == 1
    assert broke.output.startswith("Error: The key's account 0x") \
        and "holds 0 wei; deploying the" in broke.output
    assert broke.output.endswith(" gas): fund it first.\n") and EMPTY_KEY[2:] not in broke.output
    assert dbutil.query(app.config["DATABASE"], "SELECT count(*) FROM network_factories") == [(0,)]


def test_collect_pays_no_node_s_tip_and_nothing_above_the_ceiling(shop, chain, app, runner, proxy):
    """collect signs with the relayer's signer: one node's 1,000 gwei eth_maxPriorityFeePerGas is
    not what it pays, and above the network's ceiling (`networks set-max-fee`) it sends nothing."""
    payout, address = _funded(shop, chain, "payout-fees", coin=0)
    dbutil.execute(app.config["DATABASE"], "UPDATE networks SET rpc_url = ?", proxy.url)
    honest = int(chain.rpc("eth_maxPriorityFeePerGas"), 16)
    proxy.lie("eth_maxPriorityFeePerGas", hex(1000 * GWEI))
    chain.rpc("hardhat_setNextBlockBaseFeePerGas", hex(10 * GWEI))
    chain.mine(1)
    cli(runner, "networks", "set-max-fee", NETWORK, "5")
    refused = shop.collect(exit_code=1)
    assert refused.output.splitlines()[-1] == (
        "Error: The fees on chain id 31337 (10 gwei base fee + 10 gwei tip) are above the ceiling"
        " of 5 gwei set for it (networks set-max-fee): nothing sent.")
    assert dbutil.scalar(app.config["DATABASE"], "SELECT count(*) FROM collections") == 0
    assert shop.token_balance(address) == 5_000_000

    cli(runner, "networks", "set-max-fee", NETWORK, "0")
    shop.collect()
    [(tx_hash,)] = dbutil.query(app.config["DATABASE"], "SELECT tx_hash FROM collections")
    sent = chain.rpc("eth_getTransactionByHash", tx_hash)
    assert int(sent["maxPriorityFeePerGas"], 16) <= max(10 * GWEI, honest)
    assert int(sent["maxFeePerGas"], 16) <= 3 * 10 * GWEI
    assert shop.token_balance(payout) == 5_000_000


def test_a_batch_the_node_finds_too_large_is_planned_again_at_half_its_size(
        shop, chain, app, proxy):
    """Nine addresses fit one batch by size; the node refuses its estimate as too large for a
    block: they are planned again in batches of at most four, evenly (three of three, not four,
    four and one), and every one is collected."""
    payout = new_address("payout-halved")
    merchant = shop.merchant(payout)
    for _ in range(9):
        _, address = shop.order(merchant, 1)
        chain.transfer(address, 1_000_000)
    dbutil.execute(app.config["DATABASE"], "UPDATE networks SET rpc_url = ?", proxy.url)
    proxy.fail("eth_estimateGas", "gas-too-large")
    report = shop.collect_json()
    assert [t["addresses"] for t in report["transactions"]] == [3, 3, 3]
    assert shop.token_balance(payout) == 9_000_000


def _funded(shop, chain, label, tokens=5_000_000, coin=ETHER):
    """A merchant's paid deposit address holding the token and some gas coin: (payout, address)."""
    payout = new_address(label)
    merchant = shop.merchant(payout)
    _, address = shop.order(merchant, tokens / 10**6)
    chain.transfer(address, tokens)
    chain.send(chain.accounts[1], address, value=coin)
    return payout, address


def _start_collect(shop, database, key="collector"):
    return subprocess.Popen(
        [str(BIN / "flask"), "--app", "app", "collect", NETWORK, "--key-file", shop.keys[key],
         "--json"], cwd=ROOT, env=service_env(database), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _pending_transactions(chain):
    return chain.rpc("eth_getBlockByNumber", "pending", False)["transactions"]


@pytest.mark.parametrize("senders", [("collector", "operator"), ("collector", "collector")],
                         ids=["two keys", "one key"])
def test_two_runs_at_once_send_one_transaction_for_an_address(shop, chain, app, senders):
    """Two runs started at once, the address full for both (nothing mined until the test mines):
    the first to claim it sends the one transaction; the other leaves it out, sends nothing and
    exits 0. 1 gas coin and 5 tokens moved, recorded once."""
    payout, address = _funded(shop, chain, "payout-twice")
    database = app.config["DATABASE"]
    chain.rpc("evm_setAutomine", False)
    runs = []
    try:
        runs = [_start_collect(shop, database, key) for key in senders]
        _wait(lambda: len(_pending_transactions(chain)) == 1
              and sum(run.poll() is not None for run in runs) == 1)
        assert len(_pending_transactions(chain)) == 1
        chain.rpc("evm_mine")
        reports = [json.loads(run.communicate(timeout=60)[0]) for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
        chain.rpc("evm_setAutomine", True)
    assert [run.returncode for run in runs] == [0, 0]
    sent, idle = sorted(reports, key=lambda r: -len(r["transactions"]))
    assert [(t["status"], t["addresses"]) for t in sent["transactions"]] == [("pending", 1)]
    assert sent["leftOut"] == []
    assert (idle["transactions"], idle["merchants"], idle["leftOut"]) == ([], [], [address])
    assert shop.coin_balance(payout) == ETHER and shop.token_balance(payout) == 5_000_000
    shop.confirm()
    assert shop.records() == {(address, chain.token.lower()): 5_000_000, (address, GAS_COIN): ETHER}
    assert [state for _, state, _ in _collections(database)] == ["confirmed"]


def test_a_stranger_s_collection_in_the_same_block_leaves_nothing_to_ours(shop, chain, app):
    """A stranger collects the address in the block that also mines our collection, before it: ours
    moved nothing, and records nothing."""
    payout, address = _funded(shop, chain, "payout-stranger")
    process_id = dbutil.scalar(app.config["DATABASE"], "SELECT process_id FROM payments"
                               " WHERE address = ?", address)
    call = forwarder.collect_calldata([chain.token], [(payout, forwarder.salt(process_id))])
    database = app.config["DATABASE"]
    chain.rpc("evm_setAutomine", False)
    try:
        stranger = chain.rpc("eth_sendTransaction", {
            "from": chain.accounts[7], "to": shop.factory, "data": "0x" + call.hex(),
            "maxPriorityFeePerGas": hex(100 * 10**9), "maxFeePerGas": hex(200 * 10**9)})
        run = _start_collect(shop, database)
        try:
            _wait(lambda: len(_pending_transactions(chain)) == 2)
            chain.rpc("evm_mine")
            report = json.loads(run.communicate(timeout=60)[0])
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    finally:
        chain.rpc("evm_setAutomine", True)
    [ours] = report["transactions"]
    assert chain.block(ours["blockNumber"])["transactions"] == [stranger, ours["txHash"]]
    assert report["merchants"] == []  # it moved nothing
    assert shop.coin_balance(payout) == ETHER and shop.token_balance(payout) == 5_000_000
    shop.confirm()
    assert shop.records() == {}
    assert _collections(database) == [(1, "confirmed", True)]


def test_a_collection_removed_by_a_reorganisation_is_reverted_and_collected_again(shop, chain, app,
                                                                                 runner):
    payout, address = _funded(shop, chain, "payout-reorg")
    database = app.config["DATABASE"]
    before = chain.snapshot()
    removed = shop.collect_json()["transactions"][0]
    shop.confirm()
    token = chain.token.lower()
    assert shop.records() == {(address, token): 5_000_000, (address, GAS_COIN): ETHER}
    height = chain.head()
    # a longer chain without the collection: the funds are at the address again
    chain.revert(before)
    chain.mine(height - chain.head() + 2)
    assert shop.token_balance(address) == 5_000_000 and shop.coin_balance(address) == ETHER
    shop.watch()  # the watcher reads the reorganisation and finds the collection's block gone
    assert dbutil.query(database, "SELECT tx_hash, status, error FROM collections") == [
        (removed["txHash"], "reverted",
         f"removed by a reorganisation (its block {removed['blockNumber']} left the chain)")]
    report = shop.collect_json()  # the same key, the same nonce again: never stuck
    assert [(t["status"], t["earlierRun"], t["error"]) for t in report["transactions"]] == [
        ("pending", False, None)]
    assert report["transactions"][0]["nonce"] == removed["nonce"]
    assert shop.records() == {}  # the reverted one counts for nothing
    shop.confirm()
    assert shop.records() == {(address, token): 5_000_000, (address, GAS_COIN): ETHER}
    assert shop.token_balance(payout) == 5_000_000 and shop.coin_balance(payout) == ETHER
    listed = json.loads(cli(runner, "collections", "list", "--json").output)
    assert [(c["txHash"], c["state"], c["symbol"]) for c in listed] == [
        (report["transactions"][0]["txHash"], "confirmed", "TUSD"),
        (report["transactions"][0]["txHash"], "confirmed", "gas coin"),
        (removed["txHash"], "reverted", "TUSD"), (removed["txHash"], "reverted", "gas coin")]


def test_a_transaction_that_is_never_mined_is_replaced_and_never_jams_the_key(shop, chain, app,
                                                                              clock):
    payout, address = _funded(shop, chain, "payout-stuck", coin=0)
    database = app.config["DATABASE"]
    chain.rpc("evm_setAutomine", False)
    try:
        stuck = shop.collect("--receipt-timeout", "1", exit_code=1)
        assert "was sent but not mined within 1 s: the next run settles it" in stuck.output, \
            stuck.output
        [(original,)] = dbutil.query(database, "SELECT tx_hash FROM collections")
        clock.advance(5)  # longer than the receipt timeout
        again = shop.collect("--receipt-timeout", "1", exit_code=1)
        [(replacement,)] = dbutil.query(database, "SELECT tx_hash FROM collections WHERE id = 2")
        assert f"Transaction {original} was not mined after 1 s: replaced by {replacement}." \
            in again.output
        assert _pending_transactions(chain) == [replacement]
        chain.rpc("evm_mine")
    finally:
        chain.rpc("evm_setAutomine", True)
    shop.confirm()  # the watcher settles both
    assert dbutil.query(database, "SELECT nonce, status, error FROM collections ORDER BY id") == [
        (0, "reverted", f"replaced: nonce 0 was used by {replacement}"), (0, "confirmed", None)]
    assert shop.records() == {(address, chain.token.lower()): 5_000_000}
    assert shop.token_balance(payout) == 5_000_000


def test_a_first_release_factory_keeps_its_addresses_and_collects_them(shop, chain, app, runner):
    """A network set up before the forwarder logged the gas coin keeps its factory: its deposit
    addresses are still where it creates forwarders, collect moves and records the tokens, and the
    gas coin it moves is noted as not measured."""
    receipt = chain.send(chain.accounts[0], None, "0x" + forwarder.factory_creation_code(1).hex())
    old = to_checksum_address(receipt["contractAddress"])
    dbutil.execute(app.config["DATABASE"], "DELETE FROM network_factories")
    cli(runner, "networks", "set-factory", NETWORK, old)
    assert dbutil.query(app.config["DATABASE"],
                        "SELECT address, version FROM network_factories") == [(old, 1)]
    shop.factory = old
    payout = new_address("payout-v1")
    merchant = shop.merchant(payout)
    process_id, address = shop.order(merchant, 2)
    salt = forwarder.salt(process_id)
    assert address == forwarder.deposit_address(old, payout, salt, 1)
    assert address != forwarder.deposit_address(old, payout, salt, 2)
    data = ("0x" + keccak256(b"depositAddress(address,bytes32)")[:4].hex()
            + payout[2:].lower().rjust(64, "0") + salt.hex())
    assert to_checksum_address(
        "0x" + chain.rpc("eth_call", {"to": old, "data": data}, "latest")[-40:]) == address
    chain.transfer(address, 2_000_000)
    chain.send(chain.accounts[1], address, value=ETHER)
    shop.collect()
    shop.confirm()
    assert shop.token_balance(payout) == 2_000_000 and shop.coin_balance(payout) == ETHER
    assert shop.records() == {(address, chain.token.lower()): 2_000_000}
    [listed] = json.loads(cli(runner, "collections", "list", "--json").output)
    assert listed["state"] == "confirmed" and listed["note"] == (
        f"{ETHER} wei of the gas coin, read before sending, may have moved unmeasured: this"
        " network's factory (of the first release) does not log it")


def test_under_a_finality_mode_a_collection_counts_by_the_tag_the_watcher_read(shop, chain, app,
                                                                               runner):
    """Under `finalized` a collection is confirmed once the finalized block the watcher last read
    (Hardhat's is its head) is at or past it, not by counting confirmations: pending before the
    watcher has read past it, confirmed after, with no block mined in between."""
    cli(runner, "networks", "set-finality", NETWORK, "finalized")
    _, address = _funded(shop, chain, "payout-finalized")
    sent = shop.collect_json()["transactions"]
    assert [(t["status"], t["finality"]) for t in sent] == [("pending", "finalized")]
    shop.collect_json("--dry-run")
    assert [state for _, state, _ in _collections(app.config["DATABASE"])] == ["pending"]
    shop.watch()  # it reads the tag's block at the head, and confirms the collection
    assert [state for _, state, _ in _collections(app.config["DATABASE"])] == ["confirmed"]
    assert shop.records() == {(address, chain.token.lower()): 5_000_000, (address, GAS_COIN): ETHER}


# --- Settled by the watcher: no other collect run -----------------------------------------------
PASSWORD = "correct horse battery"


def _console(shop, merchant, client=None):
    """The shop's test client (or `client`), logged in to the console as the merchant's owner."""
    client = client or shop.client
    email = f"owner-{merchant['merchantId']}@shop.example"
    created = shop.runner.invoke(args=["users", "create", email, "--merchant",
                                       merchant["merchantId"], "--role", "owner"],
                                 input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    page = client.get("/dashboard/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    logged = client.post("/dashboard/login", data={"email": email, "password": PASSWORD,
                                                    "csrf_token": token})
    assert logged.status_code == 303
    return client


def _waits(console):
    """What the overview's "Waiting to be collected" and the payouts page's section of the network
    say, as their texts (tags dropped, spaces joined)."""
    def text(page, start):
        part = page.split(start, 1)[1].split("</section>", 1)[0]
        return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(part)).split())

    overview = console.get("/dashboard/overview")
    payouts = console.get("/dashboard/payouts")
    assert overview.status_code == payouts.status_code == 200
    return text(overview.text, 'id="waiting"'), text(payouts.text, f'id="network-{NETWORK}"')


OVERVIEW_WAITS = "6 TUSD on Hardhat in 1 deposit address,"  # the overview's line
CHAIN_WAITS = "Waiting in 1 deposit address: 6 TUSD"  # the payouts page's, read from the chain


def _collected_then_watched(shop, chain, app):
    """A merchant's 6 TUSD payment confirmed, then collected by collect (pending, 1 confirmation
    of 3): the overview, which counts only confirmed collections, still shows it waiting while the
    payouts page, which reads the chain, shows nothing. Then only the watcher's passes: one at 1
    confirmation (pending still), blocks mined to 3, another pass. Returns (the console, the
    collect's transaction, the deposit address, the collector's nonce before the passes)."""
    database = app.config["DATABASE"]
    merchant = shop.merchant(new_address("payout-watched"))
    _, address = shop.order(merchant, 6)
    chain.transfer(address, 6_000_000)
    shop.confirm()  # the payment confirmed
    console = _console(shop, merchant)
    before = _waits(console)
    assert OVERVIEW_WAITS in before[0] and CHAIN_WAITS in before[1], before

    [sent] = shop.collect_json()["transactions"]
    assert (sent["status"], sent["confirmations"]) == ("pending", 1)
    collector = dbutil.scalar(database, "SELECT sender FROM collections")
    nonce = chain.rpc("eth_getTransactionCount", collector, "latest")
    pending = _waits(console)
    assert OVERVIEW_WAITS in pending[0]  # the overview: not collected until confirmed
    assert "Nothing waits to be collected." in pending[1]  # the chain: moved

    shop.watch()  # the watcher's pass at 1 confirmation of 3 leaves it pending
    assert _collections(database) == [(1, "pending", True)]
    chain.mine(CONFIRMATIONS - 1)  # 3 of 3
    shop.watch()
    return console, sent, address, (collector, nonce)


def test_the_watcher_confirms_a_collection_without_another_collect_run(shop, chain, app, runner):
    """Confirmed by the watcher's pass alone: listed so by `collections list` and the payouts
    page, whose "waits" figure (read from the chain) says nothing waits. The watcher sent nothing
    (the collector's nonce, the collections recorded), and later passes change nothing."""
    database = app.config["DATABASE"]
    console, sent, address, (collector, nonce) = _collected_then_watched(shop, chain, app)
    assert _collections(database) == [(1, "confirmed", True)]
    listed = json.loads(cli(runner, "collections", "list", "--json").output)
    assert [(c["txHash"], c["state"], c["amount"], c["addresses"]) for c in listed] == [
        (sent["txHash"], "confirmed", "6", [address])]
    assert shop.records() == {(address, chain.token.lower()): 6_000_000}
    assert "Nothing waits to be collected." in _waits(console)[1]
    page = console.get("/dashboard/payouts").text
    assert 'badge-confirmed">confirmed</span>' in page.split('id="collections"')[1]
    assert chain.rpc("eth_getTransactionCount", collector, "latest") == nonce  # nothing sent
    assert dbutil.scalar(database, "SELECT count(*) FROM collections") == 1

    shop.confirm()  # settled once: later passes and runs change nothing
    again = shop.collect_json("--dry-run")
    assert again["transactions"] == [] and again["error"] is None
    assert _collections(database) == [(1, "confirmed", True)]
    assert shop.records() == {(address, chain.token.lower()): 6_000_000}


def test_the_overview_agrees_with_the_payouts_page_once_the_watcher_confirmed(shop, chain, app):
    console, *_ = _collected_then_watched(shop, chain, app)
    overview, payouts = _waits(console)
    assert "Nothing waits to be collected." in payouts
    assert "Nothing confirmed since" in overview and OVERVIEW_WAITS not in overview, overview


def _sent_but_not_mined(shop, chain):
    """A collection sent by collect and left unmined in the node's pool (automine off, receipt
    timeout 1 s): its (tx hash, sender, nonce)."""
    _funded(shop, chain, "payout-unmined")
    chain.rpc("evm_setAutomine", False)
    stuck = shop.collect("--receipt-timeout", "1", exit_code=1)
    assert "was sent but not mined within 1 s" in stuck.output, stuck.output
    [(tx_hash, sender, nonce)] = dbutil.query(shop.app.config["DATABASE"],
                                              "SELECT tx_hash, sender, nonce FROM collections")
    assert _pending_transactions(chain) == [tx_hash]
    return tx_hash, sender, nonce


def test_a_collection_whose_nonce_another_transaction_took_is_reverted_by_the_watcher(shop, chain,
                                                                                     app):
    """The node drops the pending collection and the collector's account sends another transaction
    with its nonce: after the confirmations, the watcher's pass alone records it `reverted` (its
    nonce used by another), nothing counted as collected; the next collect moves the funds."""
    database = app.config["DATABASE"]
    try:
        tx_hash, sender, nonce = _sent_but_not_mined(shop, chain)
        assert chain.rpc("hardhat_dropTransaction", tx_hash) is True
        other = chain.rpc("eth_sendTransaction", {"from": sender, "to": chain.accounts[3],
                                                  "value": "0x1", "nonce": hex(nonce)})
        chain.rpc("evm_mine")
    finally:
        chain.rpc("evm_setAutomine", True)
    assert chain.rpc("eth_getTransactionReceipt", other)["status"] == "0x1"
    assert chain.rpc("eth_getTransactionReceipt", tx_hash) is None
    shop.confirm()
    assert dbutil.query(database, "SELECT tx_hash, status, error FROM collections") == [
        (tx_hash, "reverted", "never mined: its nonce was used by another transaction")]
    assert shop.records() == {}
    assert chain.rpc("eth_getTransactionCount", sender, "latest") == hex(nonce + 1)  # nothing sent
    report = shop.collect_json()  # collects what is still at the address
    assert [(t["status"], t["earlierRun"], t["nonce"]) for t in report["transactions"]] == [
        ("pending", False, nonce + 1)]
    shop.confirm()
    assert [s for _, s, _ in _collections(database)] == ["reverted", "confirmed"]


def test_a_collection_mined_between_its_receipt_and_its_nonce_read_is_never_reverted(shop, chain,
                                                                                    app, proxy):
    """The watcher reads the pending collection's receipt (none yet), then it is mined before the
    watcher reads its sender's nonce, which is then used (as when `collect` and the watcher settle
    at once): the receipts are read again, and the collection is mined, never reverted."""
    database = app.config["DATABASE"]
    try:
        tx_hash, _, _ = _sent_but_not_mined(shop, chain)
        dbutil.execute(database, "UPDATE networks SET rpc_url = ?", proxy.url)
        proxy.before("eth_getTransactionCount", 0, lambda: chain.rpc("evm_mine"))
        shop.watch()
    finally:
        chain.rpc("evm_setAutomine", True)
    assert proxy.calls["eth_getTransactionCount"] == 1 and not proxy.hooks  # the hook ran
    assert chain.rpc("eth_getTransactionReceipt", tx_hash)["status"] == "0x1"
    assert dbutil.query(database, "SELECT tx_hash, status, error FROM collections") == [
        (tx_hash, "pending", None)]
    assert _collections(database) == [(1, "pending", True)]
    shop.confirm()
    assert _collections(database) == [(1, "confirmed", True)]


def test_a_node_failing_the_collections_step_fails_that_poll_only(shop, chain, app, runner, proxy,
                                                                   caplog):
    """The node fails the receipts' read of the watcher's collections step: the poll is the
    network's fault (exit status 1 for --once, the network's failed poll recorded), nothing of
    the collection recorded; the next pass settles it."""
    database = app.config["DATABASE"]
    _funded(shop, chain, "payout-failing")
    shop.collect()
    chain.mine(CONFIRMATIONS)
    dbutil.execute(database, "UPDATE networks SET rpc_url = ?", proxy.url)
    proxy.fail("eth_getTransactionReceipt", "http500")
    with caplog.at_level("WARNING", logger="app.chain.watcher"):
        failed = runner.invoke(args=["watch-payments", "--once"])
    assert failed.exit_code == 1, failed.output
    [record] = [r for r in caplog.records if r.name == "app.chain.watcher"]
    assert (record.levelname, record.exc_info) == ("WARNING", None)  # the node's fault, no trace
    assert record.getMessage().startswith(f"watch {NETWORK}: ")
    assert proxy.calls["eth_getTransactionReceipt"] == 1
    assert _collections(database) == [(1, "pending", True)]
    assert dbutil.scalar(database, "SELECT failing_since FROM networks") is not None
    shop.watch()
    assert _collections(database) == [(1, "confirmed", True)]
    assert dbutil.scalar(database, "SELECT failing_since FROM networks") is None


def test_collect_still_settles_what_the_watcher_did_not(shop, chain, app, monkeypatch):
    """With the watcher's part switched off, a later collect run (a dry one) confirms the
    collection as before: either may settle it, and it is settled once."""
    from app.chain import collection_records

    monkeypatch.setattr(collection_records, "settle_watched", lambda *args, **kwargs: [])
    _, address = _funded(shop, chain, "payout-by-collect", coin=0)
    [sent] = shop.collect_json()["transactions"]
    shop.confirm()
    assert _collections(app.config["DATABASE"]) == [(1, "pending", True)]
    settled = shop.collect_json("--dry-run")
    assert [(t["txHash"], t["status"], t["earlierRun"]) for t in settled["transactions"]] == [
        (sent["txHash"], "confirmed", True)]
    monkeypatch.undo()
    shop.confirm()  # the watcher finds nothing more to settle
    assert shop.collect_json("--dry-run")["transactions"] == []
    assert shop.records() == {(address, chain.token.lower()): 5_000_000}


def test_batches_split_the_addresses_evenly():
    from app.chain.collect import plan_batches

    def sizes(start, stop, size):
        planned = plan_batches(start, stop, size)
        # each once, in order
        assert [i for part in planned for i in part] == list(range(start, stop))
        return [len(part) for part in planned]

    assert sizes(0, 1, 100) == [1]
    assert sizes(0, 100, 100) == [100]
    assert sizes(0, 101, 100) == [51, 50]
    assert sizes(0, 250, 100) == [84, 83, 83]
    assert sizes(0, 7, 3) == [3, 2, 2]
    assert sizes(0, 13, 4) == [4, 3, 3, 3]
    assert sizes(0, 500, 100) == [100] * 5
    assert sizes(40, 141, 50) == [34, 34, 33]  # the rest, planned again at a smaller size
    assert sizes(7, 7, 10) == []
