"""Money that arrives the wrong way, on two real nodes: Hardhat's chain 31337 ("hardhat") and a
second node of chain 80002 ("amoy"), both test networks, so a test-mode merchant's deposit
addresses are watched on both; the test token, and the forwarder factory deployed from one key's
first transaction, sit at the same address on each. The right token on the wrong network, a token
nobody registered, a contract that emits garbage to a deposit address, the gas coin; staff
accepting a transfer as payment; `collect` on the network the money arrived on. Driven as in
production: the operator CLI, the merchant API, the Button API's confirm, `watch-payments --once`.
And `reconcile` on the same nodes: clean after honest payments, a refund and a collection, writing
nothing (on PostgreSQL in a database that refuses writes); failing for a forged record and for a
transfer the watcher never read."""
import json

import pytest
from support import dbutil
from support.chain_shop import XPUB, add_network, cli
from support.dbutil import BACKEND
from support.helpers import Api

from app.domain.representation import iso
from app.evm.addresses import to_checksum_address

CONFIRMATIONS = 3
UNIT = 10**6
ETHER = 10**18
# Hardhat's published dev keys ("test test … junk"): #18 deploys the factories, #19 pays
# collections.
OPERATOR_KEY = "0xde9be858da4a475276426320d5e9262ecfc3ba460bfac56360bfa6c4c28b4ee0"
COLLECTOR_KEY = "0xdf57089febbacf7ba0bc227dafbffa9fc08a93fdc68e1e42411a14efcf23656e"
PAYOUT = to_checksum_address("0x" + "5a" * 20)
TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


@pytest.fixture
def keys(tmp_path):
    paths = {}
    for name, key in (("operator", OPERATOR_KEY), ("collector", COLLECTOR_KEY)):
        path = tmp_path / f"{name}.key"
        path.write_text(key + "\n")
        path.chmod(0o600)
        paths[name] = str(path)
    return paths


class TwoNetworks:
    """One test-mode merchant, the networks "hardhat" and "amoy" (TUSD on each), the app's clock
    and both chains' clocks together."""

    def __init__(self, app, client, runner, chain, amoy, clock, merchant, both=True):
        self.app, self.client, self.runner, self.chain, self.amoy = app, client, runner, chain, amoy
        self.clock, self.merchant = clock, merchant
        self.api = Api(client, merchant["secretKey"])
        add_network(runner, chain, confirmations=CONFIRMATIONS)
        if both:
            self.add_away()
        assert amoy.token == chain.token  # the same deployer's first transaction on each
        self.align()

    def add_away(self):
        """The "amoy" network, read from the chain's next block on."""
        add_network(self.runner, self.amoy, confirmations=CONFIRMATIONS, network="amoy",
                    name="Amoy", chain_id=80002)

    def align(self):
        """Both chains' next blocks and the app's clock at one time (the later chain's, plus 1)."""
        t = max(self.chain.timestamp(), self.amoy.timestamp()) + 1
        for node in (self.chain, self.amoy):
            node.next_timestamp(t)
            node.mine(1)
        self.clock.now = t

    def order(self, amount):
        process_id = self.api.preorder({"amount": amount}).get_json()["processId"]
        confirmed = self.client.post(
            f"/payment-button/process/{process_id}/confirm",
            data=json.dumps({"assetId": "tusd", "networkId": "hardhat"}),
            content_type="application/json", headers={"x-public-key": self.merchant["publicKey"]})
        assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
        return process_id, confirmed.get_json()["payment"]["address"]

    def watch(self):
        result = self.runner.invoke(args=["watch-payments", "--once"])
        assert result.exit_code == 0, result.output
        return result

    def events(self, process_id):
        from app.data import outbox as event_rows

        conn = self.app.extensions["db"].connection()
        return [(e.type, json.loads(e.payload)) for e in event_rows.for_process(conn, process_id)]

    def payment(self, process_id):
        response = self.api.get(process_id)
        assert response.status_code == 200
        return response.get_json()["payment"]

    def accept(self, process_id, key, **headers):
        return self.client.post(f"/payment-button/process/{process_id}/unexpected-transfers/{key}"
                                "/accept",
                                headers={"x-secret-key": self.merchant["secretKey"], **headers})

    def token_balance(self, node, holder, token=None):
        data = "0x70a08231" + holder[2:].lower().rjust(64, "0")
        return int(node.rpc("eth_call", {"to": token or node.token, "data": data}, "latest"), 16)

    def coin(self, node, holder):
        return int(node.rpc("eth_getBalance", holder, "latest"), 16)

    def reconcile(self, network, exit_code=0):
        result = self.runner.invoke(args=["reconcile", network, "--json"])
        assert result.exit_code == exit_code, result.output
        return json.loads(result.stdout)


