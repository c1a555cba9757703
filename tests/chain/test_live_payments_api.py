"""Live payments through the Button API: GET /payment-button/assets, POST …/confirm, and the
`payment` object in every view of a process (merchant API, public view, webhook bodies).

Networks, assets and xpubs are set up with the operator CLI. Transfers are rows the chain watcher
writes; where a test needs some, it writes them into the real database file as the watcher would
(the watcher itself is tested against a real node in tests/chain/)."""
import json

import pytest
from support.chain_shop import XPUB, cli
from support.helpers import START, Api, assert_error
from support.live_payments import (
    ADDRESS_0,
    ADDRESS_1,
    DAI_LOCAL,
    USDC_LOCAL,
    USDC_TEST,
    Button,
    add_transfer,
    db,
    preorder,
    set_head,
)

from app.domain.representation import iso
from app.web import qr


def usdc_local(address, due="19.99", units=19_990_000, paid="0", pending="0", outstanding=None,
               transfers=()):
    return {
        "assetId": "usdc", "networkId": "local", "chainId": 31337, "tokenContract": USDC_LOCAL,
        "address": address, "amountDue": due, "amountPaid": paid, "amountPending": pending,
        "paymentUri": f"ethereum:{USDC_LOCAL}@31337/transfer?address={address}"
                      f"&uint256={units if outstanding is None else outstanding}",
        "transfers": list(transfers), "unexpectedTransfers": [], "finality": "confirmations",
        "quote": {"currency": "USD", "amount": due, "rate": "1", "pair": None, "inverse": False,
                  "source": "par", "networkId": None, "feed": None, "roundId": None,
                  "rateUpdatedAt": None, "quotedAt": iso(START)},
    }


# GET /payment-button/assets

def test_assets_grouped_by_id_enabled_networks_only(button, wallet):
    response = button.assets()
    assert response.status_code == 200
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert response.get_json() == {"data": [
        {"id": "dai", "symbol": "DAI", "name": "Dai",
         "networks": [{"id": "local", "name": "Local chain", "chainId": 31337, "confirmations": 3,
                       "finality": "confirmations"}]},
        {"id": "usdc", "symbol": "USDC", "name": "USD Coin",
         "networks": [{"id": "local", "name": "Local chain", "chainId": 31337, "confirmations": 3,
                       "finality": "confirmations"},
                      {"id": "testnet", "name": "Test net", "chainId": 11155111,
                       "confirmations": 12, "finality": "confirmations"}]},
        {"id": "whole", "symbol": "WHL", "name": "Whole token",
         "networks": [{"id": "local", "name": "Local chain", "chainId": 31337, "confirmations": 3,
                       "finality": "confirmations"}]},
    ]}


def test_assets_empty_for_a_merchant_without_xpub(button, chains):
    response = button.assets()
    assert response.status_code == 200
    assert response.get_json() == {"data": []}


def test_assets_needs_the_public_key(client, wallet):
    response = client.get("/payment-button/assets")
    assert_error(response, 401, "missing_public_key")
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    response = client.post("/payment-button/assets", headers={"x-public-key": wallet["publicKey"]})
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["Access-Control-Allow-Origin"] == "*"


# The payment object

def test_a_new_process_has_a_null_payment_everywhere(api, button, merchant):
    created = preorder(api)
    assert list(created)[-2:] == ["payment", "refunds"] and created["payment"] is None
    assert api.get(created["processId"]).get_json()["payment"] is None
    public = button.public(created["processId"]).get_json()
    assert list(public) == ["processId", "status", "amount", "currency", "expiresAt", "livemode",
                            "networkState", "payment"]
    assert public["payment"] is None


