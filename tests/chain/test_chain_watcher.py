"""The chain watcher against a real EVM node (Hardhat 2 on loopback, tests/support/chain_node.py):
transfers of a real ERC-20 token, confirmations, partial and overpaid payments, late payments, the
paid-in-time hold against the expiry sweep, reorganisations, and other tokens to a deposit
address."""
import pytest
from support import dbutil
from support.chain_shop import NETWORK, cli, open_shop

from app.domain.chores import UNWATCH_MARGIN_SECONDS
from app.domain.processes import expire_due
from app.evm.addresses import to_checksum_address

CONFIRMATIONS = 3
UNIT = 10**6  # one token in base units (6 decimals)


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    return open_shop(app, client, runner, chain, clock, make_merchant(),
                     confirmations=CONFIRMATIONS)


def test_a_transfer_is_pending_until_its_confirmations_then_completes(shop, chain):
    process_id, address = shop.order(12.5, {"orderRef": "A-7", "email": "x@example.com"})
    shop.watch()
    assert shop.event_types(process_id) == []

    tx_hash, block = chain.transfer(address, 12_500_000)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    assert shop.process(process_id)["status"] == "pending"
    _, pending = shop.events(process_id)[0]
    payment = pending["data"]["payment"]
    assert payment["amountPaid"] == "0" and payment["amountPending"] == "12.5"
    assert payment["transfers"] == [{"txHash": tx_hash, "logIndex": 0, "blockNumber": block,
                                     "amount": "12.5", "confirmations": 1}]

    chain.mine(CONFIRMATIONS - 2)  # one block short: too few confirmations
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    assert shop.transfers(process_id)[0]["status"] == "seen"

    chain.mine(1)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    assert shop.process(process_id)["status"] == "completed"
    _, completed = shop.events(process_id)[1]
    assert completed["type"] == "payment.completed"
    assert completed["data"]["metadata"] == {"orderRef": "A-7", "email": "x@example.com"}
    assert completed["data"]["status"] == "completed"
    payment = completed["data"]["payment"]
    assert payment["amountDue"] == "12.5" and payment["amountPaid"] == "12.5"
    assert payment["amountPending"] == "0"
    assert payment["transfers"] == [{"txHash": tx_hash, "logIndex": 0, "blockNumber": block,
                                     "amount": "12.5", "confirmations": CONFIRMATIONS}]

    chain.mine(5)  # nothing more happens however deep it gets
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]


