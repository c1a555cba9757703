"""Two `collect` runs at once, on the real Hardhat node: an address one run includes is claimed in
the database (its collection's items, committed before the transaction is sent) and left out by
the other run until that collection is confirmed or reverted, so no gas is ever spent twice on one
address. The interleavings are forced (a run paused inside its RPC calls while the other runs),
and two CLI processes race for real; every amount, nonce and gas balance is checked exactly. The
console's browser-wallet call leaves the addresses a run holds out the same way."""
import html
import json
import re
import threading

import pytest
from support import dbutil
from support.chain_shop import NETWORK
from test_payout_collect import (  # noqa: F401  (fixtures)
    ETHER,
    GAS_COIN,
    _collections,
    _console,
    _funded,
    _pending_transactions,
    _start_collect,
    _wait,
    keys,
    new_address,
    payout_shop,
)

from app.chain import collect as collector
from app.chain import wallet_collections
from app.data import payments as payment_rows
from app.data.payouts import WALLET_CLAIM_SECONDS
from app.evm import forwarder, rpc
from app.evm.signer import read_key_file


class Paused(rpc.Client):
    """A node client that stops at its first call of `method` until `go` is set (`reached` says it
    got there): the run it serves is held at that point of its work."""

    def __init__(self, url, method, **kwargs):
        super().__init__(url, **kwargs)
        self.method, self.reached, self.go = method, threading.Event(), threading.Event()

    def call(self, method, params=()):
        if method == self.method and not self.go.is_set():
            self.reached.set()
            assert self.go.wait(60)
        return super().call(method, params)


def _paused_run(app, shop, clock, method, key="operator", **kwargs):
    """Start a `collect` run in a thread, held at its first `method` call: (client, result)."""
    made, result = [], {}

    def factory(url):
        made.append(Paused(url, method))
        return made[0]

    def run():
        try:
            result["report"] = collector.collect(app.extensions["db"], NETWORK, shop.keys[key],
                                                 now=clock.now, client_factory=factory, **kwargs)
        except BaseException as e:  # shown by the test
            result["error"] = e
        finally:
            app.extensions["db"].release()

    thread = threading.Thread(target=run)
    thread.start()
    _wait(lambda: made and made[0].reached.is_set(), timeout=60)
    result["thread"] = thread
    return made[0], result


def _finish(client, result):
    client.go.set()
    result["thread"].join(60)
    assert not result["thread"].is_alive()
    assert "error" not in result, result.get("error")
    return result["report"]


def _account(shop, chain, key):
    address = read_key_file(shop.keys[key]).address
    return address, int(chain.rpc("eth_getTransactionCount", address, "latest"), 16), \
        shop.coin_balance(address)


@pytest.mark.parametrize("where", ["eth_estimateGas", "eth_getTransactionCount"],
                         ids=["before its estimate", "before its claim"])
def test_a_run_that_read_before_the_other_sent_spends_nothing_on_its_addresses(shop, chain, app,
                                                                              clock, where):
    """Run B reads the balances (the address full), then is held: before its gas estimate (its
    first look found nothing claimed), or just before the transaction that claims and signs (its
    estimate done). Run A collects the address meanwhile (pending, mined, not yet deep). B, let
    go, finds A's claim: it sends nothing, signs no nonce, pays no gas, and exits without error."""
    payout, address = _funded(shop, chain, "payout-held")
    sender, nonce, balance = _account(shop, chain, "operator")
    client, result = _paused_run(app, shop, clock, where)
    first = shop.collect_json()  # run A, with the collector's key
    [sent] = first["transactions"]
    assert sent["status"] == "pending" and sent["blockNumber"] is not None
    second = _finish(client, result)
    assert second.error is None and second.batches == [] and second.settled == []
    assert second.held == {address}
    assert _account(shop, chain, "operator") == (sender, nonce, balance)  # no transaction, no gas
    assert [(state, mined) for _, state, mined in _collections(app.config["DATABASE"])] == [
        ("pending", True)]
    shop.confirm()
    assert shop.records() == {(address, chain.token.lower()): 5_000_000, (address, GAS_COIN): ETHER}
    assert shop.token_balance(payout) == 5_000_000 and shop.coin_balance(payout) == ETHER


def test_a_run_whose_balances_predate_a_confirmed_collection_leaves_its_addresses_out(shop, chain,
                                                                                     app, clock):
    """B read the balances before A's collection was mined; A's is confirmed (deep enough, the
    watcher's pass) before B goes on: what B read is gone, B sends nothing."""
    _, address = _funded(shop, chain, "payout-confirmed")
    sender, nonce, balance = _account(shop, chain, "operator")
    client, result = _paused_run(app, shop, clock, "eth_estimateGas")
    shop.collect_json()
    shop.confirm()
    assert [state for _, state, _ in _collections(app.config["DATABASE"])] == ["confirmed"]
    second = _finish(client, result)
    assert second.error is None and second.batches == [] and second.held == {address}
    assert _account(shop, chain, "operator") == (sender, nonce, balance)
    assert shop.records() == {(address, chain.token.lower()): 5_000_000, (address, GAS_COIN): ETHER}