def test_confirm_gives_the_next_address_and_shows_the_payment(api, button, wallet, clock):
    first, second = preorder(api), preorder(api, amount=5)
    response = button.confirm(first["processId"])
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert response.get_json() == {
        "processId": first["processId"], "status": "pending", "amount": 19.99, "currency": "USD",
        "expiresAt": first["expiresAt"], "livemode": False, "networkState": "ok",
        "payment": usdc_local(ADDRESS_0),
    }
    body = button.confirm(second["processId"]).get_json()
    assert body["payment"] == usdc_local(ADDRESS_1, due="5", units=5_000_000)
    # The merchant API, the list and the public view all show it (last but the refunds in key
    # order).
    got = api.get(first["processId"]).get_json()
    assert list(got)[-2:] == ["payment", "refunds"] and got["payment"] == usdc_local(ADDRESS_0)
    page = api.list().get_json()["data"]
    assert [p["payment"]["address"] for p in page] == [ADDRESS_1, ADDRESS_0]
    assert button.public(first["processId"]).get_json()["payment"] == usdc_local(ADDRESS_0)


def test_confirm_again_keeps_the_address_and_may_change_the_choice(api, button, wallet, app):
    process = preorder(api)
    pid = process["processId"]
    first = button.confirm(pid).get_json()
    assert button.confirm(pid).get_json() == first  # same choice: idempotent
    changed = button.confirm(pid, "usdc", "testnet").get_json()["payment"]
    assert changed["address"] == ADDRESS_0
    assert (changed["networkId"], changed["chainId"], changed["tokenContract"]) == (
        "testnet", 11155111, USDC_TEST)
    dai = button.confirm(pid, "dai", "local").get_json()["payment"]
    assert dai["amountDue"] == "19.99"
    assert dai["paymentUri"] == (f"ethereum:{DAI_LOCAL}@31337/transfer?address={ADDRESS_0}"
                                 f"&uint256=19990000000000000000")
    with db(app) as conn:
        assert conn.execute("SELECT next_index FROM merchant_wallets").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM payments").fetchone()[0] == 1


def test_the_qr_code_is_drawn_for_the_current_payment_uri(api, button, wallet, app, make_merchant):
    """GET …/qr.svg: the service's SVG of paymentUri (decoded with zbar in tests/button), following
    the customer's choice and what is still outstanding; 404 before a choice; never cached."""
    pid = preorder(api)["processId"]
    assert_error(button.qr(pid), 404, "not_found")
    assert button.qr(pid).headers["Access-Control-Allow-Origin"] == "*"
    assert_error(button.qr(pid, headers={}), 401, "missing_public_key")
    other = make_merchant()["publicKey"]
    assert_error(button.qr(pid, headers={"x-public-key": other}), 404, "not_found")

    def drawn():
        response = button.qr(pid)
        assert response.status_code == 200
        assert response.headers["Content-Type"] == "image/svg+xml; charset=utf-8"
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["Access-Control-Allow-Origin"] == "*"
        return response.get_data(as_text=True)

    dai = button.confirm(pid, "dai", "local").get_json()["payment"]["paymentUri"]
    assert drawn() == qr.svg(dai)
    uri = button.confirm(pid).get_json()["payment"]["paymentUri"]
    assert uri != dai and drawn() == qr.svg(uri)
    add_transfer(app, pid, "aa", 0, 10_000_000, block=5, status="seen")
    rest = button.public(pid).get_json()["payment"]["paymentUri"]
    assert rest.endswith("&uint256=9990000") and drawn() == qr.svg(rest)


