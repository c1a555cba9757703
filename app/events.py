"""Event emission: the one place every webhook event is written to the outbox.

`emit` must be called inside the write transaction that made the change it reports, so the change
and its event commit together or not at all.
"""
import uuid

from app.data import events as event_rows
from app.representation import event_json, process_json

EVENT_TYPES = (
    "payment.completed", "payment.failed", "process.cancelled", "process.expired",
    # Live payments, written by the chain watcher (app/chain/watcher.py).
    "payment.pending", "payment.partial", "payment.received_late",
)


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex


def emit(conn, event_type, process, now, payment_json=None) -> str:
    """Write one event about `process` (as it is after the change) and return its id.
    `payment_json`: the process's `payment` object, spliced into its data."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    data = process_json(process, now)
    if payment_json is not None:
        data = data[:-1] + ',"payment":' + payment_json + "}"
    event_id = new_event_id()
    event_rows.insert(
        conn,
        id=event_id,
        merchant_id=process.merchant_id,
        process_id=process.id,
        type=event_type,
        payload=event_json(event_type, now, data),
        now=now,
    )
    return event_id
