"""Settling by a chain's finality, and network health (the contract, "Finality and network health"),
on real nodes behind the proxy of tests/support/fake_rpc.py, which serves `safe` and `finalized`
independently of `latest`, freezes the head, goes down and refuses the tags.

- Under `finalized` (or `safe`) a transfer counts once the node's block of that tag is at or past
  its block, however many blocks are above it: never before (randomised block positions, 20
  payments), and within the poll that sees the tag pass it.
- A node without the tag is refused by `networks add`/`set-finality`; one that stops serving it
  fails the polls (no fallback to counting).
- A network whose node is down for NETWORK_STALE_SECONDS, or whose head is older than its
  `--max-block-age`, is unavailable: hidden, confirm `503 network_unavailable` with Retry-After,
  its processes showing it and not expired while in-time transfers may be unread; the other
  network goes on (one watcher process for both, or one per network); recovery credits what was
  missed.
- A reorganisation at or below `finalized` is reported (payment.reversed) and logged as an error.
"""
import json
import logging
import os
import random

import pytest
from support import dbutil
from support.chain_shop import DECIMALS, NETWORK, Shop, cli
from support.fake_rpc import FaultyRpc

UNIT = 10**DECIMALS
OTHER = "amoy"  # the second test network: the chain-80002 node
STALE = 60


@pytest.fixture
def app_config():
    return {"NETWORK_STALE_SECONDS": STALE}


@pytest.fixture
def other_proxy(amoy):
    proxy = FaultyRpc(amoy.url)
    yield proxy
    proxy.close()


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    merchant = make_merchant()
    shop = Shop(app, client, runner, chain, clock, merchant)
    shop.sync_clock()
    return shop


def add(runner, chain, proxy, *options, network=NETWORK, chain_id=31337):
    """The operator adds the network through the proxy, read from the next block on, and its
    token."""
    result = runner.invoke(args=[
        "networks", "add", network, "--name", network.title(), "--chain-id", str(chain_id),
        "--rpc-url", proxy.url, "--confirmations", "3", "--start-block", str(chain.head() + 1),
        *options])
    if result.exit_code == 0:
        cli(runner, "assets", "add", "tusd", "--network", network, "--symbol", "TUSD", "--name",
            "Test USD", "--contract", chain.token, "--decimals", str(DECIMALS))
    return result


def offered(shop):
    response = shop.client.get("/payment-button/assets",
                               headers={"x-public-key": shop.merchant["publicKey"]})
    assert response.status_code == 200
    return [n["id"] for asset in response.get_json()["data"] for n in asset["networks"]]


def public(shop, process_id):
    response = shop.client.get(f"/payment-button/process/{process_id}/public",
                               headers={"x-public-key": shop.merchant["publicKey"]})
    assert response.status_code == 200
    return response.get_json()


