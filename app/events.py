"""Event emission: the one place every webhook event is written to the outbox.

`emit` must be called inside the write transaction that made the change it reports, so the change
and its event commit together or not at all.
"""
import uuid

from app.data import events as event_rows
from app.data import payments as payment_rows
from app.representation import event_json, process_json

EVENT_TYPES = ("payment.completed", "payment.failed", "process.cancelled", "process.expired")


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex


_LOAD = object()


def emit(conn, event_type, process, now, payment=_LOAD, payment_json=None) -> str:
    """Write one event about `process` (as it is after the change) and return its id. Its data
    carries the process's payment: `payment` (a PaymentView, or None), read with `conn` unless
    given, or `payment_json`, the object already rendered by the caller."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    if payment_json is not None:
        payment = payment_json
    elif payment is _LOAD:
        payment = payment_rows.view_of(conn, process.id)
    event_id = new_event_id()
    event_rows.insert(
        conn,
        id=event_id,
        merchant_id=process.merchant_id,
        process_id=process.id,
        type=event_type,
        payload=event_json(event_type, now, process_json(process, now, payment)),
        now=now,
    )
    return event_id
