"""Nothing is credited on one node's word (the contract, "Live payments": an RPC provider is a pool
of nodes). The network's URL is the proxy of tests/support/fake_rpc.py in front of the real Hardhat
node; some of its requests are answered by a node left on an abandoned fork (recorded from the real
node before a reorganisation), by the chain-137 node (another chain, the same token address), or
spoiled: logs marked `"removed": true`, a hostile `data` word. Nothing of such a read is recorded: a
chain that moved under it is read again at once, a second move or any other spoiled answer is a
fault of the poll; honest answers then credit the real payment, and only it. A transfer of value 0
is no payment: no record, no event, no lock of the customer's choice."""
import json
import logging

import pytest
from support.chain_shop import NETWORK, cli, open_shop
from support.fake_rpc import HOSTILE_DATA, SplittingPool, StaleFork

from app.chain.watcher import Watcher

CONFIRMATIONS = 3
UNIT = 10**6


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant, proxy):
    return open_shop(app, client, runner, chain, clock, make_merchant(),
                     confirmations=CONFIRMATIONS, rpc_url=proxy.url)


def _polls(shop, count=1):
    """`count` polls (--once) under attack: their exit statuses, checked after what they
    recorded."""
    return [shop.runner.invoke(args=["watch-payments", "--once"]).exit_code for _ in range(count)]


def _nothing_recorded(shop, process_id):
    assert shop.event_types(process_id) == [] and shop.transfers(process_id) == []
    payment = shop.process(process_id)["payment"]
    assert (payment["amountPaid"], payment["amountPending"], payment["transfers"]) == ("0", "0", [])