def test_an_address_is_left_out_until_its_collection_is_confirmed(shop, chain, app):
    """A collects one merchant (`--merchant`); a late payment reaches that address while A's
    collection is mined but not yet deep. B, for every merchant, moves only the other merchant's
    address and leaves that one out (saying so); a run with nothing else to do exits 0 sending
    nothing. Once A's is confirmed, the next run collects the late payment."""
    _, held = _funded(shop, chain, "payout-a")
    payout_b, free = _funded(shop, chain, "payout-b", tokens=7_000_000, coin=2 * ETHER)
    merchant_a = dbutil.scalar(app.config["DATABASE"], "SELECT merchant_id FROM payments"
                               " WHERE address = ?", held)
    shop.collect_json("--merchant", merchant_a)
    chain.transfer(held, 1_500_000)
    second = shop.collect_json(key="operator")
    assert second["leftOut"] == [held]
    [tx] = second["transactions"]
    assert tx["addresses"] == 1 and tx["status"] == "pending"
    assert [(m["payoutAddresses"], [(t["addresses"], t["baseUnits"]) for t in m["tokens"]])
            for m in second["merchants"]] == [
        ([payout_b], [([free], "7000000"), ([free], str(2 * ETHER))])]
    before = _account(shop, chain, "operator")
    shown = shop.collect(key="operator")
    assert shown.output.endswith(
        f"Nothing to collect on {NETWORK}.\nLeft out 1 address(es) held by a collection not"
        " confirmed yet (another run's, or an earlier one's): a run after it is confirmed or"
        " reverted collects what they hold then.\n"), shown.output
    assert _account(shop, chain, "operator") == before
    shop.confirm()
    token = chain.token.lower()
    assert shop.records() == {(held, token): 5_000_000, (held, GAS_COIN): ETHER,
                              (free, token): 7_000_000, (free, GAS_COIN): 2 * ETHER}
    again = shop.collect_json(key="operator")
    assert again["leftOut"] == [] and [t["addresses"] for t in again["transactions"]] == [1]
    shop.confirm()
    assert shop.records()[(held, token)] == 6_500_000
    nothing = shop.collect_json()
    assert (nothing["transactions"], nothing["leftOut"], nothing["error"]) == ([], [], None)


def test_two_processes_at_once_never_spend_gas_on_one_address(shop, chain, app):
    """Two `collect` processes, two keys, started together over six merchants' addresses:
    each address is moved by exactly one transaction, every transaction sent moved something, and
    the keys' transactions are exactly the recorded collections."""
    funded = [_funded(shop, chain, f"payout-race-{i}", tokens=1_000_000 + 10_000 * i,
                      coin=ETHER + i)
              for i in range(6)]
    before = {key: _account(shop, chain, key) for key in ("collector", "operator")}
    database = app.config["DATABASE"]
    runs = [_start_collect(shop, database, key) for key in ("collector", "operator")]
    try:
        reports = [json.loads(run.communicate(timeout=120)[0]) for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
    assert [run.returncode for run in runs] == [0, 0]
    assert [r["error"] for r in reports] == [None, None]
    shop.confirm()
    sent = {key: int(chain.rpc("eth_getTransactionCount", before[key][0], "latest"), 16)
            - before[key][1] for key in before}
    rows = dbutil.query(database, "SELECT c.id, c.sender, count(DISTINCT i.address)"
                        " FROM collections c LEFT JOIN collection_items i ON i.collection_id = c.id"
                        " GROUP BY c.id, c.sender")
    assert sum(sent.values()) == len(rows) and all(n > 0 for _, _, n in rows)
    for key in before:
        assert sent[key] == sum(1 for _, sender, _ in rows if sender == before[key][0])
    moved = dbutil.query(database, "SELECT address, count(*) FROM collection_items"
                         " WHERE lower(token) = ? GROUP BY address", chain.token.lower())
    assert sorted(moved) == sorted((address, 1) for _, address in funded)
    assert shop.records() == {
        **{(address, chain.token.lower()): 1_000_000 + 10_000 * i
           for i, (_, address) in enumerate(funded)},
        **{(address, GAS_COIN): ETHER + i for i, (_, address) in enumerate(funded)}}
    for key in before:  # a key that sent nothing paid nothing
        if sent[key] == 0:
            assert _account(shop, chain, key) == before[key]


class ReadThen(rpc.Client):
    """A node client that calls `then()` once, right after its first JSON-RPC batch (the deposit
    balances' read), before handing back what it read."""

    def __init__(self, url, then):
        super().__init__(url)
        self.then = then

    def batch(self, calls):
        found = super().batch(calls)
        then, self.then = self.then, None
        if then is not None:
            then()
        return found


def _section(console):
    """The payouts page's section of the network, as its text (tags dropped, spaces joined), and
    whether it offers the browser wallet's call."""
    page = console.get("/dashboard/payouts")
    assert page.status_code == 200
    part = page.text.split(f'id="network-{NETWORK}"', 1)[1].split("</section>", 1)[0]
    return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(part)).split()), "data-wallet-tx" in part


