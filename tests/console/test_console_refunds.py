"""The console's refund page says who paid a refund and who named its transaction, and shows a name
the watcher cleared with its reason (docs/console.md "Refunds"; API.md "Refunds": `sender`,
`namedBy`, `clearedTxHash`, `clearedReason`). Test client over HTTP, real database; the watcher's
writes made with its own functions (app/data/refunds.py), settlement on a real node being
tests/chain/test_refund_bystanders.py's."""
import html
import json
from types import SimpleNamespace

import pytest
from support.chain_shop import XPUB, cli
from support.console import csrf_of, log_in
from support.live_payments import USDC_LOCAL, add_transfer

from app.data import refunds as refund_rows

PAYOUT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
STRANGER_TX = "0x" + "5e" * 32


@pytest.fixture
def pending(runner, app, api, merchant):
    """A completed live payment (its confirmed transfer written as the watcher does), the merchant's
    payout address, and a pending refund made through the API: (process id, refund)."""
    cli(runner, "networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
        "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
    cli(runner, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_LOCAL, "--decimals", "6", "--skip-contract-check")
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    pid = api.preorder({"amount": 10}).get_json()["processId"]
    confirmed = api.client.post(f"/payment-button/process/{pid}/confirm",
                                data=json.dumps({"assetId": "usdc", "networkId": "local"}),
                                content_type="application/json",
                                headers={"x-public-key": merchant["publicKey"]})
    assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
    add_transfer(app, pid, "aa", 0, 10_000_000, 10, "confirmed")
    cli(runner, "processes", "complete", pid)
    cli(runner, "merchants", "set-payout", merchant["merchantId"], PAYOUT)
    refund = api.client.post(f"/payment-button/process/{pid}/refunds", headers=api.headers(),
                             json={"amount": 4, "address": "0x" + "ab" * 20})
    assert refund.status_code == 200, refund.get_data(as_text=True)
    return pid, refund.get_json()


def _refund_json(api, pid):
    return api.client.get(f"/payment-button/process/{pid}/refunds",
                          headers=api.headers()).get_json()["data"][0]


def test_a_name_shows_who_gave_it_and_a_cleared_one_its_reason(runner, client, app, api, merchant,
                                                               pending):
    pid, refund = pending
    console = log_in(runner, client, merchant, "owner@shop.example")
    path = f"/dashboard/processes/{pid}/refunds/{refund['refundId']}"
    page = console.get(path)
    assert 'id="named-by"' not in page.text and 'id="cleared"' not in page.text
    named = console.post(path + "/transaction", follow_redirects=True,
                         data={"csrf_token": csrf_of(page.text), "tx_hash": STRANGER_TX})
    assert named.status_code == 200
    assert '<dd id="named-by">owner@shop.example</dd>' in named.text
    assert _refund_json(api, pid)["namedBy"] == "owner@shop.example"

    reason = (f"Transaction {STRANGER_TX} was sent from an address that is not yours alone: only"
              " your own payment settles your refund.")
    db = app.extensions["db"]
    with db.transaction() as conn:  # as the watcher clears it
        assert refund_rows.clear_name(conn, refund["refundId"], STRANGER_TX, reason, 1_795_000_100)
    shown = _refund_json(api, pid)
    assert (shown["txHash"], shown["namedBy"], shown["clearedTxHash"], shown["clearedReason"]) == (
        None, None, STRANGER_TX, reason)
    page = console.get(path).text
    assert f'<span class="mono wrap" id="cleared-tx">{STRANGER_TX}</span>' in page
    assert f'<span id="cleared-reason">{html.escape(reason)}</span>' in page
    assert 'id="named-by"' not in page and 'name="tx_hash"' in page

    viewer = log_in(runner, app.test_client(), merchant, "viewer@shop.example", role="viewer")
    seen = viewer.get(path).text  # a viewer sees the cleared name and why, not the form
    assert f'<span id="cleared-reason">{html.escape(reason)}</span>' in seen
    assert 'name="tx_hash"' not in seen


def test_a_refund_completed_from_the_payout_address_says_so(runner, client, app, api, merchant,
                                                            pending):
    pid, refund = pending
    db = app.extensions["db"]
    entry = SimpleNamespace(tx_hash="0x" + "e1" * 32, log_index=0, block_number=12,
                            amount=4_000_000)
    header = SimpleNamespace(timestamp=1_795_000_200, hash="0x" + "b1" * 32)
    anchor = SimpleNamespace(number=12, hash=header.hash)
    with db.transaction() as conn:  # as the watcher completes it, found by itself
        assert refund_rows.complete(conn, refund["refundId"], entry, PAYOUT, header, anchor,
                                    1_795_000_200)
    shown = _refund_json(api, pid)
    assert (shown["status"], shown["sender"], shown["namedBy"]) == ("completed", PAYOUT, None)
    console = log_in(runner, client, merchant, "owner@shop.example")
    page = console.get(f"/dashboard/processes/{pid}/refunds/{refund['refundId']}").text
    assert f'id="refund-sender" title="{PAYOUT}"' in page
    assert '<span class="hint" id="sender-payout">sent from your payout address</span>' in page
    assert ('<dd id="named-by">nobody: the watcher found the transfer by itself</dd>' in page)