def test_a_transfer_counts_once_the_finalized_block_passes_it_never_before(shop, chain, proxy,
                                                                           runner):
    """20 payments, each in a block at a random place, with 3 to 40 blocks above it (more than the
    network's 3 confirmations) while `finalized` stays 1 to 5 blocks below it: not one completes;
    the poll that sees `finalized` at or past its block completes it. Half of them are first seen
    while shallow (settled by the confirm phase), half only once deep (settled by the scan)."""
    seed = int(os.environ.get("FINALITY_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    proxy.tag("finalized", chain.head())
    assert add(runner, chain, proxy, "--finality", "finalized").exit_code == 0
    early, late = [], []
    for run in range(20):
        process_id, address = shop.order(2)
        chain.mine(rng.randint(0, 3))
        _, block = chain.transfer(address, 2 * UNIT)
        if rng.random() < 0.5:
            shop.watch()  # seen while shallow
        chain.mine(rng.randint(3, 40))
        proxy.tag("finalized", max(0, block - rng.randint(1, 5)))
        shop.watch()
        if shop.event_types(process_id) != ["payment.pending"]:
            early.append((run, block, shop.event_types(process_id)))
        proxy.tag("finalized", block + rng.randint(0, 2))
        shop.watch()
        if shop.event_types(process_id) != ["payment.pending", "payment.completed"]:
            late.append((run, block, shop.event_types(process_id)))
    assert (early, late) == ([], []), f"FINALITY_SEED={seed}"
    payment = shop.events(process_id)[-1][1]["data"]["payment"]
    assert (payment["finality"], payment["amountPaid"]) == ("finalized", "2")


def test_safe_is_read_apart_from_finalized_and_a_node_without_the_tag_is_refused(
        shop, chain, proxy, runner, caplog):
    proxy.refuse("safe")
    refused = add(runner, chain, proxy, "--finality", "safe")
    assert refused.exit_code == 1
    assert 'does not serve the "safe" block' in refused.output and "SECRET" not in refused.output
    assert add(runner, chain, proxy).exit_code == 0  # counting needs no tag
    again = runner.invoke(args=["networks", "set-finality", NETWORK, "safe"])
    assert again.exit_code == 1 and 'does not serve the "safe" block' in again.output
    listed = json.loads(cli(runner, "networks", "list", "--json").output)
    assert listed[0]["finality"] == "confirmations"

    proxy.tag("safe", chain.head())
    assert cli(runner, "networks", "set-finality", NETWORK, "safe").output == (
        f"Network {NETWORK}: a transfer counts once the node's \"safe\" block is at or past its"
        " block.\n")
    process_id, address = shop.order(3)
    _, block = chain.transfer(address, 3 * UNIT)
    chain.mine(10)
    proxy.tag("finalized", block - 1)  # finalized lags; safe is what counts here
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]

    proxy.refuse("safe")  # the node stops serving it: a fault, never a fallback to the count
    caplog.clear()
    for _ in range(2):
        shop.watch(exit_code=1)
    assert shop.event_types(process_id) == ["payment.pending"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and 'eth_getBlockByNumber("safe")' in warnings[0], warnings

    proxy.tag("safe", block)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    assert shop.process(process_id)["payment"]["finality"] == "safe"


def test_a_reorganisation_at_or_below_finalized_is_reported_and_logged_as_an_error(
        shop, chain, proxy, runner, caplog):
    proxy.tag("finalized", chain.head())
    assert add(runner, chain, proxy, "--finality", "finalized").exit_code == 0
    process_id, address = shop.order(4)
    shop.watch()
    before = chain.snapshot()
    _, block = chain.transfer(address, 4 * UNIT)
    chain.mine(2)
    proxy.tag("finalized", block + 1)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed"]

    chain.revert(before)  # what the node called final is replaced: the chain broke its promise
    chain.mine(5)
    caplog.clear()
    shop.watch()
    assert shop.event_types(process_id) == ["payment.completed", "payment.reversed"]
    assert shop.process(process_id)["payment"]["amountPaid"] == "0"
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and 'at or below the node\'s "finalized" block' in errors[0], errors


def test_one_answer_calling_the_head_finalized_completes_nothing(shop, chain, proxy, runner):
    """The pool's nodes say `finalized` is 3 blocks below the payment's; one answer (the poll's
    first batch) calls the head final. The tag is asked in every pinned batch of the poll and the
    lowest answer counts: nothing completes, and the later reorganisation above the real finalized
    block (which the chain is free to make) reverses nothing."""
    chain.mine(10)
    proxy.tag("finalized", chain.head())
    assert add(runner, chain, proxy, "--finality", "finalized").exit_code == 0
    process_id, address = shop.order(2)
    before = chain.snapshot()
    _, block = chain.transfer(address, 2 * UNIT)
    chain.mine(5)
    proxy.tag("finalized", block - 3)  # the honest nodes' word
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]

    proxy.tag("finalized", chain.head())  # one lying answer, then honest again
    proxy.before("eth_getBlockByNumber:finalized", 0, lambda: proxy.tag("finalized", block - 3))
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    recorded = "SELECT tag_block FROM networks"  # what collect and reconcile count by
    assert dbutil.scalar(shop.app.config["DATABASE"], recorded) == block - 3
    proxy.tag("finalized", block - 5)  # a lagging node: the record does not go back
    chain.mine(1)
    shop.watch()
    assert dbutil.scalar(shop.app.config["DATABASE"], recorded) == block - 3

    height = chain.head()
    chain.revert(before)  # a reorganisation above the real finalized block: allowed
    chain.mine(height - chain.head() + 2)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    assert shop.process(process_id)["payment"]["amountPaid"] == "0"


def test_a_frozen_network_is_hidden_alone_while_the_other_completes_payments(
        shop, chain, proxy, amoy, other_proxy, runner, client, clock):
    """The chain-31337 node's head stops (a stuck node) on a network with --max-block-age 30; the
    chain-80002 network goes on, read by one watcher process for both, then by one per network."""
    assert add(runner, chain, proxy, "--max-block-age", "30").exit_code == 0
    assert add(runner, amoy, other_proxy, network=OTHER, chain_id=80002).exit_code == 0
    stuck_id, stuck_address = shop.order(5)
    shop.watch()
    assert offered(shop) == [OTHER, NETWORK]
    assert public(shop, stuck_id)["networkState"] == "ok"

    proxy.freeze()
    chain.transfer(stuck_address, 5 * UNIT)
    chain.mine(5)
    clock.now = chain.timestamp(proxy.frozen) + 31  # the head the node shows is 31 s old
    for watch in ([], ["--network", OTHER]):  # one process for both networks, then one for each
        paid_id, paid_address = shop.order(5, network=OTHER)
        amoy.transfer(paid_address, 5 * UNIT)
        amoy.mine(3)
        shop.watch(*watch)
        if watch:
            shop.watch("--network", NETWORK)
        assert shop.event_types(paid_id) == ["payment.completed"]
        assert shop.event_types(stuck_id) == []
        assert offered(shop) == [OTHER]
        assert public(shop, stuck_id)["networkState"] == "unavailable"
        assert public(shop, paid_id)["networkState"] == "ok"

    refused = shop.confirm(shop.preorder(1))
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "30"
    assert refused.get_json()["code"] == "network_unavailable"
    assert NETWORK in refused.get_json()["message"]
    health = client.get("/healthz")
    assert health.status_code == 200
    assert {k: v["state"] for k, v in health.get_json()["networks"].items()} == {
        NETWORK: "unavailable", OTHER: "ok"}
    metrics = client.get("/metrics").get_data(as_text=True)
    assert f'preorder_network_available{{network="{NETWORK}"}} 0' in metrics
    assert f'preorder_network_available{{network="{OTHER}"}} 1' in metrics
    assert f'preorder_network_head_block{{network="{NETWORK}"}} {proxy.frozen}' in metrics

    proxy.thaw()  # the node moves again: what it missed is credited, with no step by hand
    chain.mine(1)
    clock.now = chain.timestamp()
    shop.watch()
    assert shop.event_types(stuck_id) == ["payment.completed"]
    assert offered(shop) == [OTHER, NETWORK]
    assert client.get("/healthz").get_json()["networks"][NETWORK]["state"] == "ok"


def test_a_network_down_is_unavailable_after_the_stale_time_holds_its_expiry_and_recovers(
        shop, chain, proxy, amoy, other_proxy, runner, client, clock):
    """The node behind one network goes down; a customer pays in time there meanwhile. Failed
    polls make it unavailable once the last good one is NETWORK_STALE_SECONDS old (cron's --once
    runs, each a new process: the state is the database's); its process is not expired past
    expiresAt while that transfer is unread, the other network's unpaid one is; back up, the
    transfer is credited and completes the process (paid in time)."""
    assert add(runner, chain, proxy).exit_code == 0
    assert add(runner, amoy, other_proxy, network=OTHER, chain_id=80002).exit_code == 0
    held_id, held_address = shop.order(7)
    unpaid_id, _ = shop.order(7, network=OTHER)
    shop.watch()
    expires_at = shop.process(held_id)["expiresAt"]

    proxy.down()
    chain.transfer(held_address, 7 * UNIT)  # in time, on a network nobody can read now
    chain.mine(3)
    shop.watch(exit_code=1)
    clock.advance(STALE - 1)
    shop.watch(exit_code=1)
    assert offered(shop) == [OTHER, NETWORK]  # failing, not yet for NETWORK_STALE_SECONDS
    clock.advance(2)
    shop.watch(exit_code=1)
    assert offered(shop) == [OTHER]
    since = client.get("/healthz").get_json()["networks"][NETWORK]
    assert since["state"] == "unavailable"

    clock.advance(1800)  # past expiresAt; the other network's chain reads past it too
    amoy.next_timestamp(int(clock.now) + 1)
    amoy.mine(1)
    shop.watch(exit_code=1)
    cli(runner, "deliver-webhooks", "--once")
    assert shop.process(unpaid_id)["status"] == "expired"
    assert shop.process(held_id)["status"] == "pending", expires_at  # held: may be paid in time
    assert public(shop, held_id)["networkState"] == "unavailable"

    proxy.up()
    shop.watch()
    assert shop.event_types(held_id) == ["payment.completed"]
    assert shop.process(held_id)["status"] == "completed"
    assert client.get("/healthz").get_json()["networks"][NETWORK]["state"] == "ok"
    assert offered(shop) == [OTHER, NETWORK]


def test_an_idle_poll_is_one_round_trip_and_a_new_block_two(shop, chain, proxy, runner):
    """The chain id, the head's block and the kept block in one batch; a new block adds the step's
    batch (its logs with its pins). Under a finality mode the tag rides in the first batch."""
    proxy.tag("finalized", chain.head())
    assert add(runner, chain, proxy, "--finality", "finalized").exit_code == 0
    shop.order(1)
    chain.mine(1)
    shop.watch()  # keeps a block
    for mined, trips in ((0, 1), (1, 2), (0, 1)):
        if mined:
            chain.mine(mined)
        before = proxy.requests
        shop.watch()
        assert proxy.requests - before == trips, (mined, proxy.calls)


def test_a_refund_counts_by_the_finalized_block_too(shop, chain, proxy, runner, clock):
    """Under `finalized`, the transaction the merchant named for a refund completes it only once the
    node's finalized block is at or past the transaction's block, however many blocks are above
    it."""
    proxy.tag("finalized", chain.head())
    assert add(runner, chain, proxy, "--finality", "finalized").exit_code == 0
    process_id, address = shop.order(5)
    _, block = chain.transfer(address, 5 * UNIT)
    proxy.tag("finalized", block)
    shop.watch()
    assert shop.process(process_id)["status"] == "completed"
    customer, wallet = chain.accounts[7], 3  # the merchant pays from a wallet of its own
    # (not the one that paid the order: the customer's)
    chain.transfer(chain.accounts[wallet], 2 * UNIT)
    clock.now = chain.timestamp() + 10
    made = shop.client.post(f"/payment-button/process/{process_id}/refunds",
                            data=json.dumps({"amount": 2, "address": customer}),
                            content_type="application/json", headers=shop.api.headers()).get_json()
    chain.next_timestamp(clock.now + 1)
    paid, block = chain.transfer(customer, 2 * UNIT, sender=wallet)
    named = shop.client.post(f"/payment-button/process/{process_id}/refunds/{made['refundId']}"
                             "/transaction", data=json.dumps({"txHash": paid}),
                             content_type="application/json", headers=shop.api.headers())
    assert named.status_code == 200, named.get_data(as_text=True)

    def refund_status():
        listed = shop.client.get(f"/payment-button/process/{process_id}/refunds",
                                 headers=shop.api.headers()).get_json()["data"]
        return [r["status"] for r in listed]

    chain.mine(10)  # far more than the network's 3 confirmations
    proxy.tag("finalized", block - 1)
    shop.watch()
    assert refund_status() == ["pending"]
    proxy.tag("finalized", block)
    shop.watch()
    assert refund_status() == ["completed"]
