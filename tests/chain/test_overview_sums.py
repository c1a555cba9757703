"""The overview's sums, kept current as things happen (app/data/rollups.py), equal a recount from
the history to the unit after a mixed history on the real node: payments in full and in part, one
reversed by a reorganisation deeper than the confirmations, a refund, sandbox payments in two
currencies, a cancelled and an expired process. On both backends."""
import json
from decimal import Decimal

import pytest
from support.chain_shop import cli, open_shop
from test_refunds_chain import send_from

from app.domain import merchants, overview
from app.domain.processes import expire_due
from app.evm.addresses import to_checksum_address

UNIT = 10**6
CONFIRMATIONS = 2


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    return open_shop(app, client, runner, chain, clock, make_merchant(),
                     confirmations=CONFIRMATIONS)


def figures(app, shop, recount):
    db = app.extensions["db"]
    return overview.of_merchant(db, merchants.get(db, shop.merchant["merchantId"]), shop.clock.now,
                                recount=recount)


def sandbox_pay(shop, process_id):
    response = shop.client.post(f"/payment-button/process/{process_id}/sandbox/pay",
                                data=json.dumps({"outcome": "success"}),
                                content_type="application/json",
                                headers={"x-public-key": shop.merchant["publicKey"]})
    assert response.status_code == 200, response.get_data(as_text=True)


def test_the_kept_sums_equal_a_recount_after_a_mixed_history(shop, chain, app, runner):
    paid_id, paid = shop.order(6)
    partial_id, partial = shop.order(10)
    chain.transfer(paid, 6 * UNIT)
    chain.transfer(partial, 4 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    before = chain.snapshot()
    reversed_id, doomed = shop.order(5)
    chain.transfer(doomed, 5 * UNIT)
    chain.mine(CONFIRMATIONS)
    shop.sync_clock()
    shop.watch()
    assert shop.event_types(reversed_id) == ["payment.completed"]
    assert figures(app, shop, False).assets[0].paid[30] == 15  # 6 + 4 + 5, as the history says
    chain.revert(before)  # a longer chain without the last transfer
    chain.mine(CONFIRMATIONS + 12)
    shop.sync_clock()
    shop.watch()
    assert shop.event_types(reversed_id)[-1] == "payment.reversed"

    customer = to_checksum_address(chain.accounts[7])  # refunded from the paid order's own address
    shop.sync_clock()
    made = shop.client.post(f"/payment-button/process/{paid_id}/refunds",
                            headers=shop.api.headers(), json={"amount": 1.5, "address": customer})
    assert made.status_code == 200, made.get_data(as_text=True)
    chain.next_timestamp(chain.timestamp() + 10)  # paid after the refund was made
    tx_hash, _ = send_from(chain, paid, customer, 1_500_000)  # named: not the payout address
    named = shop.client.post(f"/payment-button/process/{paid_id}/refunds/"
                             f"{made.get_json()['refundId']}/transaction",
                             json={"txHash": tx_hash}, headers=shop.api.headers())
    assert named.status_code == 200, named.get_data(as_text=True)
    chain.mine(CONFIRMATIONS)
    shop.sync_clock()
    shop.watch()
    assert shop.api.get(paid_id).get_json()["refunds"][0]["status"] == "completed"

    sandbox_pay(shop, shop.preorder(2.5))
    cli(runner, "merchants", "set-currency", shop.merchant["merchantId"], "EUR")
    sandbox_pay(shop, shop.preorder(1.25))
    sandbox_pay(shop, shop.preorder(0.1))
    assert shop.api.cancel(shop.preorder(3)).status_code == 200
    lapsing = shop.preorder(4)
    shop.clock.now += app.config["PROCESS_TTL_SECONDS"] + 1
    expire_due(app.extensions["db"], shop.clock.now)
    assert shop.process(lapsing)["status"] == "expired"

    kept, recounted = figures(app, shop, False), figures(app, shop, True)
    assert kept == recounted
    [usd_asset] = kept.assets
    assert (usd_asset.paid[30], usd_asset.payments[30]) == (10, 2)  # the reversed one left
    assert usd_asset.refunded[30] == Decimal("1.5")
    assert {c.code: (c.count[30], str(c.amount[30])) for c in kept.sandbox} == {
        "EUR": (2, "1.35"), "USD": (1, "2.5")}
    assert {c.code: (c.count[30], str(c.amount[30])) for c in kept.completed} == {
        "EUR": (2, "1.35"), "USD": (3, "13.5")}  # 6 and 5 (completed before the reversal), 2.5
    assert dict(kept.statuses) == {"pending": 1, "completed": 5, "cancelled": 1, "expired": 1}
