"""Payment processes: creation (with Idempotency-Key) and the state transitions.

Every transition is one write transaction that re-checks the state with a guarded UPDATE and writes
its webhook event before committing: of two racing transitions exactly one wins, and no event is
written for the loser.
"""
import hashlib
import uuid
from dataclasses import replace
from decimal import Decimal

from app.core import currency as currencies
from app.core.money import significant_places
from app.core.records import Process
from app.data import idempotency as idempotency_rows
from app.data import processes as process_rows
from app.domain.outbox import emit
from app.domain.representation import process_json


class ProcessNotFound(LookupError):
    pass


class InvalidState(ValueError):
    def __init__(self, process_id, status, wanted):
        super().__init__(f"Process {process_id} is {status}; only a pending process can be"
                         f" {wanted}.")
        self.status = status


class IdempotencyKeyReused(ValueError):
    pass


class InvalidAmount(ValueError):
    """The amount has more places than its currency allows; `errors` names the field."""

    def __init__(self, message):
        super().__init__(f"amount: {message}")
        self.errors = {"amount": [message]}


def request_fingerprint(amount: str, metadata: str, code=None, *page) -> str:
    """The request as an Idempotency-Key remembers it; `code` the preorder's own currency field and
    `page` its checkout fields (None: not given; all absent, the form of requests made before)."""
    fields = [amount, metadata] + ([] if code is None and not any(page) else [code or ""])
    if any(page):
        fields += [value or "" for value in page]
    return hashlib.sha256("\n".join(fields).encode("utf-8")).hexdigest()


class InvalidUrl(ValueError):
    """A success or cancel URL a live merchant may not use; `errors` names the field."""

    def __init__(self, field):
        message = "Must be an https:// URL: live payments never send a customer to plain http."
        super().__init__(f"{field}: {message}")
        self.errors = {field: [message]}


def check_fields(merchant, amount, code, *, success_url=None, cancel_url=None):
    """What the schema cannot check alone: InvalidAmount when the amount has more places than its
    currency allows; InvalidUrl for a live merchant's plain-http success or cancel URL."""
    places = currencies.minor_digits(code)
    if significant_places(Decimal(amount)) > places:
        raise InvalidAmount(f"Must have at most {places} decimal places ({code}).")
    for field, url in (("successUrl", success_url), ("cancelUrl", cancel_url)):
        if url is not None and merchant.livemode and not url.lower().startswith("https://"):
            raise InvalidUrl(field)


def new_process(merchant, amount, metadata, now, ttl, **fields) -> Process:
    """A new pending process of the merchant (`fields`: currency and the checkout fields)."""
    return Process(seq=None, id=str(uuid.uuid4()), merchant_id=merchant.id, status="pending",
                   amount=amount, metadata=metadata, livemode=merchant.livemode, created_at=now,
                   updated_at=now, expires_at=now + ttl, **fields)


def create_preorder(db, merchant, *, amount, metadata, now, ttl, idempotency_key=None,
                    idempotency_ttl=86400, currency=None, description=None, success_url=None,
                    cancel_url=None, checkout_base=None, link_id=None):
    """Create a pending process, in `currency` (None: the merchant's). Returns (response_body,
    replayed). InvalidAmount when the amount has more places than the currency allows; InvalidUrl
    for a live merchant's plain-http success or cancel URL. `checkout_base`: the service's public
    base URL its checkoutUrl is made with."""
    now = int(now)
    code = currency or merchant.currency
    check_fields(merchant, amount, code, success_url=success_url, cancel_url=cancel_url)
    fingerprint = request_fingerprint(amount, metadata, currency, description, success_url,
                                      cancel_url) if idempotency_key else None
    search = process_rows.search_values(metadata)  # parsed before the write lock is taken
    # Nobody knows the new processId before this answer, so the commit's sync may wait outside the
    # write lock (app/db/sqlite/database.py); a replayed answer syncs too, so it never reports an
    # unsynced process.
    with db.transaction(sync_outside_lock=True) as conn:
        if idempotency_key:
            idempotency_rows.lock(conn, merchant.id, idempotency_key)
            found = idempotency_rows.find(conn, merchant.id, idempotency_key, now - idempotency_ttl)
            if found is not None:
                stored_fingerprint, stored_body = found
                if stored_fingerprint != fingerprint:
                    raise IdempotencyKeyReused(
                        "This Idempotency-Key was already used with a different request body."
                    )
                return stored_body, True
        process = new_process(merchant, amount, metadata, now, ttl, currency=code,
                              description=description, success_url=success_url,
                              cancel_url=cancel_url, checkout_base=checkout_base, link_id=link_id)
        process_rows.insert(conn, process, search)
        body = process_json(process, now)
        if idempotency_key:
            idempotency_rows.save(conn, merchant.id, idempotency_key, fingerprint, process.id, body,
                                  now)
    return body, False


