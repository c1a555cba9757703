"""Refunds of live payments: the merchant API's and the console's operations.

The service holds no key: the merchant pays a refund from its own wallet, in the payment's token on
the payment's network, to the customer's address: from its payout address (found by itself), or
from another of its own addresses (a deposit address of its payments, the payout address one
forwards to) and names the transaction (`name_transaction`); the chain watcher marks it `completed`
when that transfer is confirmed (app/chain/refunds.py). A bystander's transfer (the customer's own,
a stranger's, another merchant's) settles nothing, named or not. Amounts are in token units at the
API (a JSON number, at most the token's decimals) and integer base units inside.

Creating and cancelling are one write transaction each, holding the process's row (PostgreSQL:
FOR UPDATE; SQLite: the single writer), with the event in it: two refunds made at once see each
other's amounts, so together they never exceed what was paid. Decisions: docs/api.md ("Refunds").
"""
import hashlib
import re
import uuid
from decimal import Decimal, InvalidOperation

from app.core.money import format_units, significant_places, to_base_units
from app.core.records import FINAL_STATUSES
from app.data import idempotency as idempotency_rows
from app.data import payments as payment_rows
from app.data import payouts as payout_rows
from app.data import processes as process_rows
from app.data import refunds as refund_rows
from app.data.refunds import Refund
from app.domain.outbox import emit
from app.domain.processes import IdempotencyKeyReused, InvalidState, ProcessNotFound
from app.domain.representation import refund_json
from app.evm import addresses

REASON_MAX_LENGTH = 500
BY_SECRET_KEY = "secret key"  # namedBy of a transaction named through the merchant API
ZERO_ADDRESS = "0x" + "0" * 40
_REFUND_ID = re.compile(r"rf_[0-9a-f]{32}")
_TX_HASH = re.compile(r"0x[0-9a-fA-F]{64}")


class RefundNotFound(LookupError):
    pass


class RefundError(ValueError):
    """The request cannot be refunded as given; `errors` maps fields to messages (400)."""

    def __init__(self, errors):
        super().__init__(" ".join(f"{k}: {' '.join(v)}" for k, v in errors.items()))
        self.errors = errors


class NotRefundable(InvalidState):
    """409 invalid_state: the process has no confirmed money to refund, or the refund is final."""

    def __init__(self, message, status):
        ValueError.__init__(self, message)
        self.status = status


def new_refund_id() -> str:
    return "rf_" + uuid.uuid4().hex


def _process(conn, merchant_id, process_id):
    process = process_rows.get_for_merchant(conn, merchant_id, process_id)
    if process is None:
        raise ProcessNotFound(process_id)
    return process


def _remaining(conn, view, process_id) -> int:
    """What may still be refunded: paid, less every refund not cancelled (pending ones included)."""
    committed = sum(r.amount for r in refund_rows.of_process(conn, process_id)
                    if r.status != "cancelled")
    return max(view.paid - committed, 0)


def _refundable_view(conn, process, now):
    """The payment view of a process with confirmed money that is final, else NotRefundable. A
    pending process may still be paid in full (or cancelled): its money is refunded once final."""
    status = process.effective_status(now)
    view = payment_rows.view_of(conn, process.id)
    if view is None or view.paid == 0:
        raise NotRefundable(f"Process {process.id} has no confirmed payment to refund.", status)
    if status not in FINAL_STATUSES:
        raise NotRefundable(
            f"Process {process.id} is {status}: its payment can be refunded once it is completed,"
            " cancelled or expired.", status)
    return view


def refundable(db, merchant_id, process_id, now) -> str | None:
    """What may still be refunded, in token units ("0" when everything is), or None when the
    process cannot be refunded at all (the console shows its Refund action from this)."""
    conn = db.connection()
    process = _process(conn, merchant_id, process_id)
    try:
        view = _refundable_view(conn, process, int(now))
    except NotRefundable:
        return None
    return format_units(_remaining(conn, view, process_id), view.payment.decimals)


