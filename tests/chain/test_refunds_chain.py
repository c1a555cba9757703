"""Refunds settled on the real test chain: a payment completed by the watcher, refunds made through
the merchant API, the merchant's wallets (funded dev accounts) paying the customers' addresses,
and the watcher's CLI marking `completed` only the refunds that the merchant's own payment settles:
a transaction it named (sent from one of its own addresses), or a transfer sent from its payout
address; the signed `refund.completed` webhook, verified with the `standardwebhooks` package,
carries it. Red-team cases: another merchant's payment, the customer's own transfer, a bystander's,
the amount meant for another refund, logs marked removed or served by another chain's node, a deep
reorganisation (named bystanders' transfers: test_refund_bystanders.py)."""
import json
import logging

from support import dbutil
from support.chain_node import TRANSFER_SELECTOR
from support.chain_shop import NETWORK, OTHER_XPUB, Shop, add_network, cli, open_shop
from support.fake_rpc import FaultyRpc
from support.helpers import assert_error

from app.chain import refunds as chain_refunds
from app.data import payments as payment_rows
from app.evm import rpc
from app.evm.addresses import to_checksum_address
from app.evm.canonical import NotProven

CONFIRMATIONS = 2
MERCHANT_WALLET = 0  # the dev account holding the test token: the merchant's payout wallet
OTHER_WALLET = 1  # another merchant's payout wallet
SPARE_WALLET = 3  # a wallet that is none of the merchant's addresses


def send_from(chain, address, to, amount):
    """A token transfer from `address` (a deposit address: the merchant's wallet holds its key; the
    node impersonates it, with gas money), mined at once: (tx hash, block number)."""
    chain.rpc("hardhat_impersonateAccount", address)
    chain.rpc("hardhat_setBalance", address, hex(10**18))
    data = "0x" + TRANSFER_SELECTOR + to[2:].lower().rjust(64, "0") + format(amount, "064x")
    receipt = chain.send(address, chain.token, data)
    return receipt["transactionHash"], int(receipt["blockNumber"], 16)


def refund(shop, process_id, amount, address):
    response = shop.client.post(
        f"/payment-button/process/{process_id}/refunds",
        data=json.dumps({"amount": amount, "address": address, "reason": "Returned"}),
        content_type="application/json", headers=shop.api.headers())
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def name(shop, process_id, refund_id, tx_hash):
    return shop.client.post(f"/payment-button/process/{process_id}/refunds/{refund_id}/transaction",
                            data=json.dumps({"txHash": tx_hash}), content_type="application/json",
                            headers=shop.api.headers())


def refunds_of(shop, process_id):
    response = shop.client.get(f"/payment-button/process/{process_id}/refunds",
                               headers=shop.api.headers())
    assert response.status_code == 200
    return {r["refundId"]: r for r in response.get_json()["data"]}


def status_of(shop, process_id, made):
    return refunds_of(shop, process_id)[made["refundId"]]["status"]


def paid_order(shop, chain):
    process_id, address = shop.order(19.99)
    chain.transfer(address, 19_990_000)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.process(process_id)["status"] == "completed"
    return process_id


def new_shop(app, client, runner, chain, clock, merchant, payout_account=MERCHANT_WALLET, **kwargs):
    """A merchant with an xpub whose order is paid, then a payout address (its refunds' wallet):
    the order keeps its xpub-mode deposit address."""
    shop = Shop(app, client, runner, chain, clock, merchant,
                **kwargs)
    shop.sync_clock()
    process_id = paid_order(shop, chain)
    if payout_account is not None:
        cli(runner, "merchants", "set-payout", merchant["merchantId"],
            to_checksum_address(chain.accounts[payout_account]))
    return shop, process_id


