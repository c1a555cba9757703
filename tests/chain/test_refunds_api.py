"""Refunds through the merchant API: POST/GET/DELETE /payment-button/process/<id>/refunds, the
Refund object, the `refunds` list of every Process object and event, and the refund events.

Confirmed transfers are rows the chain watcher writes: written here into the real database as the
watcher would (tests/chain/test_live_payments_api.py does the same); settlement on a real node is in
tests/chain/test_refunds_chain.py."""
import json
import threading

import pytest
from support.chain_shop import OTHER_XPUB, cli
from support.helpers import Api, assert_error, events_of
from support.live_payments import (
    ADDRESS_0,
    USDC_LOCAL,
    Button,
    add_transfer,
    db,
    preorder,
    set_head,
)

CUSTOMER = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"  # Hardhat's second dev account


def refunds_url(process_id, refund_id=None):
    url = f"/payment-button/process/{process_id}/refunds"
    return url if refund_id is None else f"{url}/{refund_id}"


def post_refund(api, process_id, body, raw=None):
    return api.client.post(refunds_url(process_id),
                           data=raw if raw is not None else json.dumps(body),
                           content_type="application/json", headers=api.headers())


def refund_body(amount=5, address=CUSTOMER, **extra):
    return {"amount": amount, "address": address, **extra}


@pytest.fixture
def paid(api, button, wallet, app, runner):
    """A completed process paid 19.99 USDC (6 decimals) by one confirmed transfer."""
    process = preorder(api)
    pid = process["processId"]
    assert button.confirm(pid).status_code == 200
    add_transfer(app, pid, "aa", 0, 19_990_000, 10, "confirmed")
    set_head(app, 14)
    cli(runner, "processes", "complete", pid)
    return pid


def test_a_refund_is_created_listed_and_shown_in_the_process(api, paid, clock, app, runner):
    response = post_refund(api, paid, refund_body(amount=5.5, reason="Damaged in transit"))
    assert response.status_code == 200, response.get_data(as_text=True)
    refund = response.get_json()
    assert refund["refundId"].startswith("rf_") and len(refund["refundId"]) == 35
    created = "2026-11-18T11:06:40Z"
    assert refund == {
        "refundId": refund["refundId"], "processId": paid, "status": "pending", "amount": "5.5",
        "assetId": "usdc", "networkId": "local", "tokenContract": USDC_LOCAL, "address": CUSTOMER,
        "reason": "Damaged in transit",
        "paymentUri": f"ethereum:{USDC_LOCAL}@31337/transfer?address={CUSTOMER}&uint256=5500000",
        "txHash": None, "sender": None, "namedBy": None, "clearedTxHash": None,
        "clearedReason": None, "createdAt": created, "updatedAt": created, "transfers": [],
    }
    assert list(refund) == ["refundId", "processId", "status", "amount", "assetId", "networkId",
                            "tokenContract", "address", "reason", "paymentUri", "txHash",
                            "sender", "namedBy", "clearedTxHash", "clearedReason",
                            "createdAt", "updatedAt", "transfers"]
    listed = api.client.get(refunds_url(paid), headers=api.headers())
    assert listed.status_code == 200 and listed.get_json() == {"data": [refund]}
    process = api.get(paid).get_json()
    assert list(process)[-2:] == ["payment", "refunds"] and process["refunds"] == [refund]
    assert api.list().get_json()["data"][0]["refunds"] == [refund]
    assert events_of(runner, paid) == ["payment.completed", "refund.created"]
    shown = runner.invoke(args=["processes", "show", paid]).output  # the operator's view too
    assert f'"refundId": "{refund["refundId"]}"' in shown
    conn = app.extensions["db"].connection()
    from app.data import outbox as event_rows
    event = json.loads(event_rows.for_process(conn, paid)[-1].payload)
    assert event["type"] == "refund.created"
    assert event["data"]["refunds"] == [refund]
    assert event["data"]["payment"]["amountPaid"] == "19.99"


def test_a_process_without_a_payment_shows_an_empty_refunds_list(api):
    created = preorder(api)
    assert created["refunds"] == []
    assert api.get(created["processId"]).get_json()["refunds"] == []