def test_a_transfer_with_an_earlier_choice_shows_in_the_current_ones_units(api, button, wallet,
                                                                           app):
    """Chosen: DAI on `local` (18 decimals); then USDC on `testnet` (6). A DAI transfer on `local`
    (what the watcher records for the earlier choice) counts in USDC's units, the wei that USDC
    cannot hold left out, with its confirmations counted on its own network."""
    pid = preorder(api)["processId"]
    assert button.confirm(pid, "dai", "local").status_code == 200
    assert button.confirm(pid, "usdc", "testnet").status_code == 200
    with db(app) as conn:
        conn.execute(
            "INSERT INTO transfers (chain_id, tx_hash, log_index, network_id, process_id,"
            " token_contract, from_address, amount, block_number, block_hash, block_timestamp,"
            " status, seen_at, confirmed_at) VALUES (31337, ?, 0, 'local', ?, ?, ?, ?, 10, ?,"
            " 1795000100, 'confirmed', 1795000100, 1795000100)",
            ("0x" + "ee" * 32, pid, DAI_LOCAL.lower(), "0x" + "ab" * 20,
             str(19_990_000_000_000_000_001), "0x" + "cd" * 32),
        )
    set_head(app, 12)
    payment = button.public(pid).get_json()["payment"]
    assert (payment["networkId"], payment["assetId"], payment["amountDue"]) == (
        "testnet", "usdc", "19.99")
    assert (payment["amountPaid"], payment["amountPending"]) == ("19.99", "0")
    assert payment["transfers"] == [{"txHash": "0x" + "ee" * 32, "logIndex": 0, "blockNumber": 10,
                                     "amount": "19.99", "confirmations": 3}]
    assert payment["paymentUri"].endswith("&uint256=0")


def test_an_amount_the_token_cannot_hold_is_refused(api, button, wallet):
    pid = preorder(api)["processId"]
    body = assert_error(button.confirm(pid, "whole", "local"), 400, "validation_error")
    assert body["errors"] == {"assetId": [
        "The amount 19.99 cannot be paid in WHL: the token has 0 decimal places."
        " Choose another asset."
    ]}
    assert button.public(pid).get_json()["payment"] is None
    whole = button.confirm(preorder(api, amount=7)["processId"], "whole", "local").get_json()
    assert whole["payment"]["amountDue"] == "7"
    assert whole["payment"]["paymentUri"].endswith("&uint256=7")


def test_large_amounts_of_an_18_decimal_token_stay_exact(api, button, wallet):
    pid = preorder(api, amount=999999.99)["processId"]
    payment = button.confirm(pid, "dai", "local").get_json()["payment"]
    assert payment["amountDue"] == "999999.99"
    assert payment["paymentUri"].endswith("&uint256=999999990000000000000000")


def test_confirm_without_xpub_is_payment_method_unavailable(api, button, chains):
    pid = preorder(api)["processId"]
    assert_error(button.confirm(pid), 409, "payment_method_unavailable",
                 "This merchant cannot take live payments yet: no payout address or wallet (xpub)"
                 " is registered.")


def test_a_wallet_whose_address_indexes_are_used_up_is_payment_method_unavailable(
        api, button, wallet, app):
    """The last unhardened index (2**31 - 1) is given out; then the wallet has no address left,
    and the 409 says so (not that no xpub is registered)."""
    with db(app) as conn:  # 2**31 - 1 addresses given out before: only reachable by hand here
        conn.execute("UPDATE merchant_wallets SET next_index = ?", (2**31 - 1,))
    last = button.confirm(preorder(api)["processId"])
    assert last.status_code == 200, last.get_data(as_text=True)
    pid = preorder(api)["processId"]
    assert_error(button.confirm(pid), 409, "payment_method_unavailable",
                 "This merchant cannot take live payments: every deposit address of its wallet"
                 " has been given out.")
    assert button.public(pid).get_json()["payment"] is None
    with db(app) as conn:
        assert conn.execute("SELECT next_index FROM merchant_wallets").fetchone()[0] == 2**31
        assert [r[0] for r in conn.execute("SELECT address_index FROM payments")] == [2**31 - 1]


@pytest.mark.parametrize("asset, network, errors", [
    ("usdc", "nowhere",
     {"networkId": ["No enabled network 'nowhere': see GET /payment-button/assets."]}),
    ("usdc", "gone", {"networkId": ["No enabled network 'gone': see GET /payment-button/assets."]}),
    ("usdt", "local", {"assetId": [
        "No enabled asset 'usdt' on network 'local': see GET /payment-button/assets."]}),
    ("dai", "testnet", {"assetId": [
        "No enabled asset 'dai' on network 'testnet': see GET /payment-button/assets."]}),
])
def test_unknown_or_disabled_choices_are_400(api, button, wallet, asset, network, errors):
    pid = preorder(api)["processId"]
    body = assert_error(button.confirm(pid, asset, network), 400, "validation_error")
    assert body["errors"] == errors


