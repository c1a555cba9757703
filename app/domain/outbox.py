"""Webhook events: the one place they are written (`emit`), and what operators do with them.

The `events` table is the outbox: `emit` is called inside the write transaction that made the
change it reports, so the change and its event commit together or not at all; the delivery worker
(app/worker.py) sends them. Operators list them, look at their attempts and replay them.
"""
import uuid

from app.data import outbox as event_rows
from app.data import payments as payment_rows
from app.data import refunds as refund_rows
from app.domain.representation import event_json, iso, process_json

EVENT_TYPES = (
    "payment.completed", "payment.failed", "process.cancelled", "process.expired",
    # Live payments, written by the chain watcher (app/chain/watcher/).
    "payment.pending", "payment.partial", "payment.received_late", "payment.reversed",
    "payment.unexpected",
    # Refunds (app/domain/refunds.py; refund.completed and refund.reversed by the chain watcher,
    # app/chain/refunds.py).
    "refund.created", "refund.completed", "refund.cancelled", "refund.reversed",
)


def new_event_id() -> str:
    return "evt_" + uuid.uuid4().hex


_LOAD = object()


def emit(conn, event_type, process, now, payment=_LOAD, refunds=_LOAD) -> str:
    """Write one event about `process` (as it is after the change) and return its id. Its data
    carries the process's payment: `payment` (a PaymentView, or None) and its `refunds` (oldest
    first), each read with `conn` unless given (only a process with a payment can have refunds)."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    if payment is _LOAD:
        payment = payment_rows.view_of(conn, process.id)
    if payment is None:
        refunds = ()
    elif refunds is _LOAD:
        refunds = refund_rows.of_process(conn, process.id)
    event_id = new_event_id()
    event_rows.insert(
        conn,
        id=event_id,
        merchant_id=process.merchant_id,
        process_id=process.id,
        type=event_type,
        payload=event_json(event_type, now, process_json(process, now, payment, refunds)),
        now=now,
    )
    return event_id


TEST_EVENT_TYPE = "webhook.test"
DELIVERY_STATES = event_rows.STATES  # the events list's filter: pending, retrying, failing, ...


class EventNotFound(LookupError):
    pass


class NotReplayed(ValueError):
    """The event cannot be re-queued now; str() says why."""


class EventInFlight(NotReplayed):
    """The event is leased by a worker attempting it right now."""


class TestEventWaiting(ValueError):
    """The merchant's previous test event has not been attempted yet."""


def queue_test(db, merchant, now) -> str:
    """Queue one test event (`webhook.test`) for the merchant's endpoint; its id. Like every event
    it is sent by the delivery worker, signed, and its attempt recorded, so no web worker waits on
    the endpoint; unlike them it has no process, is attempted once (never retried or re-queued),
    and only one waits per merchant (TestEventWaiting: a unique index, events_one_pending_test)."""
    now = int(now)
    payload = (f'{{"type":"{TEST_EVENT_TYPE}","timestamp":"{iso(now)}","data":{{"merchantId":'
               f'"{merchant.id}","livemode":{"true" if merchant.livemode else "false"}}}}}')
    event_id = new_event_id()
    try:
        with db.transaction() as conn:
            event_rows.insert(conn, id=event_id, merchant_id=merchant.id, process_id=None,
                              type=TEST_EVENT_TYPE, payload=payload, now=now)
    except db.errors as e:
        if not event_rows.test_waiting(db.connection(), merchant.id):
            raise
        raise TestEventWaiting("A test event is already waiting for the delivery worker: its result"
                               " shows below when it comes.") from e
    return event_id


def tests_of(db, merchant_id, limit=5):
    """A merchant's latest test events, newest first, each with its attempts: [(event, attempts)]."""
    conn = db.connection()
    return [(event, event_rows.attempts_of(conn, event.id))
            for event in event_rows.tests_of(conn, merchant_id, limit)]


def list_recent(db, *, limit, status=None, merchant_id=None):
    return event_rows.list_recent(db.connection(), limit=limit, status=status, merchant_id=merchant_id)


def get_with_attempts(db, event_id):
    """(event, attempts oldest first)."""
    conn = db.connection()
    event = event_rows.get(conn, event_id)
    if event is None:
        raise EventNotFound(event_id)
    return event, event_rows.attempts_of(conn, event_id)


def replay(db, event_id, now):
    """Re-queue one event, whatever its status, for an attempt at once.

    Its attempt history is kept; its attempt count starts from zero, so the whole retry schedule
    applies again."""
    now = int(now)
    with db.transaction() as conn:
        event = event_rows.get(conn, event_id)
        if event is None:
            raise EventNotFound(event_id)
        if event.process_id is None:
            raise NotReplayed(f"Event {event_id} is a test event, sent once: send another instead.")
        if not event_rows.requeue(conn, event_id, now):
            raise EventInFlight(f"Event {event_id} is being attempted right now; try again shortly.")
    return event_rows.get(db.connection(), event_id)


def replay_where(db, now, *, statuses, merchant_id=None, since=None) -> list[str]:
    """Re-queue every event in one of `statuses`; returns their ids."""
    with db.transaction() as conn:
        return event_rows.requeue_where(conn, int(now), statuses=statuses, merchant_id=merchant_id,
                                        since=since)


def for_process(db, process_id):
    """Every event of one process, oldest first."""
    return event_rows.for_process(db.connection(), process_id)


def page_of(db, merchant_id, *, type=None, state=None, before=None, limit=50):
    """(events newest first, each with its last attempt or None, has_more): the console's list of
    a merchant's events, before the event `before` (an id of this merchant's, else from the top)."""
    conn = db.connection()
    anchor = event_rows.get(conn, before) if before else None
    before_seq = anchor.seq if anchor is not None and anchor.merchant_id == merchant_id else None
    events, more = event_rows.page_of(conn, merchant_id, type=type, state=state, before_seq=before_seq,
                                      limit=limit)
    return [(e, (event_rows.attempts_of(conn, e.id) or [None])[-1]) for e in events], more


def failing(db, merchant_id, limit=50):
    """A merchant's events whose delivery is failing (failed, or retrying), newest first."""
    return event_rows.failing(db.connection(), merchant_id, limit)