@pytest.fixture
def two(app, client, runner, chain, amoy, clock, merchant):
    return TwoNetworks(app, client, runner, chain, amoy, clock, merchant)


def test_the_right_token_on_the_wrong_network_is_reported_accepted_and_collected_there(
        two, chain, amoy, runner, keys, clock):
    factories = [cli(runner, "networks", "deploy-factory", network, "--key-file", keys["operator"])
                 .output.split(" at ")[1].split(" ")[0] for network in ("hardhat", "amoy")]
    assert factories[0] == factories[1]  # so a deposit address is the same on both
    cli(runner, "merchants", "set-payout", two.merchant["merchantId"], PAYOUT)
    two.align()
    process_id, address = two.order(10)

    tx_hash, block = amoy.transfer(address, 10 * UNIT)  # the customer's wallet was on amoy
    two.watch()
    assert two.events(process_id) == []  # reported once confirmed, never as pending
    amoy.mine(CONFIRMATIONS - 1)
    two.watch()
    [(kind, event)] = two.events(process_id)
    assert kind == "payment.unexpected" and event["data"]["status"] == "pending"
    reported = {"networkId": "amoy", "chainId": 80002,
                "tokenContract": to_checksum_address(amoy.token),
                "symbol": "TUSD", "amount": "10", "baseUnits": str(10 * UNIT), "txHash": tx_hash,
                "logIndex": 0, "blockNumber": block, "acceptedAt": None, "acceptedBy": None}
    payment = event["data"]["payment"]
    assert payment["unexpectedTransfers"] == [reported]
    assert (payment["amountPaid"], payment["amountPending"], payment["transfers"]) == ("0", "0", [])
    assert two.reconcile("amoy")["onChainNotRecorded"] == []  # recorded, as unexpected

    # Staff accept it: it counts as paid on the chosen asset, once, with who and when.
    key = f"{tx_hash}:0"
    assert two.accept(process_id, key, Origin="https://shop.example").status_code == 403
    # The key is read as ASCII: another script's 0 is no alias of it (nor a 500: "⁰" raised in
    # int()), but 400 validation_error naming the path's `transfer`; nothing is accepted.
    for other in ("٠", "⁰", "𝟎", "०", "⓪", "０"):
        refused = two.accept(process_id, f"{tx_hash}:{other}")
        assert (refused.status_code, refused.get_json()["code"]) == (400, "validation_error")
        assert list(refused.get_json()["errors"]) == ["transfer"]
    assert two.payment(process_id)["unexpectedTransfers"][0]["acceptedAt"] is None
    accepted = two.accept(process_id, key.upper().replace("0X", "0x"))
    assert accepted.status_code == 200, accepted.get_data(as_text=True)
    body = accepted.get_json()
    assert body["status"] == "completed"
    assert body["payment"]["amountPaid"] == "10"
    assert [(t["txHash"], t["amount"]) for t in body["payment"]["transfers"]] == [(tx_hash, "10")]
    who = f"secret key {two.merchant['secretKey'][:12]}…"
    assert body["payment"]["unexpectedTransfers"] == [dict(reported, acceptedAt=iso(clock()),
                                                           acceptedBy=who)]
    assert [kind for kind, _ in two.events(process_id)] == ["payment.unexpected",
                                                            "payment.completed"]
    assert two.events(process_id)[1][1]["data"]["payment"]["amountPaid"] == "10"
    public = two.client.get(f"/payment-button/process/{process_id}/public",
                            headers={"x-public-key": two.merchant["publicKey"]}).get_json()
    assert public["status"] == "completed"  # a browser sees the acceptance, not who made it
    assert public["payment"]["unexpectedTransfers"] == [dict(reported, acceptedAt=iso(clock()))]
    again = two.accept(process_id, key)
    assert again.status_code == 409 and again.get_json()["code"] == "invalid_state"
    assert "already accepted" in again.get_json()["message"]
    assert two.accept(process_id, f"{tx_hash}:7").get_json()["code"] == "not_found"
    assert two.accept(process_id, "0x12:0").status_code == 404
    assert [kind for kind, _ in two.events(process_id)] == ["payment.unexpected",
                                                            "payment.completed"]

    # collect on amoy moves it to the payout address, though the process chose hardhat.
    collected = json.loads(cli(runner, "collect", "amoy", "--key-file", keys["collector"],
                               "--json").stdout)
    assert collected["error"] is None
    assert [(t["amount"], t["addresses"]) for m in collected["merchants"] for t in m["tokens"]] == [
        ("10", [address])]
    assert two.token_balance(amoy, address) == 0 and two.token_balance(amoy, PAYOUT) == 10 * UNIT
    assert two.token_balance(chain, PAYOUT) == 0

    # The gas coin, sent on hardhat to the same address: no log, so reconcile reports it and
    # collect moves it.
    chain.send(chain.accounts[3], address, value=ETHER)
    chain.mine(CONFIRMATIONS)
    amoy.mine(CONFIRMATIONS)
    two.watch()
    found = two.reconcile("hardhat", exit_code=1)
    assert [(f["kind"], f["processId"], f["address"], f["amount"])
            for f in found["onChainNotRecorded"]] == [
        ("gas coin", process_id, address.lower(), str(ETHER))]
    assert found["recordedNotOnChain"] == found["unsupportedStates"] == []
    cli(runner, "collect", "hardhat", "--key-file", keys["collector"])
    assert two.coin(chain, address) == 0 and two.coin(chain, PAYOUT) == ETHER
    chain.mine(CONFIRMATIONS)
    two.watch()
    for network in ("hardhat", "amoy"):  # both collections confirmed, then proven by reconcile
        cli(runner, "collect", network, "--key-file", keys["collector"], "--dry-run")
    listed = json.loads(cli(runner, "collections", "list", "--json").stdout)
    assert sorted((c["networkId"], c["state"], c["symbol"], c["amount"]) for c in listed) == [
        ("amoy", "confirmed", "TUSD", "10"), ("hardhat", "confirmed", "gas coin", "1")]
    for network in ("hardhat", "amoy"):
        clean = two.reconcile(network)
        assert clean["recordedNotOnChain"] == clean["onChainNotRecorded"] \
            == clean["unsupportedStates"] == []
    assert two.reconcile("amoy")["checked"]["collections"] == 1