def test_a_refund_is_completed_by_the_merchants_confirmed_transfer(app, client, runner, chain,
                                                                   clock, make_merchant, receiver):
    merchant = make_merchant(webhook_url=receiver.url("/hooks/refunds"))
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop, process_id = new_shop(app, client, runner, chain, clock, merchant)
    customer, other_customer = chain.accounts[5], chain.accounts[6]

    # Sent before the refund exists: it does not pay it.
    chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    clock.now = chain.timestamp() + 10
    made = refund(shop, process_id, 5, customer)
    assert made["txHash"] is None
    created = clock.now
    # In a block stamped at createdAt (not later), below the amount, in another token, or to
    # another address: none pays it.
    chain.next_timestamp(created)
    chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    chain.next_timestamp(created + 1)
    chain.transfer(customer, 4_999_999, sender=MERCHANT_WALLET)
    chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET, token=chain.deploy_token())
    chain.transfer(other_customer, 5_000_000, sender=MERCHANT_WALLET)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert status_of(shop, process_id, made) == "pending"

    # A cancelled refund is not settled by a transfer that would have paid it.
    cancelled = refund(shop, process_id, 1, other_customer)
    response = client.delete(f"/payment-button/process/{process_id}/refunds/"
                             f"{cancelled['refundId']}", headers=shop.api.headers())
    assert response.status_code == 200 and response.get_json()["status"] == "cancelled"
    chain.transfer(other_customer, 1_000_000, sender=MERCHANT_WALLET)  # a block after createdAt

    # The payment: pending until it has its confirmations, then completed.
    tx_hash, block = chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    shop.watch()
    assert status_of(shop, process_id, made) == "pending"
    chain.mine(CONFIRMATIONS - 1)
    clock.advance(30)
    shop.watch()
    shown = refunds_of(shop, process_id)
    assert shown[cancelled["refundId"]]["status"] == "cancelled"
    assert shown[cancelled["refundId"]]["transfers"] == []
    completed = shown[made["refundId"]]
    assert completed == {**made, "status": "completed", "updatedAt": completed["updatedAt"],
                         "txHash": tx_hash,
                         "sender": to_checksum_address(chain.accounts[MERCHANT_WALLET]),
                         "transfers": [{"txHash": tx_hash, "logIndex": 0, "blockNumber": block,
                                        "amount": "5"}]}
    assert completed["namedBy"] is None  # found by the watcher, not named
    assert completed["updatedAt"] != made["updatedAt"]
    assert shop.process(process_id)["refunds"] == list(shown.values())
    assert shop.event_types(process_id) == [
        "payment.completed", "refund.created", "refund.created",
        "refund.cancelled", "refund.completed"]
    shop.watch()  # nothing more: the transfer settled it once
    assert shop.event_types(process_id).count("refund.completed") == 1
    again = client.delete(f"/payment-button/process/{process_id}/refunds/{made['refundId']}",
                          headers=shop.api.headers())
    assert_error(again, 409, "invalid_state")
    assert_error(name(shop, process_id, made["refundId"], "0x" + "12" * 32), 409, "invalid_state")

    delivered = runner.invoke(args=["deliver-webhooks", "--once"])
    assert delivered.exit_code == 0, delivered.output
    received = receiver.wait_for(5)
    bodies = [r.verified(merchant["webhookSecret"], clock.now) for r in received]
    [event] = [b for b in bodies if b["type"] == "refund.completed"]
    assert event["data"]["processId"] == process_id
    assert event["data"]["status"] == "completed"
    assert event["data"]["payment"]["amountPaid"] == "19.99"
    assert [(r["refundId"], r["status"]) for r in event["data"]["refunds"]] == [
        (made["refundId"], "completed"), (cancelled["refundId"], "cancelled")]
    assert event["data"]["refunds"][0]["transfers"] == completed["transfers"]


def test_one_transfer_settles_one_refund_the_oldest(app, client, runner, chain, clock,
                                                     make_merchant):
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop, process_id = new_shop(app, client, runner, chain, clock, make_merchant())
    customer = chain.accounts[7]
    first = refund(shop, process_id, 2, customer)
    second = refund(shop, process_id, 2, customer.lower())
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)  # after both createdAt
    chain.transfer(customer, 2_000_000, sender=MERCHANT_WALLET)  # pays one of them
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    statuses = {k: r["status"] for k, r in refunds_of(shop, process_id).items()}
    assert statuses == {first["refundId"]: "completed", second["refundId"]: "pending"}
    chain.transfer(customer, 3_000_000, sender=MERCHANT_WALLET)  # more than the amount: pays it
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    shown = refunds_of(shop, process_id)[second["refundId"]]
    assert shown["status"] == "completed" and shown["transfers"][0]["amount"] == "3"