def test_the_wallet_s_call_leaves_out_an_address_a_run_claimed_after_the_balances_were_read(
        shop, chain, app):
    """The payouts page reads the balances (the address full); a `collect` run claims and sends
    the address before the page builds the wallet's call. The holds are read after the balances,
    so the run's claim is seen: the address is left out (held), nothing is offered."""
    _, address = _funded(shop, chain, "payout-wallet-race")
    db = app.extensions["db"]
    network = payment_rows.get_network(db.connection(), NETWORK)
    merchant_id = dbutil.scalar(app.config["DATABASE"], "SELECT merchant_id FROM payments"
                                " WHERE address = ?", address)
    runs = []
    client = ReadThen(network.rpc_url, lambda: runs.append(shop.collect_json()))
    waits, held = wallet_collections.offer(db, network, merchant_id, client, shop.clock())
    [sent] = runs[0]["transactions"]  # the run collected it while the page was reading
    assert sent["status"] == "pending" and held == {address}
    assert (waits.deposits, waits.totals, waits.calldata) == ([], {}, None)
    shop.confirm()  # confirmed: what the run read is gone, nothing is left, nothing is held
    waits, held = wallet_collections.offer(db, network, merchant_id,
                                           rpc.Client(network.rpc_url), shop.clock())
    assert (waits.deposits, held) == ([], set())


def test_the_payouts_page_does_not_offer_an_address_a_collection_in_progress_holds(shop, chain,
                                                                                  app):
    """A late payment reaches an address while the run that collected it is mined but not deep:
    the page leaves it out of the wallet's call and says it is held. Once that collection is
    confirmed, the page offers what the address holds again."""
    merchant = shop.merchant(new_address("payout-page-held"))
    _, address = shop.order(merchant, 6)
    chain.transfer(address, 6_000_000)
    shop.confirm()
    console = _console(shop, merchant)
    text, offered = _section(console)
    assert "Waiting in 1 deposit address: 6 TUSD" in text and offered
    [sent] = shop.collect_json()["transactions"]
    assert sent["status"] == "pending"
    chain.transfer(address, 1_500_000)  # the late payment, at an address the run holds
    text, offered = _section(console)
    assert "Nothing waits to be collected." in text and not offered
    assert "1 deposit address left out: held by a collection in progress" in text
    shop.confirm()
    text, offered = _section(console)
    assert "Waiting in 1 deposit address: 1.5 TUSD" in text and offered
    assert "left out" not in text


def _paid_with_wallet_call(shop, chain, label):
    """A merchant's 6 TUSD paid and confirmed, its owner logged in: (merchant, deposit address,
    console, (factory, data) of the call its payouts page offers the browser wallet)."""
    merchant = shop.merchant(new_address(f"payout-wallet-{label}"))
    _, address = shop.order(merchant, 6)
    chain.transfer(address, 6_000_000)
    shop.confirm()
    console = _console(shop, merchant)
    page = console.get("/dashboard/payouts").text
    return merchant, address, console, (re.search(r'data-to="([^"]+)"', page).group(1),
                                        html.unescape(re.search(r'data-data="([^"]+)"',
                                                                page).group(1)))


def _record(console, tx_hash):
    """The payouts page's form posting the hash the browser wallet answered."""
    page = console.get("/dashboard/payouts").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    return console.post(f"/dashboard/payouts/{NETWORK}/collections",
                        data={"csrf_token": token, "tx_hash": tx_hash})