@pytest.mark.parametrize("body, errors", [
    ({}, {"assetId": ["Missing data for required field."],
          "networkId": ["Missing data for required field."]}),
    ({"assetId": "usdc", "networkId": "local", "amount": 1}, {"amount": ["Unknown field."]}),
    ({"assetId": 1, "networkId": "local"}, {"assetId": ["Must be a JSON string."]}),
    ({"assetId": "usdc", "networkId": None}, {"networkId": ["Must be a JSON string, not null."]}),
    ({"assetId": ["usdc"], "networkId": "local"}, {"assetId": ["Must be a JSON string."]}),
    ({"assetId": "", "networkId": "local"}, {"assetId": ["Length must be between 1 and 64."]}),
])
def test_malformed_confirm_bodies_are_400(api, button, wallet, body, errors):
    pid = preorder(api)["processId"]
    response = assert_error(button.confirm(pid, body=body), 400, "validation_error")
    assert response["errors"] == errors


def test_confirm_of_a_final_or_unknown_process(api, button, wallet, clock, make_merchant, client):
    cancelled = preorder(api)["processId"]
    api.cancel(cancelled)
    assert_error(button.confirm(cancelled), 409, "invalid_state",
                 f"Process {cancelled} is cancelled; only a pending process can be paid.")
    other = make_merchant(name="Other")
    foreign = preorder(Api(client, other["secretKey"]))["processId"]
    assert_error(button.confirm(foreign), 404, "not_found")
    late = preorder(api)["processId"]
    clock.advance(1800)
    assert_error(button.confirm(late), 409, "invalid_state",
                 f"Process {late} is expired; only a pending process can be paid.")


def test_the_choice_is_locked_once_a_transfer_is_seen(api, button, wallet, app):
    pid = preorder(api)["processId"]
    button.confirm(pid)
    add_transfer(app, pid, "aa", 0, 1_000_000, 10, "orphaned")
    assert button.confirm(pid, "usdc", "testnet").status_code == 200  # orphaned ones do not lock
    button.confirm(pid)
    add_transfer(app, pid, "cc", 0, 0, 10, "confirmed")  # value 0, as an earlier release recorded
    assert button.confirm(pid, "usdc", "testnet").status_code == 200  # no payment: no lock
    button.confirm(pid)
    add_transfer(app, pid, "bb", 0, 1_000_000, 11, "seen")
    assert_error(button.confirm(pid, "usdc", "testnet"), 409, "invalid_state",
                 f"A payment to process {pid}'s address has already been seen on chain: its asset"
                 " and network can no longer change.")
    assert button.confirm(pid).status_code == 200  # the same choice again is fine


def test_transfers_sums_confirmations_and_outstanding(api, button, wallet, app):
    pid = preorder(api)["processId"]
    button.confirm(pid)
    add_transfer(app, pid, "22", 5, 4_000_000, 12, "seen")
    add_transfer(app, pid, "11", 3, 10_000_000, 10, "confirmed")
    add_transfer(app, pid, "33", 0, 99_000_000, 11, "orphaned")
    add_transfer(app, pid, "44", 1, 10_000, 12, "seen")
    set_head(app, 12)
    assert api.get(pid).get_json()["payment"] == usdc_local(
        ADDRESS_0, paid="10", pending="4.01", outstanding=5_980_000, transfers=[
            {"txHash": "0x" + "11" * 32, "logIndex": 3, "blockNumber": 10, "amount": "10",
             "confirmations": 3},
            {"txHash": "0x" + "44" * 32, "logIndex": 1, "blockNumber": 12, "amount": "0.01",
             "confirmations": 1},
            {"txHash": "0x" + "22" * 32, "logIndex": 5, "blockNumber": 12, "amount": "4",
             "confirmations": 1},
        ])
    add_transfer(app, pid, "55", 0, 6_000_000, 13, "seen")  # beyond the head last seen
    payment = button.public(pid).get_json()["payment"]
    assert payment["transfers"][-1]["confirmations"] == 0
    assert payment["amountPending"] == "10.01"
    assert payment["paymentUri"].endswith("&uint256=0")  # overpaid: nothing outstanding