def test_another_merchants_refund_payment_never_completes_yours(app, client, runner, chain, clock,
                                                                make_merchant, caplog):
    """A refunds 10 to a customer, then B refunds 10 to the same customer: B's payment from its own
    payout wallet completes B's refund only, even when A names B's transaction (public on chain)
    for its own refund before the watcher reads it; A's stays pending until A pays."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    chain.transfer(chain.accounts[OTHER_WALLET], 50_000_000)  # B's wallet holds the token
    a, a_process = new_shop(app, client, runner, chain, clock, make_merchant(name="A"))
    b, b_process = new_shop(app, client, runner, chain, clock, make_merchant(name="B"),
                            payout_account=OTHER_WALLET, xpub=OTHER_XPUB)
    customer = chain.accounts[8]
    a_refund = refund(a, a_process, 10, customer)
    b_refund = refund(b, b_process, 10, customer)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    b_tx, _ = chain.transfer(customer, 10_000_000, sender=OTHER_WALLET)
    assert name(a, a_process, a_refund["refundId"], b_tx).status_code == 200  # A claims it
    chain.mine(CONFIRMATIONS - 1)
    clock.advance(30)
    with caplog.at_level(logging.WARNING, logger="app.chain.refunds"):
        a.watch()
    shown = refunds_of(a, a_process)[a_refund["refundId"]]
    assert (shown["status"], shown["txHash"], shown["clearedTxHash"]) == ("pending", None, b_tx)
    assert shown["clearedReason"] == (
        f"Transaction {b_tx} was sent from an address that is not yours alone: only your own"
        " payment settles your refund.")  # nothing says whose it is
    b_shown = refunds_of(b, b_process)[b_refund["refundId"]]
    assert (b_shown["txHash"], b_shown["sender"]) == (
        b_tx, to_checksum_address(chain.accounts[OTHER_WALLET]))
    assert (f"transaction {b_tx} was sent from an address that is not yours alone" in caplog.text
            and "its name is cleared" in caplog.text)
    a_tx, _ = chain.transfer(customer, 10_000_000, sender=MERCHANT_WALLET)
    chain.mine(CONFIRMATIONS - 1)
    a.watch()
    assert refunds_of(a, a_process)[a_refund["refundId"]]["txHash"] == a_tx
    assert a.event_types(a_process).count("refund.completed") == 1
    assert b.event_types(b_process).count("refund.completed") == 1


def test_a_wallet_two_merchants_share_settles_neither_s_refund(app, client, runner, chain, clock,
                                                               make_merchant, caplog):
    """`merchants set-payout` refuses another merchant's payout wallet (whose transfers would settle
    the refunds of both). Two merchants sharing one anyway (set before that check): a transfer from
    it settles no refund of either, found or named, and the watcher says why."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    a, a_process = new_shop(app, client, runner, chain, clock, make_merchant(name="A"))
    b, b_process = new_shop(app, client, runner, chain, clock, make_merchant(name="B"),
                            payout_account=OTHER_WALLET, xpub=OTHER_XPUB)
    wallet = chain.accounts[MERCHANT_WALLET]  # A's
    refused = runner.invoke(args=["merchants", "set-payout", b.merchant["merchantId"],
                                  to_checksum_address(wallet)])
    assert refused.exit_code == 1 and refused.output.startswith(
        "Error: Another merchant already has 0x")
    dbutil.execute(app.config["DATABASE"], "UPDATE merchant_payouts SET payout_address = ?"
                   " WHERE merchant_id = ?", to_checksum_address(wallet), b.merchant["merchantId"])
    customer = chain.accounts[16]
    b_refund = refund(b, b_process, 10, customer)
    a_refund = refund(a, a_process, 10, customer)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    a_tx, _ = chain.transfer(customer, 10_000_000, sender=MERCHANT_WALLET)  # A pays its refund
    assert name(a, a_process, a_refund["refundId"], a_tx).status_code == 200
    chain.mine(CONFIRMATIONS - 1)
    clock.advance(30)
    with caplog.at_level(logging.WARNING, logger="app.chain.refunds"):
        a.watch()
    assert (status_of(a, a_process, a_refund), status_of(b, b_process, b_refund)) == (
        "pending", "pending")
    assert f"transaction {a_tx} was sent from an address that is not yours alone" in caplog.text
    assert refunds_of(a, a_process)[a_refund["refundId"]]["clearedTxHash"] == a_tx
    assert (f"transfer {a_tx} (log 0) settles no refund: its sender {wallet.lower()} is the payout"
            " or deposit address of 2 merchants" in caplog.text)


