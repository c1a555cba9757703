"""Money is credited only for what truly arrived on the right chain, on real nodes: the session's
Hardhat node (chain id 31337, a test network) and a second one answering for chain id 137 (a live
network's id, tests/support/chain_node.py). A node of another chain behind a network's URL is read
no further; test and live networks never mix; a counted transfer that a deep reorganisation removes
is reversed (`payment.reversed`); a pending one removed before it confirms gets no event of its
own."""
import json
import logging

import pytest
from support import dbutil
from support.chain_shop import NETWORK, OTHER_XPUB, Shop, add_network, cli

from app.chain.watcher import Watcher
from app.domain.processes import expire_due

CONFIRMATIONS = 3
UNIT = 10**6
LIVE = "polygon"  # the chain-137 node's network


def _shop(app, client, runner, chain, clock, merchant, **kwargs):
    shop = Shop(app, client, runner, chain, clock, merchant,
                **kwargs)
    shop.sync_clock()
    return shop


def _network_row(app, network_id):
    return dbutil.query(app.config["DATABASE"],
                        "SELECT scanned_block, head_block FROM networks WHERE id = ?",
                        network_id)[0]


def _kept_blocks(app, network_id):
    return dbutil.query(app.config["DATABASE"],
                        "SELECT number, hash FROM chain_blocks WHERE network_id = ?"
                        " ORDER BY number", network_id)


# --- The node behind a network's URL must be that network's chain --------------------------------