def test_partial_then_complete_and_overpaid(shop, chain):
    partial_id, partial_address = shop.order(10)
    over_id, over_address = shop.order(10)
    chain.transfer(partial_address, 4 * UNIT)
    chain.transfer(over_address, 15 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    # Already deep enough when first seen: no payment.pending, the outcome at once.
    assert shop.event_types(partial_id) == ["payment.partial"]
    assert shop.process(partial_id)["status"] == "pending"
    _, partial = shop.events(partial_id)[0]
    assert partial["data"]["payment"]["amountPaid"] == "4"
    assert shop.event_types(over_id) == ["payment.completed"]
    _, over = shop.events(over_id)[0]
    assert over["data"]["payment"]["amountPaid"] == "15"
    assert over["data"]["payment"]["amountDue"] == "10"

    chain.transfer(partial_address, 6 * UNIT)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.event_types(partial_id) == ["payment.partial", "payment.completed"]
    _, done = shop.events(partial_id)[1]
    assert done["data"]["payment"]["amountPaid"] == "10"
    assert [t["amount"] for t in done["data"]["payment"]["transfers"]] == ["4", "6"]


def test_late_after_cancel_and_after_expiry(shop, chain, clock, app):
    cancelled_id, cancelled_address = shop.order(5)
    expired_id, expired_address = shop.order(5)
    assert shop.api.cancel(cancelled_id).status_code == 200
    expires_at = shop.events(cancelled_id)[0][1]["data"]["expiresAt"]
    # the expiry: once the watcher has read past it, the sweep expires the other
    clock.advance(1800)
    chain.next_timestamp(clock() + 1)
    chain.mine(1)
    shop.watch()
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 1
    chain.transfer(cancelled_address, 5 * UNIT)
    chain.transfer(expired_address, 5 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(cancelled_id) == ["process.cancelled", "payment.received_late"]
    assert shop.event_types(expired_id) == ["process.expired", "payment.received_late"]
    for process_id, status in ((cancelled_id, "cancelled"), (expired_id, "expired")):
        _, late = shop.events(process_id)[-1]
        assert late["data"]["status"] == status
        assert late["data"]["payment"]["amountPaid"] == "5"
        assert shop.process(process_id)["status"] == status
    assert expires_at


def test_paid_in_time_but_confirmed_after_expiry_completes(shop, chain, clock, app):
    process_id, address = shop.order(7)
    expires_at = clock() + 1800
    chain.next_timestamp(expires_at)  # at expiresAt exactly: in time
    chain.transfer(address, 7 * UNIT)
    shop.watch()
    clock.now = expires_at + 60
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 0  # held: still confirming
    assert shop.process(process_id)["status"] == "pending"
    listed = shop.api.list("?status=pending").get_json()["data"]
    assert [p["processId"] for p in listed] == [process_id]

    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    assert shop.process(process_id)["status"] == "completed"
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 0


def test_one_second_after_expiry_is_late_and_the_process_expires(shop, chain, clock, app):
    process_id, address = shop.order(7)
    expires_at = clock() + 1800
    chain.next_timestamp(expires_at + 1)
    chain.transfer(address, 7 * UNIT)
    shop.watch()
    clock.now = expires_at + 60
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 1
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "process.expired",
                                            "payment.received_late"]
    assert shop.process(process_id)["status"] == "expired"


def test_in_time_partial_confirmed_after_expiry_then_expires(shop, chain, clock, app):
    process_id, address = shop.order(7)
    expires_at = clock() + 1800
    chain.next_timestamp(expires_at - 10)
    chain.transfer(address, 3 * UNIT)
    shop.watch()
    clock.now = expires_at + 60
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 0
    chain.next_timestamp(expires_at + 1)  # the confirmations, after the expiry
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 1
    assert shop.event_types(process_id) == ["payment.pending", "payment.partial",
                                            "process.expired"]


def test_a_reorganisation_drops_the_orphaned_transfer(shop, chain, caplog):
    process_id, address = shop.order(9)
    before = chain.snapshot()
    orphan_tx, orphan_block = chain.transfer(address, 9 * UNIT)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]

    chain.revert(before)  # the block with the transfer leaves the chain
    chain.mine(CONFIRMATIONS + 2)  # a longer chain without it
    caplog.clear()
    shop.watch()
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []
    assert shop.transfers(process_id) == [{"tx_hash": orphan_tx, "status": "orphaned",
                                           "amount": str(9 * UNIT), "block_number": orphan_block}]
    assert shop.event_types(process_id) == ["payment.pending"]
    process = shop.process(process_id)
    assert process["status"] == "pending"

    # Paid again on the new chain: counted once, the orphaned one never.
    tx_hash, _ = chain.transfer(address, 9 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    _, completed = shop.events(process_id)[-1]
    assert completed["data"]["payment"]["amountPaid"] == "9"
    assert [t["txHash"] for t in completed["data"]["payment"]["transfers"]] == [tx_hash]


def test_a_reorganisation_below_every_kept_hash_reads_the_new_branch(shop, chain, caplog):
    """The only kept hash is the payment's block N (one step read N-1 and N). The new branch holds
    the payment one block lower, in N-1': the watcher reads the new branch again from below the
    fork, so the new transfer counts and the old one is orphaned; a one-block reorganisation is
    a warning, not an error."""
    process_id, address = shop.order(5)
    before = chain.snapshot()
    chain.mine(1)  # block N-1: empty
    orphan_tx, orphan_block = chain.transfer(address, 5 * UNIT)  # block N: the payment
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]

    chain.revert(before)
    tx_hash, block = chain.transfer(address, 5 * UNIT)  # the new branch: the payment in N-1'
    assert block == orphan_block - 1
    chain.mine(CONFIRMATIONS + 2)
    caplog.clear()
    shop.watch()
    assert shop.transfers(process_id) == [
        {"tx_hash": tx_hash, "status": "confirmed", "amount": str(5 * UNIT), "block_number": block},
        {"tx_hash": orphan_tx, "status": "orphaned", "amount": str(5 * UNIT),
         "block_number": orphan_block},
    ]
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    _, completed = shop.events(process_id)[-1]
    assert [t["txHash"] for t in completed["data"]["payment"]["transfers"]] == [tx_hash]
    assert [r.levelname for r in caplog.records if r.levelname == "ERROR"] == []
    assert f"block {orphan_block} was replaced: reorganisation" in caplog.text