def test_the_customer_s_own_transfer_and_a_bystander_s_settle_nothing(app, client, runner, chain,
                                                                       clock, make_merchant):
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    customer, bystander = chain.accounts[9], chain.accounts[10]
    chain.transfer(customer, 10_000_000)  # both hold the token (before the refund is made)
    chain.transfer(bystander, 10_000_000)
    shop, process_id = new_shop(app, client, runner, chain, clock, make_merchant())
    made = refund(shop, process_id, 10, customer)
    chain.transfer(customer, 10_000_000, sender=9)  # the customer to itself
    chain.transfer(customer, 10_000_000, sender=10)  # a bystander
    chain.mine(CONFIRMATIONS)
    clock.advance(30)
    shop.watch()
    assert status_of(shop, process_id, made) == "pending"
    paid, _ = chain.transfer(customer, 10_000_000, sender=MERCHANT_WALLET)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert refunds_of(shop, process_id)[made["refundId"]]["txHash"] == paid


def test_the_refund_of_exactly_the_amount_is_settled_before_an_older_smaller_one(
        app, client, runner, chain, clock, make_merchant):
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop, process_id = new_shop(app, client, runner, chain, clock, make_merchant())
    customer = chain.accounts[11]
    five = refund(shop, process_id, 5, customer)
    ten = refund(shop, process_id, 10, customer)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    chain.transfer(customer, 10_000_000, sender=MERCHANT_WALLET)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert (status_of(shop, process_id, five), status_of(shop, process_id, ten)) == (
        "pending", "completed")
    chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert status_of(shop, process_id, five) == "completed"