def test_an_unregistered_token_is_reported_never_credited_and_cannot_be_accepted(
        two, chain, runner):
    cli(runner, "merchants", "set-xpub", two.merchant["merchantId"], XPUB)
    process_id, address = two.order(3)
    stranger = chain.deploy_token()  # a TestUSD nobody registered
    tx_hash, block = chain.transfer(address, 3 * UNIT, token=stranger)
    chain.mine(CONFIRMATIONS)
    two.watch()
    assert [kind for kind, _ in two.events(process_id)] == ["payment.unexpected"]
    [entry] = two.payment(process_id)["unexpectedTransfers"]
    assert (entry["networkId"], entry["tokenContract"], entry["symbol"], entry["amount"]) == (
        "hardhat", to_checksum_address(stranger), "TUSD", "3")  # what its contract answers
    refused = two.accept(process_id, f"{tx_hash}:0")
    assert refused.status_code == 409
    assert refused.get_json() == {"code": "invalid_state", "message": (
        f"Transfer {tx_hash}:0 is of {stranger}, which is no registered asset on network hardhat:"
        " it cannot be accepted as payment (refund it, or collect it with collect --token).")}
    payment = two.payment(process_id)
    assert payment["amountPaid"] == "0" and payment["unexpectedTransfers"][0]["acceptedAt"] is None
    assert two.api.get(process_id).get_json()["status"] == "pending"
    # Registered afterwards (as another asset of the network), it can be accepted.
    cli(runner, "assets", "add", "usdx", "--network", "hardhat", "--symbol", "TUSD", "--name",
        "Other USD", "--contract", stranger, "--decimals", "6")
    assert two.accept(process_id, f"{tx_hash}:0").get_json()["status"] == "completed"