def test_a_transfer_included_again_after_a_reorganisation_counts_once(shop, chain):
    process_id, address = shop.order(9)
    before = chain.snapshot()
    tx_hash, first_block = chain.transfer(address, 9 * UNIT)
    raw = chain.rpc("eth_getTransactionByHash", tx_hash)
    shop.watch()
    chain.revert(before)
    chain.mine(2)  # the fork is longer, and holds the same transaction in a later block
    fields = ("from", "to", "nonce", "gas", "value", "maxFeePerGas", "maxPriorityFeePerGas")
    resent = chain.rpc("eth_sendTransaction", {**{k: raw[k] for k in fields}, "data": raw["input"]})
    assert resent == tx_hash
    chain.mine(CONFIRMATIONS)
    shop.watch()
    rows = shop.transfers(process_id)
    assert len(rows) == 1 and rows[0]["status"] == "confirmed"
    assert rows[0]["block_number"] == first_block + 2
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]


def test_other_tokens_to_the_address_do_not_pay_and_are_reported_once(shop, chain):
    process_id, address = shop.order(3)
    other = chain.deploy_token()
    tx_hash, block = chain.transfer(address, 3 * UNIT, token=other)
    shop.watch()
    assert shop.event_types(process_id) == []  # reported once confirmed, never as pending
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.unexpected"]
    assert shop.transfers(process_id) == []
    _, event = shop.events(process_id)[0]
    assert event["data"]["status"] == "pending"
    payment = event["data"]["payment"]
    assert (payment["amountPaid"], payment["amountPending"], payment["transfers"]) == ("0", "0", [])
    assert payment["unexpectedTransfers"] == [{
        "networkId": NETWORK, "chainId": 31337, "tokenContract": to_checksum_address(other),
        "symbol": "TUSD", "amount": "3", "baseUnits": "3000000", "txHash": tx_hash, "logIndex": 0,
        "blockNumber": block, "acceptedAt": None, "acceptedBy": None}]
    chain.mine(2)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.unexpected"]
    assert shop.process(process_id)["payment"]["unexpectedTransfers"] \
        == payment["unexpectedTransfers"]


def test_several_transfers_in_one_block_range_and_a_small_step(shop, chain):
    """Many processes, a tiny --max-range and --max-addresses: every transfer found, once."""
    orders = [shop.order(1) for _ in range(7)]
    for _, address in orders:
        chain.transfer(address, UNIT)
        chain.mine(3)
    chain.mine(CONFIRMATIONS)
    shop.watch("--max-range", "4", "--max-addresses", "2")
    for process_id, _ in orders:
        assert shop.event_types(process_id) == ["payment.completed"]