def test_a_named_transaction_from_a_deposit_address_completes_its_refund(
        app, client, runner, chain, clock, make_merchant, caplog):
    """The merchant pays from one of its own addresses that is not its payout address (the order's
    deposit address, whose key its wallet holds: no automatic settling) and names the transaction;
    a named one that holds no such transfer is cleared, kept with why, and the log says why."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop, process_id = new_shop(app, client, runner, chain, clock, make_merchant())
    deposit = shop.process(process_id)["payment"]["address"]
    customer = chain.accounts[12]
    clock.now = created = chain.timestamp() + 10
    first = refund(shop, process_id, 4, customer)
    second = refund(shop, process_id, 3, customer)
    clock.advance(30)
    chain.rpc("hardhat_impersonateAccount", deposit)
    chain.next_timestamp(created)  # stamped at createdAt: a named transaction counts
    paid, block = send_from(chain, deposit, customer, 4_000_000)
    short, _ = send_from(chain, deposit, customer, 2_000_000)
    shop.watch()
    assert status_of(shop, process_id, first) == "pending"  # not from the payout address
    assert name(shop, process_id, first["refundId"], paid).status_code == 200
    assert name(shop, process_id, second["refundId"], short).status_code == 200
    shop.watch()  # `short`, in the newest block, is not yet confirmed: still pending, still named
    shown = refunds_of(shop, process_id)
    assert [(r["status"], r["txHash"], r["namedBy"]) for r in shown.values()] == [
        ("completed", paid, "secret key"), ("pending", short, "secret key")]
    chain.mine(CONFIRMATIONS - 1)
    with caplog.at_level(logging.WARNING, logger="app.chain.refunds"):
        shop.watch()
    shown = refunds_of(shop, process_id)
    assert shown[first["refundId"]]["status"] == "completed"
    assert shown[first["refundId"]]["sender"] == deposit
    assert shown[first["refundId"]]["transfers"] == [
        {"txHash": paid, "logIndex": 0, "blockNumber": block, "amount": "4"}]
    cleared = shown[second["refundId"]]
    assert (cleared["status"], cleared["txHash"], cleared["namedBy"], cleared["sender"]) == (
        "pending", None, None, None)
    assert (cleared["clearedTxHash"], cleared["clearedReason"]) == (
        short, f"Transaction {short} moves less than the refund's amount to the refund's address.")
    assert (f"refund {second['refundId']}: transaction {short} moves less than the refund's amount"
            " to the refund's address: its name is cleared and the refund stays pending"
            in caplog.text)
    assert shop.event_types(process_id).count("refund.completed") == 1
    # Named again with the transaction that paid the first: refused, one transfer one refund.
    assert_error(name(shop, process_id, second["refundId"], paid), 409, "invalid_state")


def test_a_completed_refund_whose_transfer_leaves_the_chain_is_pending_again(
        app, client, runner, chain, clock, make_merchant):
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop, process_id = new_shop(app, client, runner, chain, clock, make_merchant())
    customer = chain.accounts[13]
    made = refund(shop, process_id, 5, customer)
    before = chain.snapshot()
    chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    chain.mine(CONFIRMATIONS + 3)
    clock.advance(30)
    shop.watch()
    assert status_of(shop, process_id, made) == "completed"
    height = chain.head()
    chain.revert(before)  # a reorganisation deeper than the confirmations: another chain, longer
    chain.mine(height - chain.head() + 2)
    shop.watch()
    shown = refunds_of(shop, process_id)[made["refundId"]]
    assert (shown["status"], shown["txHash"], shown["transfers"], shown["sender"]) == (
        "pending", None, [], None)  # its sender is forgotten with its transfer
    assert shop.event_types(process_id)[-2:] == ["refund.completed", "refund.reversed"]
    [(_, event)] = [e for e in shop.events(process_id) if e[0] == "refund.reversed"]
    assert event["data"]["refunds"][0]["status"] == "pending"
    shop.watch()  # reported once
    assert shop.event_types(process_id).count("refund.reversed") == 1
    again, _ = chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)  # paid again
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert refunds_of(shop, process_id)[made["refundId"]]["txHash"] == again


def _settle_through(app, url, chain, clock):
    """One refunds step as the watcher runs it, through `url`."""
    db = app.extensions["db"]
    network = payment_rows.get_network(db.connection(), NETWORK)
    head = chain.head()
    return chain_refunds.settle(db, rpc.Client(url), network, head,
                                head - network.confirmations + 1, clock.now, max_range=2000,
                                max_addresses=500)


def test_a_log_marked_removed_or_from_another_chain_s_node_records_nothing(
        app, client, runner, chain, live_chain, clock, make_merchant):
    """The refunds' logs come through a proxy: once marked `removed`, then (with the headers) from
    the node of chain 137, where the same wallet paid the same customer at the same height: each is
    a fault that records nothing; the honest answer then completes the refund with the real
    transfer."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop, process_id = new_shop(app, client, runner, chain, clock, make_merchant())
    customer = chain.accounts[14]
    made = refund(shop, process_id, 5, customer)
    clock.advance(30)
    paid, block = chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    live_chain.mine(block - 1 - live_chain.head())
    _, elsewhere = live_chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    assert elsewhere == block
    shop.watch()  # the watcher keeps block `block`; the transfer is not yet deep enough
    assert status_of(shop, process_id, made) == "pending"
    chain.mine(CONFIRMATIONS - 1)
    proxy = FaultyRpc(chain.url)
    try:
        proxy.fail("eth_getLogs", "removed")
        try:
            _settle_through(app, proxy.url, chain, clock)
            raise AssertionError("a log marked removed was taken")
        except NotProven:
            pass
        assert status_of(shop, process_id, made) == "pending"
        proxy.route(live_chain.url, "eth_getLogs")
        proxy.route(live_chain.url, "eth_getBlockByNumber")
        try:
            _settle_through(app, proxy.url, chain, clock)
            raise AssertionError("another chain's log was taken")
        except rpc.ChainMoved:  # the kept block pinned in the logs' batch is not that node's
            pass
        assert status_of(shop, process_id, made) == "pending"
        proxy.clear()
        assert _settle_through(app, proxy.url, chain, clock) == 1
    finally:
        proxy.close()
    shown = refunds_of(shop, process_id)[made["refundId"]]
    assert shown["status"] == "completed" and shown["txHash"] == paid
    assert shown["transfers"][0]["blockNumber"] == block


