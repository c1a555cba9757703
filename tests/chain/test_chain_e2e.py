"""End to end on the real test chain: preorder, the customer's choice (its deposit address), a
token transfer from a funded dev account, the chain watcher's CLI, the delivery worker's CLI, and a
real local receiver that gets the signed `payment.completed` carrying the metadata and the tx hash,
verified with the `standardwebhooks` package as a merchant would."""


from support.chain_shop import open_shop

CONFIRMATIONS = 2


def test_preorder_to_a_signed_payment_completed_webhook(app, client, runner, chain, clock,
                                                        make_merchant, receiver):
    merchant = make_merchant(webhook_url=receiver.url("/hooks/chain"))
    shop = open_shop(app, client, runner, chain, clock, merchant, confirmations=CONFIRMATIONS)
    process_id, address = shop.order(19.99, {"orderRef": "A-1042", "email": "buyer@example.com"})

    tx_hash, block = chain.transfer(address, 19_990_000)
    shop.watch()
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    delivered = runner.invoke(args=["deliver-webhooks", "--once"])
    assert delivered.exit_code == 0, delivered.output

    received = receiver.wait_for(2)  # delivered concurrently: in either order
    assert [r.path for r in received] == ["/hooks/chain", "/hooks/chain"]
    by_type = {r.verified(merchant["webhookSecret"], clock.now)["type"]: r for r in received}
    assert set(by_type) == {"payment.pending", "payment.completed"}
    completed = by_type["payment.completed"]
    body = completed.verified(merchant["webhookSecret"], clock.now)
    assert body["type"] == "payment.completed"
    assert body["data"]["processId"] == process_id
    assert body["data"]["status"] == "completed"
    assert body["data"]["metadata"] == {"orderRef": "A-1042", "email": "buyer@example.com"}
    payment = body["data"]["payment"]
    assert (payment["amountDue"], payment["amountPaid"], payment["amountPending"]) == (
        "19.99", "19.99", "0")
    assert payment["transfers"] == [{"txHash": tx_hash, "logIndex": 0, "blockNumber": block,
                                     "amount": "19.99", "confirmations": CONFIRMATIONS}]
    assert shop.process(process_id)["status"] == "completed"