def _amount(literal, decimals, remaining) -> int:
    """The amount literal (a JSON number, token units) in base units, or RefundError."""
    def refuse(message):
        raise RefundError({"amount": [message]})

    try:
        value = Decimal(literal)
    except InvalidOperation:
        refuse("Must be a finite number.")
    if not value.is_finite() or not value > 0:
        refuse("Must be greater than 0.")
    most = format_units(remaining, decimals)
    if value > Decimal(most):  # before any scaling: an exponent literal stays cheap
        refuse(f"Must be at most {most}: what was paid less every refund not cancelled.")
    if significant_places(value) > decimals:
        refuse(f"Must have at most {decimals} decimal places (the token's).")
    return to_base_units(format(value, "f"), decimals)


def _address(text, payment) -> str:
    """The customer's address in EIP-55 form, or RefundError."""
    def refuse(message):
        raise RefundError({"address": [message]})

    if not addresses.is_checksum_valid(text):
        refuse("Must be 0x followed by 40 hexadecimal digits, with a valid EIP-55 checksum when it"
               " mixes upper and lower case.")
    checksummed = addresses.to_checksum_address(text)
    if checksummed == ZERO_ADDRESS:
        refuse("Must not be the zero address: tokens sent there are lost.")
    if checksummed in (payment.address, payment.token_contract):
        refuse("Must be the customer's address, not the payment's deposit address or token"
               " contract.")
    return checksummed


def create(db, merchant_id, process_id, *, amount, address, reason=None, now) -> Refund:
    """A pending refund of `amount` (a decimal literal in token units) to `address`, with its
    refund.created event. ProcessNotFound (404), NotRefundable (409), RefundError (400)."""
    with db.transaction() as conn:
        return _create(conn, merchant_id, process_id, amount, address, reason, int(now))


def create_once(db, merchant_id, process_id, *, amount, address, reason=None, now,
                idempotency_key, idempotency_ttl) -> tuple[str, bool]:
    """`create` under an Idempotency-Key, as a preorder's: (the Refund object's JSON, replayed).
    The same key with the same request within `idempotency_ttl` answers the first response again;
    with another request, IdempotencyKeyReused (409). Only a created refund is remembered."""
    now = int(now)
    fingerprint = hashlib.sha256(
        "\n".join(("refund", process_id, amount, address, reason or "")).encode("utf-8")
    ).hexdigest()
    with db.transaction() as conn:
        idempotency_rows.lock(conn, merchant_id, idempotency_key)
        found = idempotency_rows.find(conn, merchant_id, idempotency_key, now - idempotency_ttl)
        if found is not None:
            if found[0] != fingerprint:
                raise IdempotencyKeyReused(
                    "This Idempotency-Key was already used with a different request.")
            return found[1], True
        body = refund_json(_create(conn, merchant_id, process_id, amount, address, reason, now))
        idempotency_rows.save(conn, merchant_id, idempotency_key, fingerprint, process_id, body,
                              now)
    return body, False


def _create(conn, merchant_id, process_id, amount, address, reason, now) -> Refund:
    if reason is not None and len(reason) > REASON_MAX_LENGTH:
        raise RefundError({"reason": [f"Longer than maximum length {REASON_MAX_LENGTH}."]})
    if reason is not None and "\x00" in reason:  # text for people; PostgreSQL's text cannot hold it
        raise RefundError({"reason": ["Must not contain the NUL character."]})
    if reason is not None and any(0xD800 <= ord(c) <= 0xDFFF for c in reason):  # not UTF-8
        raise RefundError({"reason": ["Must not contain unpaired UTF-16 surrogate escapes."]})
    process_rows.lock(conn, process_id)
    process = _process(conn, merchant_id, process_id)
    view = _refundable_view(conn, process, now)
    payment = view.payment
    errors, checked = {}, {}
    for field, check in (("address", lambda: _address(address, payment)),
                         ("amount", lambda: _amount(amount, payment.decimals,
                                                    _remaining(conn, view, process_id)))):
        try:
            checked[field] = check()
        except RefundError as e:  # every field's error at once, not one at a time
            errors.update(e.errors)
    if errors:
        raise RefundError(errors)
    to, units = checked["address"], checked["amount"]
    network = payment_rows.get_network(conn, payment.network_id)
    refund = Refund(
        id=new_refund_id(), process_id=process_id, merchant_id=merchant_id, status="pending",
        asset_id=payment.asset_id, network_id=payment.network_id, chain_id=payment.chain_id,
        token_contract=payment.token_contract, decimals=payment.decimals, amount=units,
        address=to, reason=reason, created_at=now, updated_at=now,
        # Blocks already read when the refund is made are older than it (their timestamps are
        # checked anyway); a margin of the confirmation depth covers a node a little ahead.
        scanned_block=max(network.start_block - 1, network.head_block - network.confirmations),
    )
    refund_rows.insert(conn, refund)
    emit(conn, "refund.created", process, now, payment=view)
    return refund


