"""Refunds settled on the real test chain: a payment completed by the watcher, refunds made through
the merchant API, the merchant's wallet (a funded dev account) paying the customers' addresses,
and the watcher's CLI marking the refunds that a confirmed transfer pays `completed`; the signed
`refund.completed` webhook, verified with the `standardwebhooks` package, carries it."""
import json

from standardwebhooks.webhooks import Webhook

from support.chain_shop import Shop, add_network
from support.helpers import Api, assert_error
from support.receiver import receiver  # noqa: F401  (fixture)

CONFIRMATIONS = 2
MERCHANT_WALLET = 0  # the dev account holding the test token: the merchant's own wallet


def refund(shop, process_id, amount, address):
    response = shop.client.post(
        f"/payment-button/process/{process_id}/refunds",
        data=json.dumps({"amount": amount, "address": address, "reason": "Returned"}),
        content_type="application/json", headers=shop.api.headers())
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def refunds_of(shop, process_id):
    response = shop.client.get(f"/payment-button/process/{process_id}/refunds",
                               headers=shop.api.headers())
    assert response.status_code == 200
    return {r["refundId"]: r for r in response.get_json()["data"]}


def paid_order(shop, chain):
    process_id, address = shop.order(19.99)
    chain.transfer(address, 19_990_000)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.process(process_id)["status"] == "completed"
    return process_id


def test_a_refund_is_completed_by_the_merchants_confirmed_transfer(app, client, runner, chain, clock,
                                                                   make_merchant, receiver):  # noqa: F811
    merchant = make_merchant(webhook_url=receiver.url("/hooks/refunds"))
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop = Shop(app, Api(client, merchant["secretKey"]), runner, chain, clock, merchant, client)
    shop.sync_clock()
    process_id = paid_order(shop, chain)
    customer, other_customer = chain.accounts[5], chain.accounts[6]

    # Sent before the refund exists: it does not pay it.
    chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    clock.now = chain.timestamp() + 10
    made = refund(shop, process_id, 5, customer)
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
    assert refunds_of(shop, process_id)[made["refundId"]]["status"] == "pending"

    # A cancelled refund is not settled by a transfer that would have paid it.
    cancelled = refund(shop, process_id, 1, other_customer)
    response = client.delete(f"/payment-button/process/{process_id}/refunds/{cancelled['refundId']}",
                             headers=shop.api.headers())
    assert response.status_code == 200 and response.get_json()["status"] == "cancelled"
    chain.transfer(other_customer, 1_000_000, sender=MERCHANT_WALLET)  # a block after createdAt

    # The payment: pending until it has its confirmations, then completed.
    tx_hash, block = chain.transfer(customer, 5_000_000, sender=MERCHANT_WALLET)
    shop.watch()
    assert refunds_of(shop, process_id)[made["refundId"]]["status"] == "pending"
    chain.mine(CONFIRMATIONS - 1)
    clock.advance(30)
    shop.watch()
    shown = refunds_of(shop, process_id)
    assert shown[cancelled["refundId"]]["status"] == "cancelled"
    assert shown[cancelled["refundId"]]["transfers"] == []
    completed = shown[made["refundId"]]
    assert completed == {**made, "status": "completed", "updatedAt": completed["updatedAt"],
                         "transfers": [{"txHash": tx_hash, "logIndex": 0, "blockNumber": block,
                                        "amount": "5"}]}
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

    delivered = runner.invoke(args=["deliver-webhooks", "--once"])
    assert delivered.exit_code == 0, delivered.output
    received = receiver.wait_for(5)
    verifier = Webhook(merchant["webhookSecret"])
    bodies = [verifier.verify(r.body, r.headers) for r in received]
    [event] = [b for b in bodies if b["type"] == "refund.completed"]
    assert event["data"]["processId"] == process_id
    assert event["data"]["status"] == "completed"
    assert event["data"]["payment"]["amountPaid"] == "19.99"
    assert [(r["refundId"], r["status"]) for r in event["data"]["refunds"]] == [
        (made["refundId"], "completed"), (cancelled["refundId"], "cancelled")]
    assert event["data"]["refunds"][0]["transfers"] == completed["transfers"]


def test_one_transfer_settles_one_refund_the_oldest(app, client, runner, chain, clock,
                                                     make_merchant):
    merchant = make_merchant()
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop = Shop(app, Api(client, merchant["secretKey"]), runner, chain, clock, merchant, client)
    shop.sync_clock()
    process_id = paid_order(shop, chain)
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


def test_a_late_payments_event_carries_its_own_process_refunds(app, client, runner, chain, clock,
                                                                make_merchant):
    """Two completed processes paid again, settled in one confirm batch: each payment.received_late
    carries its own process's refunds (the watcher reads them once for the batch)."""
    merchant = make_merchant()
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop = Shop(app, Api(client, merchant["secretKey"]), runner, chain, clock, merchant, client)
    shop.sync_clock()
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
