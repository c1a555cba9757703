"""What confirmed money does to a process: the event written for its transfers just confirmed (or
accepted as payment), and its completion when what counts covers what is due (docs/payments.md:
transfers in time, the payment's tolerance). Used by the chain watcher's steps and confirm phase,
and by staff accepting an unexpected transfer; all in the caller's transaction.
"""
from collections import Counter
from dataclasses import replace

from app.core.records import PaymentView
from app.data import payments as payment_rows
from app.data import processes as process_rows
from app.data import refunds as refund_rows
from app.domain.outbox import emit


def settle_all(conn, confirmed, now, read=None) -> Counter:
    """Each process's event for `confirmed` ({process id: its transfers just confirmed}), in the
    caller's transaction; the events written, by type. `read`: {process id: (process, view)} read
    earlier in the transaction, before these transfers were recorded (the scan step's), else they
    are read now."""
    outcomes = Counter()
    if not confirmed:
        return outcomes
    if read is None:  # two queries for all the views: a settlement changes no other process
        processes = process_rows.get_many(conn, confirmed)
        views = payment_rows.views_of(conn, confirmed)
    else:  # the step's own transfers are the only change since (a concurrent watcher's step
        # would make this one's compare-and-set fail and roll it back)
        processes = {process_id: read[process_id][0] for process_id in confirmed}
        views = {process_id: with_transfers(read[process_id][1], done)
                 for process_id, done in confirmed.items()}
    refunds = refund_rows.of_processes(conn, confirmed)  # for the events: one query
    for process_id, done in confirmed.items():
        outcomes[settle(conn, processes[process_id], views[process_id], done, now,
                        refunds.get(process_id, ()))] += 1
    return outcomes


def settle(conn, process, view, confirmed, now, refunds=None):
    """The event for transfers just confirmed, or accepted as payment (app/domain/unexpected.py), in
    the caller's transaction, and completion when paid; `process` and `view` as they are after them;
    `refunds` the process's (None: read here). Returns the event's type."""
    process_id = process.id
    if process.status != "pending" or not in_time(process, confirmed):
        event = "payment.received_late"
    else:
        counted = [t for t in view.transfers if t.status == "confirmed"]
        if view.payment.covered_by(paid(in_time(process, counted))):
            if not process_rows.complete_paid(conn, process_id, now):
                raise RuntimeError("a pending process could not be completed")  # rolls back
            process = replace(process, status="completed", updated_at=now)
            event = "payment.completed"
        else:
            event = "payment.partial"
    if refunds is None:
        refunds = refund_rows.of_process(conn, process_id)
    emit(conn, event, process, now, payment=view, refunds=refunds)
    return event


def with_transfers(view, transfers):
    """The view with `transfers` added, in the order views_of gives (block, then log index)."""
    return PaymentView(view.payment, tuple(sorted(view.transfers + tuple(transfers),
                                                  key=lambda t: (t.block_number, t.log_index))),
                       view.unexpected)


def on_choice(payment, transfer) -> bool:
    """Whether the transfer is in the payment's current token (its amount in the due's units); one
    sent with an earlier choice counts only as views_of rescales it."""
    return (transfer.network_id == payment.network_id
            and transfer.token_contract.lower() == payment.token_contract.lower())


def in_time(process, transfers):
    """The transfers whose block is at or before the process's expiry (docs/payments.md)."""
    return [t for t in transfers if t.block_timestamp <= process.expires_at]


def paid(transfers) -> int:
    return sum(t.amount for t in transfers)