def test_refunds_add_up_to_what_was_paid_and_a_cancelled_one_frees_its_amount(api, paid, runner):
    first = post_refund(api, paid, refund_body(amount=15)).get_json()
    over = post_refund(api, paid, refund_body(amount=4.991))
    body = assert_error(over, 400, "validation_error")
    assert body["errors"] == {"amount": [
        "Must be at most 4.99: what was paid less every refund not cancelled."]}
    rest = post_refund(api, paid, refund_body(amount=4.99))
    assert rest.status_code == 200 and rest.get_json()["amount"] == "4.99"
    assert_error(post_refund(api, paid, refund_body(amount=0.000001)), 400, "validation_error")

    cancelled = api.client.delete(refunds_url(paid, first["refundId"]), headers=api.headers())
    assert cancelled.status_code == 200
    assert cancelled.get_json() == {**first, "status": "cancelled"}
    again = api.client.delete(refunds_url(paid, first["refundId"]), headers=api.headers())
    assert assert_error(again, 409, "invalid_state")["message"] == (
        f"Refund {first['refundId']} is cancelled; only a pending refund can be cancelled.")
    assert post_refund(api, paid, refund_body(amount=15)).status_code == 200
    assert events_of(runner, paid) == ["payment.completed", "refund.created", "refund.created",
                                       "refund.cancelled", "refund.created"]
    statuses = [r["status"] for r in api.get(paid).get_json()["refunds"]]
    assert statuses == ["cancelled", "pending", "pending"]


@pytest.mark.parametrize("raw, errors", [
    ('{"amount": 0, "address": "%s"}', {"amount": ["Must be greater than 0."]}),
    ('{"amount": -1, "address": "%s"}', {"amount": ["Must be greater than 0."]}),
    ('{"amount": 1.0000001, "address": "%s"}',
     {"amount": ["Must have at most 6 decimal places (the token's)."]}),
    ('{"amount": 1e999999999, "address": "%s"}',
     {"amount": ["Must be at most 19.99: what was paid less every refund not cancelled."]}),
    ('{"amount": 1e-999999999, "address": "%s"}',
     {"amount": ["Must have at most 6 decimal places (the token's)."]}),
    ('{"amount": "5", "address": "%s"}',
     {"amount": ["Must be a JSON number, not a string, boolean, array or object."]}),
    ('{"amount": null, "address": "%s"}', {"amount": ["Must be a JSON number, not null."]}),
    ('{"address": "%s"}', {"amount": ["Missing data for required field."]}),
    ('{"amount": 5, "address": "%s", "reason": 7}', {"reason": ["Must be a JSON string."]}),
    ('{"amount": 5, "address": "%s", "ammount": 7}', {"ammount": ["Unknown field."]}),
])
def test_bad_amounts_and_fields_are_400(api, paid, raw, errors):
    response = post_refund(api, paid, None, raw=raw % CUSTOMER)
    assert assert_error(response, 400, "validation_error")["errors"] == errors


BAD_CHECKSUM = CUSTOMER[:-1] + "c"  # mixed case, one letter's case wrong


@pytest.mark.parametrize("address, message", [
    (BAD_CHECKSUM, "Must be 0x followed by 40 hexadecimal digits, with a valid EIP-55 checksum"
                   " when it mixes upper and lower case."),
    ("0x" + "g" * 40, "Must be 0x followed by 40 hexadecimal digits, with a valid EIP-55 checksum"
                      " when it mixes upper and lower case."),
    ("0x1234", "Must be 0x followed by 40 hexadecimal digits."),
    ("0x" + "0" * 40, "Must not be the zero address: tokens sent there are lost."),
    (ADDRESS_0, "Must be the customer's address, not the payment's deposit address or token"
                " contract."),
    (USDC_LOCAL.lower(), "Must be the customer's address, not the payment's deposit address or"
                         " token contract."),
])
def test_bad_addresses_are_400(api, paid, address, message):
    response = post_refund(api, paid, refund_body(address=address))
    assert assert_error(response, 400, "validation_error")["errors"] == {"address": [message]}


def test_a_lowercase_address_is_stored_in_its_checksum_form(api, paid):
    response = post_refund(api, paid, refund_body(address=CUSTOMER.lower()))
    assert response.status_code == 200 and response.get_json()["address"] == CUSTOMER


def test_a_reason_of_500_characters_is_the_most(api, paid):
    assert post_refund(api, paid, refund_body(reason="é" * 500)).get_json()["reason"] == "é" * 500
    response = post_refund(api, paid, refund_body(reason="x" * 501))
    assert assert_error(response, 400, "validation_error")["errors"] == {
        "reason": ["Longer than maximum length 500."]}


def test_a_reason_holding_nul_is_400_on_every_backend(api, paid):
    response = post_refund(api, paid, refund_body(reason="Returned\u0000"))
    assert assert_error(response, 400, "validation_error")["errors"] == {
        "reason": ["Must not contain the NUL character."]}