def list_for_process(db, merchant_id, process_id) -> list[Refund]:
    """The process's refunds, oldest first (ProcessNotFound for another merchant's)."""
    conn = db.connection()
    _process(conn, merchant_id, process_id)
    return refund_rows.of_process(conn, process_id)


def of_processes(db, processes) -> dict[str, list[Refund]]:
    """The refunds of these processes by process id, for their Process objects (one query)."""
    return refund_rows.of_processes(db.connection(), [p.id for p in processes])


def _pending_refund(conn, merchant_id, process_id, refund_id, action):
    """The refund, its process locked; RefundNotFound (404), NotRefundable when not pending
    (409)."""
    if not _REFUND_ID.fullmatch(refund_id):
        raise RefundNotFound(refund_id)
    process_rows.lock(conn, process_id)
    process = _process(conn, merchant_id, process_id)
    refund = refund_rows.get(conn, process_id, refund_id)
    if refund is None:
        raise RefundNotFound(refund_id)
    if refund.status != "pending":
        raise NotRefundable(f"Refund {refund_id} is {refund.status}; only a pending refund can"
                            f" {action}.", refund.status)
    return process, refund


def name_transaction(db, merchant_id, process_id, refund_id, tx_hash, now, *,
                     named_by=BY_SECRET_KEY) -> Refund:
    """The merchant names the transaction that paid a pending refund (0x + 64 hex digits, else
    RefundError): the watcher completes the refund when that transaction is confirmed and holds
    its transfer from one of the merchant's own addresses (app/chain/refunds.py). Naming again
    replaces the name (the same hash again changes nothing). `named_by`: the console user's e-mail,
    or "secret key" (the merchant API). A transaction named by, or found paying, another refund of
    the same merchant not cancelled is NotRefundable (409), as is a refund no longer pending;
    another merchant's names are never looked at (neither told nor able to block this one);
    RefundNotFound (404)."""
    if not _TX_HASH.fullmatch(tx_hash):
        raise RefundError({"txHash": ["Must be 0x followed by 64 hexadecimal digits (the"
                                      " transaction's hash)."]})
    tx_hash = tx_hash.lower()
    with db.transaction() as conn:
        _, refund = _pending_refund(conn, merchant_id, process_id, refund_id,
                                    "be given its transaction")
        if refund.named_tx_hash == tx_hash:
            return refund
        refund_rows.lock_name(conn, merchant_id, refund.chain_id, tx_hash)
        if refund_rows.hash_taken(conn, merchant_id, refund.chain_id, tx_hash, refund.id):
            raise NotRefundable(f"Transaction {tx_hash} is already named for another refund: one"
                                " transfer settles one refund.", refund.status)
        refund_rows.name(conn, refund.id, tx_hash, named_by, int(now))
        return refund_rows.get(conn, process_id, refund_id)


def sent_from_payout(db, refund) -> bool:
    """Whether a completed refund's transfer came from the merchant's payout address (its current
    one, or the one the payment's deposit address forwards to): the console says so."""
    if refund.status != "completed" or not getattr(refund, "sender", None):
        return False
    conn = db.connection()
    payment = payment_rows.get_payment(conn, refund.process_id)
    payouts = {payout_rows.get_payout(conn, refund.merchant_id),
               payment.payout_address if payment else None} - {None}
    return refund.sender.lower() in {a.lower() for a in payouts}


def cancel(db, merchant_id, process_id, refund_id, now) -> Refund:
    """pending -> cancelled, with refund.cancelled. RefundNotFound (404); a refund already
    completed or cancelled is NotRefundable (409)."""
    now = int(now)
    with db.transaction() as conn:
        process, _ = _pending_refund(conn, merchant_id, process_id, refund_id, "be cancelled")
        if not refund_rows.cancel(conn, refund_id, now):  # settled meanwhile (SQLite: never)
            raise NotRefundable(f"Refund {refund_id} is no longer pending.", "completed")
        emit(conn, "refund.cancelled", process, now)
        return refund_rows.get(conn, process_id, refund_id)