def _odd_token(chain):
    """A deployed OddToken (tests/chain/token/OddToken.sol): a contract anyone could deploy."""
    return chain.deploy_token(contract="OddToken")


def _call(chain, contract, signature, types, values):
    from eth_abi import encode

    from app.evm.addresses import keccak256

    data = keccak256(signature.encode())[:4] + encode(types, values)
    return chain.send(chain.accounts[0], contract, "0x" + data.hex())


def _topic(address):
    return bytes.fromhex(address[2:].lower().rjust(64, "0"))


def test_a_contract_emitting_garbage_to_a_deposit_address_cannot_jam_the_network(
        two, chain, runner, caplog):
    cli(runner, "merchants", "set-xpub", two.merchant["merchantId"], XPUB)
    process_id, address = two.order(4)
    odd = _odd_token(chain)
    sender, transfer = _topic(chain.accounts[5]), bytes.fromhex(TRANSFER_TOPIC[2:])
    word = (7 * UNIT).to_bytes(32, "big")
    for topics, data in (
        ([transfer, sender, _topic(address), b"\0" * 32], b""),  # an ERC-721 Transfer
        # unpadded
        ([transfer, b"\xff" * 12 + _topic(chain.accounts[5])[12:], _topic(address)], word),
        ([transfer, sender, _topic(address)], word + word),  # data of two words
        ([transfer, sender, _topic(address)], b""),  # no data
    ):
        _call(chain, odd, "emitRaw(bytes32[],bytes)", ["bytes32[]", "bytes"], [topics, data])
    # symbol() and decimals() answer garbage: bytes that are no ABI string, a huge number.
    _call(chain, odd, "setAnswers(uint8,bytes,bytes)", ["uint8", "bytes", "bytes"],
          [0, b"\x01\x02\x03", (2**255).to_bytes(32, "big")])
    spray = _call(chain, odd, "spray(address[],uint256)", ["address[]", "uint256"],
                  [[address], 5 * UNIT])  # a well-formed Transfer of tokens it never had
    reverting, burning = _odd_token(chain), _odd_token(chain)
    for contract, mode in ((reverting, 1), (burning, 2)):
        _call(chain, contract, "setAnswers(uint8,bytes,bytes)", ["uint8", "bytes", "bytes"],
              [mode, b"", b""])
        _call(chain, contract, "spray(address[],uint256)", ["address[]", "uint256"], [[address], 1])
    chain.transfer(address, 4 * UNIT)  # the real payment, beside them
    chain.mine(CONFIRMATIONS)
    two.watch()
    assert "WARNING" not in caplog.text and "ERROR" not in caplog.text
    # The payment, deep when first read, completes in the scan; the others are reported after it.
    assert [kind for kind, _ in two.events(process_id)] \
        == ["payment.completed"] + ["payment.unexpected"] * 3
    payment = two.payment(process_id)
    assert payment["amountPaid"] == "4"
    assert [(u["tokenContract"], u["symbol"], u["amount"], u["baseUnits"], u["txHash"])
            for u in payment["unexpectedTransfers"]] == [
        (to_checksum_address(odd), None, None, str(5 * UNIT), spray["transactionHash"]),
        (to_checksum_address(reverting), None, None, "1",
         payment["unexpectedTransfers"][1]["txHash"]),
        (to_checksum_address(burning), None, None, "1",
         payment["unexpectedTransfers"][2]["txHash"])]
    chain.mine(1)
    two.watch()  # nothing twice, and the network is still read
    assert len(two.events(process_id)) == 4