def test_a_reason_holding_a_lone_surrogate_is_400_not_500(api, paid):
    # "\ud800" is valid JSON but no UTF-8 text: it could be neither stored nor sent back.
    raw = json.dumps(refund_body(reason="Returned \ud800"))  # ASCII: the escape as sent
    response = post_refund(api, paid, None, raw=raw)
    assert assert_error(response, 400, "validation_error")["errors"] == {
        "reason": ["Must not contain unpaired UTF-16 surrogate escapes."]}


def test_only_a_final_process_with_confirmed_money_can_be_refunded(api, button, wallet, app, runner,
                                                                    clock):
    def refused(pid, message):
        body = assert_error(post_refund(api, pid, refund_body()), 409, "invalid_state")
        assert body["message"] == message

    sandbox = preorder(api)["processId"]  # completed without any payment
    cli(runner, "processes", "complete", sandbox)
    refused(sandbox, f"Process {sandbox} has no confirmed payment to refund.")

    seen_only = preorder(api)["processId"]  # completed by hand, its transfer not yet confirmed
    button.confirm(seen_only)
    add_transfer(app, seen_only, "bb", 0, 19_990_000, 10, "seen")
    cli(runner, "processes", "complete", seen_only)
    refused(seen_only, f"Process {seen_only} has no confirmed payment to refund.")

    partial = preorder(api)["processId"]  # pending, partly paid: it may still be paid in full
    button.confirm(partial)
    add_transfer(app, partial, "cc", 0, 5_000_000, 10, "confirmed")
    refused(partial, f"Process {partial} is pending: its payment can be refunded once it is"
                     " completed, cancelled or expired.")
    clock.advance(1800)  # expired with its partial payment, once the watcher read past the expiry
    refused(partial, f"Process {partial} is pending: its payment can be refunded once it is"
                     " completed, cancelled or expired.")
    with db(app) as conn:
        conn.execute("INSERT INTO chain_blocks (network_id, number, hash, parent_hash, timestamp)"
                     " SELECT 'local', scanned_block, ?, ?, ? FROM networks WHERE id = 'local'",
                     ("0x" + "ee" * 32, "0x" + "ef" * 32, clock.now + 1))
    assert post_refund(api, partial, refund_body(amount=5)).status_code == 200

    late = preorder(api)["processId"]  # cancelled, then paid: received late
    button.confirm(late)
    assert api.cancel(late).status_code == 200
    add_transfer(app, late, "dd", 0, 19_990_000, 10, "confirmed")
    assert post_refund(api, late, refund_body(amount=19.99)).status_code == 200


def test_another_merchants_process_and_unknown_refunds_are_404(api, paid, make_merchant, client):
    other = Api(client, make_merchant(name="Other")["secretKey"])
    assert_error(post_refund(other, paid, refund_body()), 404, "not_found")
    assert_error(other.client.get(refunds_url(paid), headers=other.headers()), 404, "not_found")
    refund = post_refund(api, paid, refund_body()).get_json()
    assert_error(other.client.delete(refunds_url(paid, refund["refundId"]),
                                     headers=other.headers()), 404, "not_found")
    for refund_id in ("rf_" + "0" * 32, "nope", refund["refundId"].upper()):
        response = api.client.delete(refunds_url(paid, refund_id), headers=api.headers())
        assert assert_error(response, 404, "not_found")["message"] == "No such refund."
    unknown = "00000000-0000-4000-8000-000000000000"
    assert_error(api.client.get(refunds_url(unknown), headers=api.headers()), 404, "not_found")


def test_refunds_need_the_secret_key_and_no_browser(api, paid, merchant):
    response = api.client.post(refunds_url(paid), data=json.dumps(refund_body()),
                               content_type="application/json")
    assert_error(response, 401, "missing_secret_key")
    response = api.client.get(refunds_url(paid), headers={"x-secret-key": merchant["publicKey"]})
    assert_error(response, 401, "invalid_secret_key")
    response = api.client.get(refunds_url(paid), headers={**api.headers(), "Origin": "https://x.example"})
    assert_error(response, 403, "browser_request_forbidden")
    assert "Access-Control-Allow-Origin" not in response.headers
    response = api.client.post(refunds_url(paid), data="amount=5", headers=api.headers(),
                               content_type="application/x-www-form-urlencoded")
    assert_error(response, 415, "unsupported_media_type")
    response = api.client.put(refunds_url(paid), headers=api.headers())
    assert_error(response, 405, "method_not_allowed")