def test_a_browser_wallet_s_collection_holds_its_addresses_before_it_is_mined(shop, chain, app):
    """The wallet sends the page's call (not mined yet) and the page records its hash: the address
    is claimed at once, so a `collect` run meanwhile leaves it out and spends no gas on it. Another
    merchant cannot record that hash (it collects none of its addresses): it neither hides the
    collection from its owner nor claims anything. Once mined and deep, the wallet's collection
    counts what it moved, once."""
    database = app.config["DATABASE"]
    merchant, address, console, (factory, call) = _paid_with_wallet_call(shop, chain, "held")
    stranger = _console(shop, shop.merchant(new_address("payout-wallet-other")), app.test_client())
    chain.rpc("evm_setAutomine", False)
    try:
        tx_hash = chain.rpc("eth_sendTransaction", {"from": chain.accounts[2], "to": factory,
                                                    "data": call})
        refused = _record(stranger, tx_hash)
        assert refused.status_code == 400
        assert (f"Transaction {tx_hash} collects none of your deposit addresses on Hardhat."
                in html.unescape(refused.text))
        assert _record(console, tx_hash).status_code == 303
        assert dbutil.query(database, "SELECT tx_hash, status, recorded_by FROM collections") == [
            (tx_hash, "pending", merchant["merchantId"])]
        run = shop.collect_json()
        assert (run["transactions"], run["leftOut"]) == ([], [address])
        assert _pending_transactions(chain) == [tx_hash]
        chain.rpc("evm_mine")
    finally:
        chain.rpc("evm_setAutomine", True)
    assert shop.token_balance(address) == 0
    shop.confirm()
    assert _collections(database) == [(1, "confirmed", True)]
    assert shop.records() == {(address, chain.token.lower()): 6_000_000}
    assert _record(console, tx_hash).status_code == 303  # recorded already: nothing changes
    assert dbutil.scalar(database, "SELECT count(*) FROM collections") == 1


def test_a_hand_made_call_holds_only_the_recording_merchant_s_addresses(shop, chain, app):
    """A call naming the merchant's deposit address and another merchant's, recorded by the
    merchant while not mined: only its own address is held (a transaction never mined must not
    keep another merchant's money from `collect`), so a run meanwhile collects the other's. Once
    mined, what each transaction moved is counted from its receipt, once."""
    database = app.config["DATABASE"]
    payouts = [new_address("payout-hand-made"), new_address("payout-hand-made-other")]
    merchants = [shop.merchant(payout) for payout in payouts]
    addresses = [shop.order(merchant, 6)[1] for merchant in merchants]
    for address in addresses:
        chain.transfer(address, 6_000_000)
    shop.confirm()
    salts = [forwarder.salt(dbutil.scalar(database, "SELECT process_id FROM payments"
                                          " WHERE address = ?", address)) for address in addresses]
    call = forwarder.collect_calldata([chain.token], list(zip(payouts, salts, strict=True)))
    factory = dbutil.scalar(database, "SELECT address FROM network_factories")
    console = _console(shop, merchants[0])
    chain.rpc("evm_setAutomine", False)
    try:
        tx_hash = chain.rpc("eth_sendTransaction", {"from": chain.accounts[2], "to": factory,
                                                    "data": "0x" + call.hex()})
        assert _record(console, tx_hash).status_code == 303
        assert dbutil.query(database, "SELECT address FROM collection_items") == [(addresses[0],)]
        run = shop.collect_json("--receipt-timeout", "1", exit_code=1)  # not mined yet
        assert run["leftOut"] == [addresses[0]]
        assert [t["addresses"] for t in run["transactions"]] == [1]
        chain.rpc("evm_mine")
    finally:
        chain.rpc("evm_setAutomine", True)
    shop.confirm()
    assert [state for _, state, _ in _collections(database)] == ["confirmed", "confirmed"]
    assert shop.records() == {(address, chain.token.lower()): 6_000_000 for address in addresses}


def test_a_browser_wallet_s_collection_its_node_dropped_holds_its_address_an_hour_at_most(
        shop, chain, app):
    """The wallet's transaction is recorded, then dropped by the node (a fee too low, a wallet
    that never sends it again): nothing can send it again, so its claim lapses after
    WALLET_CLAIM_SECONDS and a `collect` run then moves the money; until then it is left out."""
    _, address, console, (factory, call) = _paid_with_wallet_call(shop, chain, "dropped")
    chain.rpc("evm_setAutomine", False)
    try:
        tx_hash = chain.rpc("eth_sendTransaction", {"from": chain.accounts[2], "to": factory,
                                                    "data": call})
        assert _record(console, tx_hash).status_code == 303
        assert chain.rpc("hardhat_dropTransaction", tx_hash) is True
    finally:
        chain.rpc("evm_setAutomine", True)
    run = shop.collect_json()
    assert (run["transactions"], run["leftOut"]) == ([], [address])
    shop.clock.advance(WALLET_CLAIM_SECONDS + 1)
    run = shop.collect_json()
    assert [(t["status"], t["addresses"]) for t in run["transactions"]] == [("pending", 1)]
    shop.confirm()
    assert shop.records() == {(address, chain.token.lower()): 6_000_000}
    assert shop.token_balance(address) == 0