def test_the_watcher_sees_a_payment_chosen_on_one_network_arrive_on_another_in_one_poll(
        two, chain, amoy, runner):
    """Each network of the mode reads every watched address: a burst of payments chosen on
    hardhat, paid on amoy, are all found in one pass (more addresses than one eth_getLogs takes)."""
    cli(runner, "merchants", "set-xpub", two.merchant["merchantId"], XPUB)
    orders = [two.order(1) for _ in range(5)]
    for _, address in orders:
        amoy.transfer(address, UNIT)
    amoy.mine(CONFIRMATIONS)
    result = runner.invoke(args=["watch-payments", "--once", "--max-addresses", "2"])
    assert result.exit_code == 0, result.output
    for process_id, _ in orders:
        assert [u["networkId"] for u in two.payment(process_id)["unexpectedTransfers"]] == ["amoy"]


# --- reconcile ---------------------------------------------------------------------------------

class _Commits:
    """SQLite: whether anyone committed to the database since this was made (`PRAGMA
    data_version`, read on one connection of its own, changes when another connection commits,
    even a write that changes no value)."""

    def __init__(self, database):
        self.conn = dbutil.open_connection(database) if BACKEND == "sqlite" else None
        self.before = self.version()

    def version(self):
        return self.conn.execute("PRAGMA data_version").fetchone()[0] if self.conn else None

    def none(self) -> bool:
        try:
            return self.version() == self.before
        finally:
            if self.conn:
                self.conn.close()


def _read_only(app, on):
    """PostgreSQL: the test database refuses every write from the next connection on (off: as
    before). The app's pooled connections are closed, so its next ones take the setting."""
    url = app.config["DATABASE"]
    name = url.rsplit("/", 1)[1]
    with dbutil.connect(url) as conn:
        conn.execute("SET default_transaction_read_only = off")
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only ='
                     f' {"on" if on else "off"}')
    app.extensions["db"].close_all()