def _pays_for_real(shop, chain, process_id, address, amount=6):
    """The customer pays on the real chain; honest answers credit that transfer, and only it."""
    tx_hash, _ = chain.transfer(address, amount * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed"]
    payment = shop.events(process_id)[0][1]["data"]["payment"]
    assert payment["amountPaid"] == str(amount)
    assert [t["txHash"] for t in payment["transfers"]] == [tx_hash]
    assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed"]


def _stale_fork(chain, address):
    """A reorganisation: the block the customer's transfer was in, and the one above it, are
    replaced by two without it. Returns the node left on the abandoned blocks (a log below the
    step's last block is not compared with that block's header)."""
    fork = chain.snapshot()
    base = chain.head()
    chain.transfer(address, 6 * UNIT)
    chain.mine(1)
    stale = StaleFork(chain.url, base)
    chain.revert(fork)
    chain.mine(2)  # the new blocks at the same heights, without the transfer
    return stale


def test_a_stale_forks_logs_answered_once_are_not_credited(shop, chain, proxy, caplog):
    """The stale log cannot be proven (the chain moved under the read): the poll reads again at
    once, and the honest answer has no payment."""
    process_id, address = shop.order(6)
    shop.watch()  # keeps the hash of the block the fork starts above
    stale = _stale_fork(chain, address)
    proxy.route(stale, method="eth_getLogs", times=1)
    caplog.set_level(logging.INFO, logger="app.chain.watcher")
    attacked = _polls(shop)
    moved = [r.getMessage() for r in caplog.records if r.getMessage().endswith("; reading again")]
    assert len(moved) == 1, moved
    chain.mine(CONFIRMATIONS + 2)  # the abandoned block would be deep by now
    honest = _polls(shop, 2)
    _nothing_recorded(shop, process_id)
    assert (attacked, honest) == ([0], [0, 0])
    _pays_for_real(shop, chain, process_id, address)


def test_a_stale_forks_logs_answered_always_are_never_credited(shop, chain, proxy):
    process_id, address = shop.order(6)
    shop.watch()
    stale = _stale_fork(chain, address)
    proxy.route(stale, method="eth_getLogs")
    chain.mine(CONFIRMATIONS + 2)
    attacked = _polls(shop, 3)
    _nothing_recorded(shop, process_id)
    assert attacked == [1, 1, 1]  # the logs cannot be proven: each poll is a fault
    proxy.clear()
    _pays_for_real(shop, chain, process_id, address)


def test_a_batch_split_over_two_nodes_credits_nothing_of_an_abandoned_fork(
        app, client, runner, chain, clock, make_merchant):
    """A balancer that spreads the calls of one batch over its nodes: the pins go to the real node,
    the logs and the paying block's header to a node left on an abandoned 6-block branch. Each
    log's block must link by parent hashes to the step's pinned last block: the fork's block does
    not, so the poll is a fault and nothing is recorded, then or after."""
    pool = SplittingPool(chain.url)
    try:
        merchant = make_merchant()
        shop = open_shop(app, client, runner, chain, clock, merchant, confirmations=CONFIRMATIONS,
                         rpc_url=pool.url)
        process_id, address = shop.order(2)
        base, before = chain.head(), chain.snapshot()
        _, block = chain.transfer(address, 2 * UNIT)  # on the fork only
        chain.mine(5)
        fork = StaleFork(chain.url, base)
        chain.revert(before)  # the real chain: no payment, and longer
        chain.mine(10)
        pool.split(fork, {block})
        attacked = _polls(shop)
        pool.split(None, ())
        chain.mine(CONFIRMATIONS)
        assert (attacked, _polls(shop)) == ([1], [0])
        _nothing_recorded(shop, process_id)
        assert shop.process(process_id)["status"] == "pending"
    finally:
        pool.close()


def test_another_chains_node_answering_every_other_request_is_never_credited(
        shop, chain, live_chain, proxy):
    """The chain-137 node holds the same token (same address) and pays the deposit address there;
    every other request of the URL reaches it. Nothing is recorded from it, whichever requests it
    gets: here before the network's first block hash is kept, when only the chain id names the
    chain."""
    process_id, address = shop.order(6)
    live_chain.mine(max(0, chain.head() - live_chain.head()) + 1)
    live_chain.transfer(address, 6 * UNIT)
    live_chain.mine(CONFIRMATIONS)
    chain.mine(max(0, live_chain.head() - chain.head()) + 2)
    proxy.route(live_chain.url, every=2)
    attacked = _polls(shop, 6)
    _nothing_recorded(shop, process_id)
    assert attacked == [1] * 6
    proxy.clear()
    _pays_for_real(shop, chain, process_id, address)


def test_a_log_marked_removed_is_read_again_at_once_and_the_honest_answer_credits_it(
        shop, chain, proxy, caplog):
    process_id, address = shop.order(6)
    tx_hash, _ = chain.transfer(address, 6 * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    proxy.fail("eth_getLogs", "removed")
    caplog.set_level(logging.INFO, logger="app.chain.watcher")
    assert _polls(shop) == [0]
    moved = [r.getMessage() for r in caplog.records if r.getMessage().endswith("; reading again")]
    assert len(moved) == 1 and "a log marked removed" in moved[0], moved
    assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed"]
    assert shop.event_types(process_id) == ["payment.completed"]
    payment = shop.events(process_id)[0][1]["data"]["payment"]
    assert payment["amountPaid"] == "6" and [t["txHash"] for t in payment["transfers"]] == [tx_hash]


def test_a_moved_chain_is_not_read_again_once_the_watcher_is_stopping(shop, app, chain, proxy,
                                                                     caplog):
    """SIGTERM arrives while the poll reads, and the chain moved under that read: no other poll
    starts; nothing is recorded, and the next run credits the payment."""
    process_id, address = shop.order(6)
    chain.transfer(address, 6 * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    caplog.set_level(logging.INFO, logger="app.chain.watcher")
    with app.app_context():
        watcher = Watcher.from_app(app)
        proxy.fail("eth_getLogs", "removed")
        proxy.before("eth_getLogs", 0, watcher.stop)
        assert watcher.run_once() is False
    assert [r.getMessage() for r in caplog.records
            if r.getMessage().endswith("; reading again")] == []
    _nothing_recorded(shop, process_id)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed"]


@pytest.mark.parametrize("fault", sorted(HOSTILE_DATA))
def test_a_hostile_data_word_is_a_fault_of_the_poll(shop, chain, proxy, fault):
    """`0x-0…5b8d80`, `0x+…`, `…_5b8d80`, `0x 0…`: each 66 characters that int(…, 16) takes (the
    minus sign recorded −6,000,000 base units). Answered once, then always: nothing recorded; the
    honest answer records 6."""
    process_id, address = shop.order(6)
    tx_hash, _ = chain.transfer(address, 6 * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    proxy.fail("eth_getLogs", fault)
    attacked = _polls(shop)
    _nothing_recorded(shop, process_id)
    proxy.always("eth_getLogs", fault)
    attacked += _polls(shop, 2)
    _nothing_recorded(shop, process_id)
    assert attacked == [1, 1, 1]
    proxy.clear()
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed"]
    payment = shop.events(process_id)[0][1]["data"]["payment"]
    assert payment["amountPaid"] == "6" and [t["txHash"] for t in payment["transfers"]] == [tx_hash]
    assert payment["paymentUri"].endswith("&uint256=0")
    assert [t["amount"] for t in shop.transfers(process_id)] == [str(6 * UNIT)]


def test_zero_value_transfers_leave_no_trace_no_lock_and_no_late_events(shop, chain, runner):
    other_token = chain.deploy_named_token("Test USD 2", "TUS2", 6)
    cli(runner, "assets", "add", "tusd2", "--network", NETWORK, "--symbol", "TUS2", "--name",
        "Test USD 2", "--contract", other_token, "--decimals", "6")
    waiting_id, waiting_address = shop.order(6)
    paid_id, paid_address = shop.order(6)
    chain.transfer(paid_address, 6 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(paid_id) == ["payment.completed"]

    for _ in range(3):  # anyone may send 0 tokens to any address, as often as they like
        chain.transfer(waiting_address, 0)
        chain.transfer(paid_address, 0)
        shop.watch()
    chain.mine(CONFIRMATIONS)
    shop.watch()
    _nothing_recorded(shop, waiting_id)
    assert shop.event_types(paid_id) == ["payment.completed"]
    assert [t["amount"] for t in shop.transfers(paid_id)] == [str(6 * UNIT)]

    changed = shop.client.post(
        f"/payment-button/process/{waiting_id}/confirm",
        data=json.dumps({"assetId": "tusd2", "networkId": NETWORK}),
        content_type="application/json", headers={"x-public-key": shop.merchant["publicKey"]})
    assert changed.status_code == 200, changed.get_data(as_text=True)
    assert changed.get_json()["payment"]["tokenContract"].lower() == other_token