def test_a_catch_up_over_many_steps_reports_each_outcome_once(shop, chain):
    """One block a step: a transfer that completes its process is settled in its own step; a
    partial waits for the end of the poll, where the rest (read in later steps) joins it."""
    whole_id, whole = shop.order(2)
    halves_id, halves = shop.order(2)
    twice_id, twice = shop.order(2)
    short_id, short = shop.order(2)
    chain.transfer(whole, 2 * UNIT)
    chain.transfer(halves, UNIT)
    chain.transfer(twice, 2 * UNIT)
    chain.transfer(short, UNIT)
    chain.mine(2)
    chain.transfer(halves, UNIT)
    chain.transfer(twice, UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch("--max-range", "1")

    assert shop.event_types(whole_id) == ["payment.completed"]
    assert shop.event_types(halves_id) == ["payment.completed"]
    _, done = shop.events(halves_id)[0]
    assert done["data"]["payment"]["amountPaid"] == "2"
    assert [t["amount"] for t in done["data"]["payment"]["transfers"]] == ["1", "1"]
    # Completed in its step; paid again in a later step of the same catch-up.
    assert shop.event_types(twice_id) == ["payment.completed", "payment.received_late"]
    _, late = shop.events(twice_id)[1]
    assert late["data"]["status"] == "completed"
    assert late["data"]["payment"]["amountPaid"] == "3"
    assert shop.event_types(short_id) == ["payment.partial"]
    assert shop.process(short_id)["status"] == "pending"
    for process_id in (whole_id, halves_id, twice_id, short_id):
        assert {t["status"] for t in shop.transfers(process_id)} == {"confirmed"}

    shop.watch("--max-range", "1")  # read again: nothing counted twice
    assert [len(shop.event_types(p))
            for p in (whole_id, halves_id, twice_id, short_id)] == [1, 1, 2, 1]


def test_without_node_the_chain_tests_fail_and_say_how_to_fix_it(tmp_path):
    """Never a silent skip: a machine without Node.js fails the chain tests with the fix."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASK_", "PYTEST_"))}
    env["PATH"] = str(Path(sys.executable).parent)  # the venv only: no node
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/chain/test_chain_e2e.py"],
        cwd=Path(__file__).resolve().parent.parent.parent, env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    assert "The chain tests need Node.js (`node` is not on PATH)" in done.stdout
    assert "apt-get install nodejs npm" in done.stdout
    assert "1 error" in done.stdout.splitlines()[-1]


def test_a_lagging_watcher_does_not_make_an_in_time_payment_late(shop, chain, clock, app):
    """The watcher is down while the expiry passes and the sweep runs: the process stays pending
    (the watcher has not read the chain past its expiry); once it runs, the in-time transfer
    completes it, and no process.expired is ever written."""
    process_id, address = shop.order(7)
    unpaid_id, _ = shop.order(7)  # chosen, never paid: held as well until the watcher catches up
    unchosen = shop.api.preorder({"amount": 7, "metadata": {"orderRef": "A-2"}}).get_json()
    expires_at = clock() + 1800
    chain.next_timestamp(expires_at - 10)
    chain.transfer(address, 7 * UNIT)
    chain.next_timestamp(expires_at + 5)
    chain.mine(CONFIRMATIONS)  # on chain and deep enough, but nobody has read it yet
    clock.now = expires_at + 60
    with app.app_context():  # only the process without a live payment expires
        assert expire_due(app.extensions["db"], clock()) == 1
    assert shop.event_types(unchosen["processId"]) == ["process.expired"]
    for held in (process_id, unpaid_id):
        assert shop.process(held)["status"] == "pending"
        assert shop.event_types(held) == []
    listed = shop.api.list("?status=pending").get_json()["data"]
    assert sorted(p["processId"] for p in listed) == sorted([process_id, unpaid_id])
    assert shop.api.list("?status=expired").get_json()["data"][0]["processId"] \
        == unchosen["processId"]

    shop.watch()  # reads past the expiry: the in-time transfer, already confirmed
    assert shop.event_types(process_id) == ["payment.completed"]
    assert shop.process(process_id)["status"] == "completed"
    with app.app_context():  # now the unpaid one expires; the paid one never does
        assert expire_due(app.extensions["db"], clock()) == 1
    assert shop.event_types(unpaid_id) == ["process.expired"]
    assert shop.event_types(process_id) == ["payment.completed"]


def test_nothing_paid_expires_once_the_watcher_has_read_past_the_expiry(shop, chain, clock, app):
    process_id, _ = shop.order(7)
    expires_at = clock() + 1800
    chain.next_timestamp(expires_at)  # the watcher's last block is at the expiry, not after it
    chain.mine(1)
    shop.watch()
    clock.now = expires_at + 60
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 0
    assert shop.process(process_id)["status"] == "pending"

    chain.next_timestamp(expires_at + 1)
    chain.mine(1)
    with app.app_context():  # on chain, not yet read: still held
        assert expire_due(app.extensions["db"], clock()) == 0
    shop.watch()
    assert shop.process(process_id)["status"] == "expired"
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 1
    assert shop.event_types(process_id) == ["process.expired"]
    assert shop.process(process_id)["status"] == "expired"


def test_a_disabled_network_does_not_hold_its_processes(shop, chain, clock, app, runner):
    """Nobody reads a disabled network: its processes expire at their expiry, as without a
    payment."""
    process_id, _ = shop.order(7)
    clock.now = clock() + 1800
    assert shop.process(process_id)["status"] == "pending"  # the watcher has not read past it
    result = runner.invoke(args=["networks", "disable", "hardhat"])
    assert result.exit_code == 0, result.output
    assert shop.process(process_id)["status"] == "expired"
    with app.app_context():
        assert expire_due(app.extensions["db"], clock()) == 1
    assert shop.event_types(process_id) == ["process.expired"]


def test_a_payment_sent_with_the_earlier_choice_counts_after_a_switch(shop, chain, runner):
    """The customer pays 5 TUSD (6 decimals), then, before the watcher has seen it, switches the
    choice to TDAI (18 decimals; same address). The earlier choice is still watched: the transfer
    counts, in TDAI's units, and the choice cannot change again once a transfer is recorded."""
    dai = chain.deploy_named_token("Test Dai", "TDAI", 18)
    cli(runner, "assets", "add", "tdai", "--network", NETWORK, "--symbol", "TDAI", "--name",
        "Test Dai", "--contract", dai, "--decimals", "18")
    process_id, address = shop.order(5)
    tx_hash, block = chain.transfer(address, 5 * UNIT)  # with the first choice: TUSD

    def choose(asset_id):
        return shop.client.post(
            f"/payment-button/process/{process_id}/confirm",
            json={"assetId": asset_id, "networkId": NETWORK},
            headers={"x-public-key": shop.merchant["publicKey"]})

    switched = choose("tdai")
    assert switched.status_code == 200, switched.get_data(as_text=True)
    payment = switched.get_json()["payment"]
    assert (payment["assetId"], payment["address"], payment["amountDue"]) == ("tdai", address, "5")
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending"]
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.pending", "payment.completed"]
    _, completed = shop.events(process_id)[-1]
    payment = completed["data"]["payment"]
    assert (payment["assetId"], payment["amountDue"], payment["amountPaid"]) == ("tdai", "5", "5")
    assert payment["transfers"] == [{"txHash": tx_hash, "logIndex": 0, "blockNumber": block,
                                     "amount": "5", "confirmations": CONFIRMATIONS}]
    assert shop.process(process_id)["payment"] == payment
    refused = choose("tusd")
    assert refused.status_code == 409 and refused.get_json()["code"] == "invalid_state"


def test_a_deep_transfer_with_an_earlier_finer_token_counts_rescaled(shop, chain, runner):
    """The earlier choice has 18 decimals, the current one 6: a transfer already deep enough when
    the watcher first sees it (a catch-up) counts in the current token's units, never its raw
    base units (10**12 wei of TDAI is 0.000001, not 10**12 TUSD base units)."""
    dai = chain.deploy_named_token("Test Dai", "TDAI", 18)
    cli(runner, "assets", "add", "tdai", "--network", NETWORK, "--symbol", "TDAI", "--name",
        "Test Dai", "--contract", dai, "--decimals", "18")
    process_id, address = shop.order(5)  # TUSD

    def choose(asset_id):
        response = shop.client.post(
            f"/payment-button/process/{process_id}/confirm",
            json={"assetId": asset_id, "networkId": NETWORK},
            headers={"x-public-key": shop.merchant["publicKey"]})
        assert response.status_code == 200, response.get_data(as_text=True)

    choose("tdai")
    tx_hash, block = chain.transfer(address, 10 ** 12, token=dai)  # 0.000001 TDAI
    choose("tusd")
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.partial"]
    _, partial = shop.events(process_id)[-1]
    payment = partial["data"]["payment"]
    assert (payment["assetId"], payment["amountDue"], payment["amountPaid"],
            payment["amountPending"]) == ("tusd", "5", "0.000001", "0")
    assert shop.process(process_id)["status"] == "pending"


def test_one_watcher_keeps_its_watched_set_across_polls(shop, chain, clock, app):
    """A looping watcher keeps the watched set between polls: a payment made after a poll is
    found by the next one, and a process final for longer than the monitoring period, still kept
    from an earlier poll, is not credited (as a watcher reading the whole set would not)."""
    from app.chain.watcher import Watcher

    old_id, old_address = shop.order(5)
    with app.app_context(), Watcher.from_app(app) as watcher:
        chain.mine(1)
        watcher.poll_network(NETWORK)  # the whole set: old_id pending
        assert shop.api.cancel(old_id).status_code == 200
        new_id, new_address = shop.order(5)
        clock.advance(app.config["PAYMENT_MONITORING_SECONDS"] + 1)
        chain.transfer(old_address, 5 * UNIT)
        chain.transfer(new_address, 5 * UNIT)
        chain.mine(CONFIRMATIONS)
        watcher.poll_network(NETWORK)
    assert shop.event_types(new_id) == ["payment.completed"]
    assert shop.event_types(old_id) == ["process.cancelled"]
    assert shop.transfers(old_id) == []


def _watch_list(app, process_id):
    return dbutil.query(app.config["DATABASE"], "SELECT network_id, token_contract, address"
                        " FROM watch_list WHERE process_id = ?", process_id)


def test_the_chores_stop_watching_what_has_been_final_longer_than_the_monitoring(shop, chain,
                                                                                clock, app, worker):
    """The delivery worker's chores delete the watch_list rows of a process final for longer than
    PAYMENT_MONITORING_SECONDS and UNWATCH_MARGIN_SECONDS (once past its expiry too), and only
    those: a payment to a process cancelled inside that period is still reported late by a watcher
    reading the whole set, one to the process cancelled before it is not recorded."""
    monitoring, ttl = app.config["PAYMENT_MONITORING_SECONDS"], app.config["PROCESS_TTL_SECONDS"]
    old_id, old_address = shop.order(5)
    assert shop.api.cancel(old_id).status_code == 200
    assert _watch_list(app, old_id) == [(NETWORK, chain.token.lower(), old_address.lower())]
    clock.advance(ttl + UNWATCH_MARGIN_SECONDS + 200)
    recent_id, recent_address = shop.order(5)
    assert shop.api.cancel(recent_id).status_code == 200
    clock.advance(monitoring - 80)  # the old one final and expired for monitoring + margin + 120 s
    worker.run_once()
    assert _watch_list(app, old_id) == []
    assert _watch_list(app, recent_id) == [(NETWORK, chain.token.lower(), recent_address.lower())]
    chain.transfer(old_address, 5 * UNIT)
    chain.transfer(recent_address, 5 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(recent_id) == ["process.cancelled", "payment.received_late"]
    assert shop.event_types(old_id) == ["process.cancelled"] and shop.transfers(old_id) == []