def test_reconcile_is_clean_after_honest_payments_writes_nothing_and_finds_forged_records(
        two, chain, runner, app, client):
    cli(runner, "merchants", "set-xpub", two.merchant["merchantId"], XPUB)
    paid_id, paid = two.order(5)
    partial_id, partial = two.order(5)
    by_hand_id, _ = two.order(9)
    chain.transfer(paid, 5 * UNIT)
    chain.transfer(partial, 2 * UNIT)
    chain.transfer(partial, UNIT, token=chain.deploy_token())  # unexpected: another token
    chain.mine(CONFIRMATIONS)
    two.watch()
    customer = to_checksum_address(chain.accounts[7])
    refund = two.api.client.post(f"/payment-button/process/{paid_id}/refunds",
                                 json={"amount": 1, "address": customer},
                                 headers={"x-secret-key": two.merchant["secretKey"]}).get_json()
    chain.transfer(chain.accounts[3], UNIT)  # a wallet of the merchant's, not the order's payer
    refund_tx, _ = chain.transfer(customer, UNIT, sender=3)  # the merchant pays it, and names it
    named = two.api.client.post(f"/payment-button/process/{paid_id}/refunds/{refund['refundId']}"
                                "/transaction", json={"txHash": refund_tx},
                                headers={"x-secret-key": two.merchant["secretKey"]})
    assert named.status_code == 200, named.get_data(as_text=True)
    cli(runner, "processes", "complete", by_hand_id)  # by the operator: no money on the chain
    chain.mine(CONFIRMATIONS)
    away_head = two.amoy.head()
    two.watch()
    assert two.api.get(paid_id).get_json()["refunds"][0]["status"] == "completed"

    database = app.config["DATABASE"]
    rows, commits = sorted(dbutil.dump(database).splitlines()), _Commits(database)
    if BACKEND == "postgresql":
        _read_only(app, True)
    clean = runner.invoke(args=["reconcile", "hardhat"])
    report = two.reconcile("hardhat")
    if BACKEND == "postgresql":
        _read_only(app, False)
    assert clean.exit_code == 0, clean.output
    assert clean.output.splitlines()[-1] == "The books match the chain."
    assert (report["recordedNotOnChain"], report["onChainNotRecorded"],
            report["unsupportedStates"]) == ([], [], [])
    assert report["checked"] == {"transfersOnChain": 3, "transfersRecorded": 3, "refunds": 1,
                                 "collections": 0, "completedProcesses": 2, "payoutAddresses": 0}
    assert report["toBlock"] == chain.head() - CONFIRMATIONS + 1
    assert commits.none() and sorted(dbutil.dump(database).splitlines()) == rows
    assert two.amoy.head() == away_head

    # Forged: a transfer that never was completes the partly paid process; the refund's
    # transaction named as another.
    fake_tx = "0x" + "f0" * 32
    with dbutil.connect(database) as conn:
        conn.execute(
            "INSERT INTO transfers (chain_id, tx_hash, log_index, network_id, process_id,"
            " token_contract, from_address, amount, block_number, block_hash, block_timestamp,"
            " status, seen_at, confirmed_at) SELECT chain_id, ?, 0, network_id, process_id,"
            " token_contract, from_address, '3000000', block_number, block_hash, block_timestamp,"
            " status, seen_at, confirmed_at FROM transfers WHERE process_id = ?",
            (fake_tx, partial_id))
        conn.execute("UPDATE processes SET status = 'completed', completed_by = 'payment'"
                     " WHERE id = ?", (partial_id,))
        conn.execute("UPDATE refunds SET tx_hash = ? WHERE id = ?",
                     ("0x" + "e1" * 32, refund["refundId"]))
    found = two.reconcile("hardhat", exit_code=1)
    assert [(f["kind"], f["processId"], f["refundId"], f["txHash"], f["reason"])
            for f in found["recordedNotOnChain"]] == [
        ("transfer", partial_id, None, fake_tx, "not on the chain"),
        ("refund", paid_id, refund["refundId"], "0x" + "e1" * 32,
         "its transaction is not on the chain")]
    assert found["onChainNotRecorded"] == []
    assert [(f["kind"], f["processId"], f["reason"]) for f in found["unsupportedStates"]] == [
        ("refund", paid_id, "completed without its transfer on the chain"),
        ("process", partial_id, "completed with 2000000 base units confirmed and accepted,"
                                " less than the 5000000 due (tolerance 0 %)")]
    text = runner.invoke(args=["reconcile", "hardhat"])
    assert text.exit_code == 1
    assert f"  - transfer (process {partial_id}), {fake_tx}:0 in block" in text.output
    assert text.output.splitlines()[-1] == "The books do not match the chain."


def test_reconcile_finds_a_transfer_the_watcher_never_read(app, client, runner, chain, amoy,
                                                           clock, merchant):
    two = TwoNetworks(app, client, runner, chain, amoy, clock, merchant, both=False)
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    process_id, address = two.order(2)
    tx_hash, block = amoy.transfer(address, 2 * UNIT)  # the same xpub address, on chain 80002
    amoy.mine(CONFIRMATIONS)
    two.add_away()  # added with its start block past the transfer: the watcher never reads it
    amoy.mine(CONFIRMATIONS)
    two.watch()
    assert two.payment(process_id)["unexpectedTransfers"] == []
    found = two.reconcile("amoy", exit_code=1)
    assert found["fromBlock"] <= block < found["toBlock"]
    assert [(f["kind"], f["processId"], f["txHash"], f["logIndex"], f["blockNumber"], f["amount"],
             f["reason"]) for f in found["onChainNotRecorded"]] == [
        ("transfer", process_id, tx_hash, 0, block, str(2 * UNIT), "not recorded")]
    assert found["recordedNotOnChain"] == found["unsupportedStates"] == []
    assert two.reconcile("hardhat")["onChainNotRecorded"] == []
    past = runner.invoke(args=["reconcile", "amoy", "--from-block", str(block + 1)])
    assert past.exit_code == 0, past.output
    wrong = runner.invoke(args=["reconcile", "amoy", "--to-block", str(amoy.head() + 5)])
    assert wrong.exit_code == 1 and "above the node's head" in wrong.output
    assert runner.invoke(args=["reconcile", "nope"]).output == (
        f"Error: No network nope in {runner.app.config['DATABASE']}.\n")