def test_concurrent_refunds_never_exceed_what_was_paid(app, api, paid, merchant, runner):
    """Eight requests at once, each for 6 of the 19.99 paid: three fit, the others are refused."""
    barrier = threading.Barrier(8)
    statuses = []

    def refund():
        client = app.test_client()
        barrier.wait()
        response = post_refund(Api(client, merchant["secretKey"]), paid, refund_body(amount=6))
        statuses.append(response.status_code)

    threads = [threading.Thread(target=refund) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200] * 3 + [400] * 5
    refunds = api.get(paid).get_json()["refunds"]
    assert [r["amount"] for r in refunds] == ["6"] * 3
    assert events_of(runner, paid).count("refund.created") == 3


def test_an_idempotency_key_replays_the_first_refund(api, paid, runner):
    headers = {**api.headers(), "Idempotency-Key": "refund-A-1"}

    def post(body):
        return api.client.post(refunds_url(paid), data=json.dumps(body),
                               content_type="application/json", headers=headers)

    first = post(refund_body(amount=5))
    assert first.status_code == 200 and "Idempotent-Replayed" not in first.headers
    again = post(refund_body(amount=5))
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_data() == first.get_data()
    assert_error(post(refund_body(amount=6)), 409, "idempotency_key_reused")
    assert events_of(runner, paid).count("refund.created") == 1
    assert len(api.get(paid).get_json()["refunds"]) == 1
    # A refused request is not remembered: the same key may be used again once it is right.
    headers["Idempotency-Key"] = "refund-A-2"
    assert_error(post(refund_body(amount=50)), 400, "validation_error")
    assert post(refund_body(amount=1)).status_code == 200
    # Preorders and refunds share the merchant's keys.
    reused = api.preorder(headers={"Idempotency-Key": "refund-A-1"})
    assert_error(reused, 409, "idempotency_key_reused")
    blank = api.client.post(refunds_url(paid), data=json.dumps(refund_body()),
                            content_type="application/json",
                            headers={**api.headers(), "Idempotency-Key": " "})
    assert assert_error(blank, 400, "validation_error")["errors"] == {
        "Idempotency-Key": ["Must be 1 to 255 characters, not blank."]}


def name(api, process_id, refund_id, body, raw=None, headers=None):
    return api.client.post(refunds_url(process_id, refund_id) + "/transaction",
                           data=raw if raw is not None else json.dumps(body),
                           content_type="application/json",
                           headers=api.headers() if headers is None else headers)


TX_A, TX_B = "0x" + "ab" * 32, "0x" + "CD" * 32


def test_the_merchant_names_the_transaction_that_paid_a_refund(api, paid, clock, runner):
    refund = post_refund(api, paid, refund_body()).get_json()
    clock.advance(5)
    named = name(api, paid, refund["refundId"], {"txHash": TX_A})
    assert named.status_code == 200, named.get_data(as_text=True)
    assert named.get_json() == {**refund, "txHash": TX_A, "namedBy": "secret key",
                                "updatedAt": "2026-11-18T11:06:45Z"}
    assert api.get(paid).get_json()["refunds"] == [named.get_json()]
    again = name(api, paid, refund["refundId"], {"txHash": TX_A.upper().replace("0X", "0x")})
    assert again.status_code == 200 and again.get_json() == named.get_json()  # nothing changes
    renamed = name(api, paid, refund["refundId"], {"txHash": TX_B})  # a hash pasted wrong, fixed
    assert renamed.status_code == 200 and renamed.get_json()["txHash"] == TX_B.lower()
    assert events_of(runner, paid) == ["payment.completed", "refund.created"]  # no event for a name

    other = post_refund(api, paid, refund_body(amount=1)).get_json()
    taken = name(api, paid, other["refundId"], {"txHash": TX_B})
    assert assert_error(taken, 409, "invalid_state")["message"] == (
        f"Transaction {TX_B.lower()} is already named for another refund: one transfer settles one"
        " refund.")
    assert api.client.delete(refunds_url(paid, refund["refundId"]),
                             headers=api.headers()).status_code == 200
    # a cancelled refund's name frees it
    freed = name(api, paid, other["refundId"], {"txHash": TX_B})
    assert freed.status_code == 200 and freed.get_json()["txHash"] == TX_B.lower()
    cancelled = name(api, paid, refund["refundId"], {"txHash": TX_A})
    assert assert_error(cancelled, 409, "invalid_state")["message"] == (
        f"Refund {refund['refundId']} is cancelled; only a pending refund can be given its"
        " transaction.")