def test_webhook_bodies_carry_the_payment(api, button, wallet, app, merchant):
    pid = preorder(api)["processId"]
    button.confirm(pid)
    api.cancel(pid)
    with db(app) as conn:
        payload = conn.execute(
            "SELECT payload FROM events WHERE process_id = ? AND type = 'process.cancelled'", (pid,)
        ).fetchone()[0]
    data = json.loads(payload)["data"]
    assert data["metadata"] == {"orderRef": "A-1"}
    assert list(data)[-2:] == ["payment", "refunds"] and data["payment"] == usdc_local(ADDRESS_0)
    assert data["refunds"] == []
    other = preorder(api)["processId"]
    api.cancel(other)
    with db(app) as conn:
        payload = conn.execute("SELECT payload FROM events WHERE process_id = ?",
                               (other,)).fetchone()[0]
    assert json.loads(payload)["data"]["payment"] is None


def test_an_address_already_given_out_is_skipped(api, button, wallet, app, make_merchant, runner,
                                                 client):
    """Two wallets that derive the same addresses (an xpub moved between merchants after its first
    was removed by hand) never give one address to two processes."""
    button.confirm(preorder(api)["processId"])
    other = make_merchant(name="Other")
    with db(app) as conn:  # what an operator's hand-edit could leave: the same xpub twice
        conn.execute("INSERT INTO merchant_wallets (merchant_id, xpub, next_index, updated_at)"
                     " VALUES (?, ?, 0, 0)", (other["merchantId"], XPUB))
    pid = preorder(Api(client, other["secretKey"]))["processId"]
    payment = Button(client, other["publicKey"]).confirm(pid).get_json()["payment"]
    assert payment["address"] == ADDRESS_1
    with db(app) as conn:
        assert conn.execute("SELECT next_index FROM merchant_wallets WHERE merchant_id = ?",
                            (other["merchantId"],)).fetchone()[0] == 2


def test_replacing_the_xpub_never_reuses_an_index(api, button, wallet, runner, app):
    button.confirm(preorder(api)["processId"])
    cli(runner, "merchants", "set-xpub", wallet["merchantId"], XPUB)
    assert button.confirm(preorder(api)["processId"]).get_json()["payment"]["address"] == ADDRESS_1
    with db(app) as conn:
        assert conn.execute("SELECT next_index FROM merchant_wallets").fetchone()[0] == 2


@pytest.mark.sqlite_only  # counts statements through sqlite3's trace callback
def test_a_page_reads_payments_and_transfers_in_two_queries(api, button, wallet, app):
    ids = [preorder(api)["processId"] for _ in range(5)]
    for pid in ids:
        button.confirm(pid)
        add_transfer(app, pid, pid[:2].replace("-", "0"), ids.index(pid), 1, 10, "seen")
    statements = []
    with app.app_context():
        conn = app.extensions["db"].connection()  # the test client's requests run on this thread
        conn.set_trace_callback(statements.append)
        try:
            page = api.list().get_json()["data"]
            listed = list(statements)
            statements.clear()
            created = preorder(api)
        finally:
            conn.set_trace_callback(None)
    assert [len(p["payment"]["transfers"]) for p in page] == [1] * 5
    # (The page's own query reads the paid-in-time hold from transfers in a subquery: not counted.)
    reads = [s for s in listed
             if ("FROM payments" in s or "FROM transfers" in s) and "FROM processes" not in s]
    assert len(reads) == 2, reads  # the page's payments, then their transfers: not one per process
    assert created["payment"] is None
    assert statements and not [s for s in statements if "payments" in s or "transfers" in s]