def test_a_node_of_another_chain_is_read_no_further_and_reading_resumes(
        app, client, runner, chain, live_chain, clock, make_merchant, proxy, caplog):
    add_network(runner, chain, confirmations=CONFIRMATIONS, rpc_url=proxy.url)
    shop = _shop(app, client, runner, chain, clock, make_merchant())
    process_id, address = shop.order(6)
    shop.watch()
    position, kept = _network_row(app, NETWORK), _kept_blocks(app, NETWORK)

    # The URL now reaches the chain-137 node, further ahead than the right one; the same token
    # (same address there) pays the deposit address 6.00.
    proxy.upstream = live_chain.url
    live_chain.mine(max(0, chain.head() - live_chain.head()) + 10)
    live_chain.transfer(address, 6 * UNIT)
    live_chain.mine(CONFIRMATIONS)
    proxy.calls.clear()
    requests_before = proxy.requests
    caplog.clear()
    shop.watch(exit_code=1)
    port = proxy.server.server_address[1]
    assert [(r.levelno, r.getMessage())
            for r in caplog.records if r.levelno >= logging.WARNING] == [
        (logging.ERROR, f"watch {NETWORK}: http://127.0.0.1:{port} answers for chain id 137,"
                        " not the network's chain id 31337: nothing read from it; retry in 1.0s")]
    # One request: the first batch (the chain id, checked before anything else of it is looked at,
    # with the head's block and the kept one); nothing else was asked
    assert proxy.requests - requests_before == 1
    assert proxy.calls["eth_chainId"] == 1 and set(proxy.calls) <= {
        "eth_chainId", "eth_getBlockByNumber", "eth_getBlockByNumber:latest"}
    assert shop.event_types(process_id) == [] and shop.transfers(process_id) == []
    assert _network_row(app, NETWORK) == position and _kept_blocks(app, NETWORK) == kept
    payment = shop.process(process_id)["payment"]
    assert payment["amountPaid"] == "0" and payment["transfers"] == []

    # `networks add` asks the node too, --start-block or not.
    for start in ([], ["--start-block", "1"]):
        refused = runner.invoke(args=["networks", "add", "other", "--name", "Other", "--chain-id",
                                      "1337", "--rpc-url", proxy.url, *start])
        assert refused.exit_code == 1
        assert refused.output == (f"Error: The node at http://127.0.0.1:{port} serves chain id 137,"
                                  " not 1337.\n")

    # The right node again: reading goes on where it stopped; only its own transfer counts.
    proxy.upstream = chain.url
    tx_hash, _ = chain.transfer(address, 6 * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    caplog.clear()
    shop.watch()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert shop.event_types(process_id) == ["payment.completed"]
    payment = shop.events(process_id)[0][1]["data"]["payment"]
    assert payment["amountPaid"] == "6" and payment["chainId"] == 31337
    assert [t["txHash"] for t in payment["transfers"]] == [tx_hash]


def test_a_node_switched_during_a_poll_reverses_nothing(app, client, runner, chain, live_chain,
                                                       clock, make_merchant, proxy, caplog):
    """A deep reorganisation is met; before a counted transfer is reversed the node is asked its
    chain id again, and the URL now reaches the chain-137 node: nothing is reversed or rewound
    until the right node answers, which then reverses the transfer once."""
    add_network(runner, chain, confirmations=CONFIRMATIONS, rpc_url=proxy.url)
    shop = _shop(app, client, runner, chain, clock, make_merchant())
    process_id, address = shop.order(6)
    shop.watch()
    before = chain.snapshot()
    chain.transfer(address, 6 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed"]
    chain.revert(before)
    chain.mine(CONFIRMATIONS + 5)
    position, kept = _network_row(app, NETWORK), _kept_blocks(app, NETWORK)

    proxy.before("eth_chainId", 1, lambda: setattr(proxy, "upstream", live_chain.url))
    caplog.clear()
    shop.watch(exit_code=1)
    assert "answers for chain id 137, not the network's chain id 31337" in caplog.text
    assert shop.event_types(process_id) == ["payment.completed"]
    assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed"]
    assert _network_row(app, NETWORK)[0] == position[0] and _kept_blocks(app, NETWORK) == kept

    proxy.upstream = chain.url
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed", "payment.reversed"]
    assert [t["status"] for t in shop.transfers(process_id)] == ["reversed"]


# --- Test and live networks ----------------------------------------------------------------------

@pytest.fixture
def two_modes(app, client, runner, chain, live_chain, clock, make_merchant):
    """The test chain (31337: a test network whatever the flag) and the chain-137 node as a live
    network; a test-mode merchant and a live one, each with its wallet."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    add_network(runner, live_chain, confirmations=CONFIRMATIONS, network=LIVE, name="Polygon PoS",
                chain_id=137)
    test = _shop(app, client, runner, chain, clock, make_merchant())
    live = _shop(app, client, runner, live_chain, clock, make_merchant("Live shop", live=True),
                 xpub=OTHER_XPUB)
    return test, live


def _assets(shop):
    response = shop.client.get("/payment-button/assets",
                               headers={"x-public-key": shop.merchant["publicKey"]})
    assert response.status_code == 200
    return response.get_json()["data"]


def _offered(network_id, name, chain_id):
    return [{"id": "tusd", "symbol": "TUSD", "name": "Test USD", "networks": [
        {"id": network_id, "name": name, "chainId": chain_id, "confirmations": CONFIRMATIONS,
         "finality": "confirmations"}]}]


def test_each_mode_is_offered_and_paid_on_its_own_networks_only(two_modes, runner, chain,
                                                                live_chain):
    test, live = two_modes
    listed = {n["id"]: n["testnet"] for n in
              json.loads(cli(runner, "networks", "list", "--json").output)}
    assert listed == {NETWORK: True, LIVE: False}
    assert _assets(test) == _offered(NETWORK, "Hardhat", 31337)
    assert _assets(live) == _offered(LIVE, "Polygon PoS", 137)

    for shop, other, mode, kind in ((live, NETWORK, "live", "a test"),
                                    (test, LIVE, "test", "a live")):
        process_id = shop.preorder(5)
        refused = shop.confirm(process_id, other)
        assert refused.status_code == 400
        message = (f"Network '{other}' is {kind} network: {mode}-mode payments cannot use it (see"
                   " GET /payment-button/assets).")
        assert refused.get_json() == {"code": "validation_error",
                                      "message": f"networkId: {message}",
                                      "errors": {"networkId": [message]}}
        assert shop.process(process_id)["payment"] is None

    live_id, live_address = live.order(5, network=LIVE)
    test_id, test_address = test.order(5)
    live_chain.transfer(live_address, 5 * UNIT)
    live_chain.mine(CONFIRMATIONS)
    chain.transfer(test_address, 5 * UNIT)
    chain.mine(CONFIRMATIONS)
    live.watch()
    assert live.event_types(live_id) == ["payment.completed"]
    assert live.events(live_id)[0][1]["data"]["payment"]["chainId"] == 137
    assert test.event_types(test_id) == ["payment.completed"]


def test_test_tokens_never_pay_a_live_process(app, client, runner, chain, clock, make_merchant):
    """A live process whose payment row is on a test network (a database from before networks had
    modes) is never credited by transfers there: by a watcher reading the whole watched set, or
    by one that reads only what was added since its last poll."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    live = _shop(app, client, runner, chain, clock, make_merchant("Live shop", live=True))
    assert _assets(live) == []
    process_id = live.preorder(6)
    refused = live.confirm(process_id)
    assert refused.status_code == 400 and list(refused.get_json()["errors"]) == ["networkId"]

    # Such a database's confirm: the same row the test merchant's confirm writes.
    address = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"  # m/44'/60'/0'/0/0 of chain_shop.XPUB
    with app.app_context(), Watcher.from_app(app) as watcher:
        chain.mine(1)
        watcher.poll_network(NETWORK)  # the whole set, read before the row exists
        dbutil.execute(
            app.config["DATABASE"],
            "INSERT INTO payments (process_id, merchant_id, address_index, address, asset_id,"
            " network_id, chain_id, token_contract, decimals, amount_due, created_at, updated_at)"
            " VALUES (?, ?, 0, ?, 'tusd', ?, 31337, ?, 6, '6000000', ?, ?)",
            process_id, live.merchant["merchantId"], address, NETWORK, chain.token, clock(),
            clock())
        assert dbutil.scalar(app.config["DATABASE"], "SELECT count(*) FROM watch_list"
                             " WHERE process_id = ?", process_id) == 1  # watched, in the live set
        chain.transfer(address, 6 * UNIT)
        chain.mine(CONFIRMATIONS)
        watcher.poll_network(NETWORK)  # reads the rows added since: this one is not watched
    assert live.event_types(process_id) == [] and live.transfers(process_id) == []
    live.watch()  # a watcher of its own, reading the whole set
    assert live.event_types(process_id) == [] and live.transfers(process_id) == []
    process = live.process(process_id)
    assert process["status"] == "pending" and process["payment"]["amountPaid"] == "0"


# --- Reorganisations deeper than the confirmations -----------------------------------------------

@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    return _shop(app, client, runner, chain, clock, make_merchant())


def test_a_counted_transfer_that_leaves_the_chain_is_reversed_once(shop, chain, caplog, app):
    completed_id, completed_address = shop.order(6)
    partial_id, partial_address = shop.order(10)
    shop.watch()
    before = chain.snapshot()
    chain.transfer(completed_address, 6 * UNIT)
    chain.transfer(partial_address, 4 * UNIT)
    chain.mine(CONFIRMATIONS + 7)  # 10 confirmations and more
    shop.watch()
    assert shop.event_types(completed_id) == ["payment.completed"]
    assert shop.event_types(partial_id) == ["payment.partial"]

    chain.revert(before)  # a longer chain without either transfer
    chain.mine(CONFIRMATIONS + 12)
    caplog.clear()
    shop.watch()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        f"watch {NETWORK}: reorganisation deeper than {CONFIRMATIONS} confirmations: 2 confirmed"
        " transfers left the chain (payment.reversed)"]
    for process_id, status, due in ((completed_id, "completed", "6"),
                                    (partial_id, "pending", "10")):
        assert shop.event_types(process_id)[1:] == ["payment.reversed"]
        reversed_ = shop.events(process_id)[1][1]["data"]
        assert reversed_["status"] == status  # the process keeps its state
        payment = reversed_["payment"]
        assert (payment["amountDue"], payment["amountPaid"],
                payment["amountPending"]) == (due, "0", "0")
        assert payment["transfers"] == []
        shown = shop.process(process_id)
        assert shown["status"] == status and shown["payment"] == payment
        assert [t["status"] for t in shop.transfers(process_id)] == ["reversed"]

    shop.watch()  # once
    assert shop.event_types(completed_id) == ["payment.completed", "payment.reversed"]

    # The customer pays the partial order again on the chain as it is: only that counts.
    tx_hash, _ = chain.transfer(partial_address, 10 * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.event_types(partial_id) == ["payment.partial", "payment.reversed",
                                            "payment.completed"]
    payment = shop.events(partial_id)[-1][1]["data"]["payment"]
    assert payment["amountPaid"] == "10" \
        and [t["txHash"] for t in payment["transfers"]] == [tx_hash]


def test_a_reorganisation_within_the_confirmations_reverses_nothing(shop, chain):
    """Only a counted transfer whose own block left is reversed: one in a block below the fork
    stays counted, though a kept hash above it was replaced."""
    process_id, address = shop.order(6)
    chain.transfer(address, 6 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed"]
    fork = chain.snapshot()
    chain.mine(2)
    shop.watch()
    chain.revert(fork)
    chain.mine(4)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed"]
    assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed"]


def test_a_pending_transfer_orphaned_before_confirming_gets_no_event_of_its_own(shop, chain, clock,
                                                                              app):
    """docs/payments.md: payment.pending never promised money; the transfer leaves the API at once
    and the process's next event carries it (here the expiry, nothing else having arrived)."""
    process_id, address = shop.order(9)
    expires_at = clock() + 1800  # PROCESS_TTL_SECONDS after its creation
    before = chain.snapshot()
    chain.transfer(address, 9 * UNIT)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    assert shop.process(process_id)["payment"]["amountPending"] == "9"

    chain.revert(before)
    chain.mine(CONFIRMATIONS + 2)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    payment = shop.process(process_id)["payment"]
    assert (payment["amountPaid"], payment["amountPending"], payment["transfers"]) == ("0", "0", [])
    assert [t["status"] for t in shop.transfers(process_id)] == ["orphaned"]

    clock.now = expires_at + 1
    chain.next_timestamp(clock.now)
    chain.mine(1)
    shop.watch()
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 1
    assert shop.event_types(process_id) == ["payment.pending", "process.expired"]
    expired = shop.events(process_id)[-1][1]["data"]
    assert expired["status"] == "expired"
    assert (expired["payment"]["amountPending"], expired["payment"]["transfers"]) == ("0", [])


def test_set_mode_takes_a_network_from_a_mode_at_once_even_for_a_running_watcher(
        two_modes, app, runner, live_chain):
    """The live network (chain 137) made a test network: the operator is told which pending live
    processes chose it, and a watcher that keeps its watched set between polls no longer credits
    them there (what arrived meanwhile was paid on a test network); made live again, it does."""
    _, live = two_modes
    process_id, address = live.order(5, network=LIVE)
    with app.app_context(), Watcher.from_app(app) as watcher:
        live_chain.mine(1)
        watcher.poll_network(LIVE)  # reads the watched set, kept for the polls that follow
        result = cli(runner, "networks", "set-mode", LIVE, "test")
        assert result.output.splitlines()[1:] == [
            "Warning: 1 pending live-mode processes chose it: their payments on it are no longer"
            " credited."]
        live_chain.transfer(address, 2 * UNIT)
        live_chain.mine(CONFIRMATIONS)
        watcher.poll_network(LIVE)
        assert live.event_types(process_id) == [] and live.transfers(process_id) == []

        assert len(cli(runner, "networks", "set-mode", LIVE, "live").output.splitlines()) == 1
        tx_hash, _ = live_chain.transfer(address, 5 * UNIT)
        live_chain.mine(CONFIRMATIONS)
        watcher.poll_network(LIVE)
    assert live.event_types(process_id) == ["payment.completed"]
    assert [t["tx_hash"] for t in live.transfers(process_id)] == [tx_hash]