def get(db, merchant_id, process_id) -> Process:
    """One process, scoped to `merchant_id` (None: any merchant's, as an operator sees them)."""
    return _load(db.connection(), process_id, merchant_id)


def page(db, merchant_id, *, now, limit, status=None, starting_after=None):
    """(processes, has_more) newest first, of `merchant_id` (None: every merchant's);
    starting_after must be one of those processes' ids."""
    conn = db.connection()
    before_seq = None
    if starting_after is not None:
        before_seq = _load(conn, starting_after, merchant_id).seq
    return process_rows.list_page(
        conn, now=int(now), limit=limit, merchant_id=merchant_id, status=status,
        before_seq=before_seq,
    )


def search_value(text) -> str:
    """A search box's text as the search index keeps values (data/processes.py search_value)."""
    return process_rows.search_value(text)


def filtered_page(db, merchant_id, *, now, limit, before_seq=None, **filters):
    """The console's list: (processes, has_more), newest first, before the process numbered
    `before_seq`; `filters` those of data/processes.py list_page (status, value, dates,
    conditions)."""
    return process_rows.list_page(db.connection(), now=now, limit=limit, merchant_id=merchant_id,
                                  before_seq=before_seq, **filters)


def meets(db, process_id, conditions) -> bool:
    """Whether the process meets every (name of data/processes.py CONDITIONS, value) given."""
    return process_rows.meets(db.connection(), process_id, conditions)


def _load(conn, process_id, merchant_id):
    """The process, scoped to its merchant when one is given (an operator sees every process)."""
    if merchant_id is None:
        process = process_rows.get(conn, process_id)
    else:
        process = process_rows.get_for_merchant(conn, merchant_id, process_id)
    if process is None:
        raise ProcessNotFound(process_id)
    return process


def _transition(db, process_id, to_status, event_type, verb, now, merchant_id=None,
                completed_by=None):
    now = int(now)
    with db.transaction() as conn:
        process = _load(conn, process_id, merchant_id)
        status = process.effective_status(now)
        if status != "pending" or not process_rows.transition(conn, process_id, to_status, now,
                                                              completed_by):
            raise InvalidState(process_id, status, verb)
        process = replace(process, status=to_status, updated_at=now)
        emit(conn, event_type, process, now)
    return process


def cancel(db, process_id, now, merchant_id=None) -> Process:
    return _transition(db, process_id, "cancelled", "process.cancelled", "cancelled", now,
                       merchant_id)


def complete(db, process_id, now, merchant_id=None, by="operator") -> Process:
    """Completed by hand (`by`: 'operator', `processes complete`; 'sandbox', a test-mode sandbox
    payment), which `reconcile` takes as the record that supports it."""
    return _transition(db, process_id, "completed", "payment.completed", "completed", now,
                       merchant_id, completed_by=by)


def record_failed_payment(db, process_id, now, merchant_id=None) -> Process:
    """A failed payment attempt: the process stays pending (the customer may retry until it
    expires) and a payment.failed event is written."""
    now = int(now)
    with db.transaction() as conn:
        process = _load(conn, process_id, merchant_id)
        status = process.effective_status(now)
        if status != "pending":
            raise InvalidState(process_id, status, "paid")
        emit(conn, "payment.failed", process, now)
    return process


def expire_due(db, now, batch_size=500) -> int:
    """Mark pending processes past their expiry as expired, one process.expired event each.
    Safe to run from several workers at once: the guarded UPDATE lets one of them win per
    process."""
    now = int(now)
    expired = 0
    while True:
        with db.transaction() as conn:
            ids = process_rows.due_for_expiry(conn, now, batch_size)
            for process_id in ids:
                if process_rows.expire(conn, process_id, now):
                    process = process_rows.get(conn, process_id)
                    emit(conn, "process.expired", process, now)
                    expired += 1
        if len(ids) < batch_size:
            return expired