class LaggingLogs(FaultyRpc):
    """A pool whose node answering a lone `eth_getLogs` lags at block `lag`: as geth does, it
    answers the range up to its own head, and nothing above it, without an error."""

    lag = None

    def answer(self, body):
        if self.lag is not None and isinstance(body, dict) and body.get("method") == "eth_getLogs":
            query = dict(body["params"][0])
            if int(query["fromBlock"], 16) > self.lag:
                return 200, self._json({"jsonrpc": "2.0", "id": body["id"], "result": []})
            query["toBlock"] = hex(min(int(query["toBlock"], 16), self.lag))
            body = dict(body, params=[query])
        return super().answer(body)


def test_a_node_lagging_behind_the_payout_transfer_never_makes_the_search_skip_it(
        app, client, runner, chain, clock, make_merchant):
    """The refunds' eth_getLogs goes in one batch with a kept block at or above the step's end
    (pinned, as the payments' reads): a node of the pool lagging below the transfer's block cannot
    answer it alone with an empty list the search would move past for good."""
    proxy = LaggingLogs(chain.url)
    try:
        add_network(runner, chain, confirmations=CONFIRMATIONS, rpc_url=proxy.url)
        shop, process_id = new_shop(app, client, runner, chain, clock, make_merchant())
        customer = chain.accounts[15]
        made = refund(shop, process_id, 5, customer)
        clock.advance(30)
        chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
        paid, block = chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
        chain.mine(CONFIRMATIONS)
        proxy.lag = block - 1
        shop.watch()
        proxy.lag = None
        shop.watch()
        assert status_of(shop, process_id, made) == "completed"
        assert refunds_of(shop, process_id)[made["refundId"]]["txHash"] == paid
    finally:
        proxy.close()


def test_a_late_payments_event_carries_its_own_process_refunds(app, client, runner, chain, clock,
                                                                make_merchant):
    """Two completed processes paid again, settled in one confirm batch: each payment.received_late
    carries its own process's refunds (the watcher reads them once for the batch)."""
    merchant = make_merchant()
    shop = open_shop(app, client, runner, chain, clock, merchant, confirmations=CONFIRMATIONS)
    refunded, other = paid_order(shop, chain), paid_order(shop, chain)
    clock.now = chain.timestamp() + 10
    made = refund(shop, refunded, 5, chain.accounts[5])
    for process_id in (refunded, other):
        chain.transfer(shop.process(process_id)["payment"]["address"], 1_000_000)
    chain.mine(CONFIRMATIONS - 1)
    clock.advance(30)
    shop.watch()
    late = {process_id: [data for kind, data in shop.events(process_id)
                         if kind == "payment.received_late"] for process_id in (refunded, other)}
    [refunded_event], [other_event] = late[refunded], late[other]
    assert refunded_event["data"]["refunds"] == [dict(made, transfers=[])]
    assert other_event["data"]["refunds"] == []
    assert refunded_event["data"]["payment"]["amountPaid"] == "20.99"