def test_already_named_means_by_the_same_merchant_another_s_name_neither_shows_nor_blocks(
        api, paid, app, client, make_merchant, runner, clock):
    """Another merchant named a hash first: this one names it too (200, its own refund's object and
    nothing of the other's), both names held at once; within one merchant the hash is refused."""
    keys = make_merchant(name="Other")
    cli(runner, "merchants", "set-xpub", keys["merchantId"], OTHER_XPUB)
    other = Api(client, keys["secretKey"])
    other_pid = preorder(other)["processId"]
    assert Button(client, keys["publicKey"]).confirm(other_pid).status_code == 200
    add_transfer(app, other_pid, "ee", 0, 19_990_000, 10, "confirmed")
    cli(runner, "processes", "complete", other_pid)
    theirs = post_refund(other, other_pid, refund_body()).get_json()
    mine = post_refund(api, paid, refund_body()).get_json()
    assert name(other, other_pid, theirs["refundId"], {"txHash": TX_A}).status_code == 200
    clock.advance(5)
    named = name(api, paid, mine["refundId"], {"txHash": TX_A})
    assert named.status_code == 200, named.get_data(as_text=True)
    assert named.get_json() == {**mine, "txHash": TX_A, "namedBy": "secret key",
                                "updatedAt": "2026-11-18T11:06:45Z"}
    # Still theirs.
    assert [r["txHash"] for r in other.get(other_pid).get_json()["refunds"]] == [TX_A]
    again = post_refund(other, other_pid, refund_body(amount=1)).get_json()
    refused = name(other, other_pid, again["refundId"], {"txHash": TX_A})  # its own name: refused
    assert assert_error(refused, 409, "invalid_state")["message"] == (
        f"Transaction {TX_A} is already named for another refund: one transfer settles one refund.")
    second = post_refund(api, paid, refund_body(amount=1)).get_json()
    assert_error(name(api, paid, second["refundId"], {"txHash": TX_A}), 409, "invalid_state")


@pytest.mark.parametrize("raw, errors", [
    ('{"txHash": "0x1234"}', {"txHash": ["Must be 0x followed by 64 hexadecimal digits (the"
                                         " transaction's hash)."]}),
    ('{"txHash": "0x%s"}' % ("g" * 64), {"txHash": ["Must be 0x followed by 64 hexadecimal digits"
                                                    " (the transaction's hash)."]}),
    ('{"txHash": "0x%s\\n"}' % ("a" * 64), {"txHash": ["Must be 0x followed by 64 hexadecimal"
                                                         " digits (the transaction's hash)."]}),
    ('{"txHash": "%s"}' % ("a" * 66), {"txHash": ["Must be 0x followed by 64 hexadecimal digits"
                                                  " (the transaction's hash)."]}),
    ('{"txHash": 12}', {"txHash": ["Must be a JSON string."]}),
    ('{"txHash": null}', {"txHash": ["Must be a JSON string, not null."]}),
    ('{}', {"txHash": ["Missing data for required field."]}),
    ('{"txHash": "0x%s", "hash": 1}' % ("a" * 64), {"hash": ["Unknown field."]}),
])
def test_a_bad_transaction_hash_is_400(api, paid, raw, errors):
    refund = post_refund(api, paid, refund_body()).get_json()
    response = name(api, paid, refund["refundId"], None, raw=raw)
    assert assert_error(response, 400, "validation_error")["errors"] == errors
    assert api.get(paid).get_json()["refunds"][0]["txHash"] is None


def test_naming_needs_the_merchant_s_own_pending_refund(api, paid, make_merchant, client):
    refund = post_refund(api, paid, refund_body()).get_json()
    other = Api(client, make_merchant(name="Other")["secretKey"])
    assert_error(name(other, paid, refund["refundId"], {"txHash": TX_A}), 404, "not_found")
    for refund_id in ("rf_" + "0" * 32, "nope"):
        assert_error(name(api, paid, refund_id, {"txHash": TX_A}), 404, "not_found")
    assert_error(name(api, paid, refund["refundId"], {"txHash": TX_A},
                      headers={**api.headers(), "Origin": "https://x.example"}),
                 403, "browser_request_forbidden")
    assert_error(name(api, paid, refund["refundId"], {"txHash": TX_A}, headers={}), 401,
                 "missing_secret_key")
    assert api.get(paid).get_json()["refunds"][0]["txHash"] is None
