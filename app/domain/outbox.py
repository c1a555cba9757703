"""Webhook events: the one place they are written (`emit`), and what operators do with them.

The `events` table is the outbox: `emit` is called inside the write transaction that made the
change it reports, so the change, its event and the event's deliveries (one per endpoint that wants
it, app/domain/endpoints.py) commit together or not at all; the delivery worker (app/worker.py)
sends them. Operators list them, look at their attempts and replay them.
"""
import re
import uuid

from app.data import endpoints as endpoint_rows
from app.data import outbox as event_rows
from app.data import payments as payment_rows
from app.data import refunds as refund_rows
from app.domain.representation import event_json, process_object

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
        payload=event_json(event_type, now, process_object(process, now, payment, refunds)),
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
    """The endpoint's previous test event has not been attempted yet."""


def queue_test(db, merchant, endpoint, now) -> str:
    """Queue one test event (`webhook.test`) for one of the merchant's endpoints; its id. Like
    every event it is sent by the delivery worker, signed, and its attempt recorded, so no web
    worker waits on the endpoint; unlike them it has no process, is attempted once (never retried
    or re-queued), and only one waits per endpoint (TestEventWaiting)."""
    now = int(now)
    payload = event_json(TEST_EVENT_TYPE, now, {"merchantId": merchant.id,
                                                  "livemode": bool(merchant.livemode)})
    event_id = new_event_id()
    with db.transaction() as conn:
        endpoint_rows.lock_merchant(conn, merchant.id)
        if event_rows.test_waiting(conn, endpoint.id):
            raise TestEventWaiting("A test event is already waiting for the delivery worker to send"
                                   " it to this endpoint: its result shows below when it comes.")
        event_rows.insert(conn, id=event_id, merchant_id=merchant.id, process_id=None,
                          type=TEST_EVENT_TYPE, payload=payload, now=now, endpoint_id=endpoint.id)
    return event_id


def tests_of(db, merchant_id, limit=5):
    """A merchant's latest test events, newest first, each with its attempts: [(event,
    attempts)]."""
    conn = db.connection()
    return [(event, event_rows.attempts_of(conn, event.id))
            for event in event_rows.tests_of(conn, merchant_id, limit)]


def list_recent(db, *, limit, state=None, merchant_id=None):
    return event_rows.list_recent(db.connection(), limit=limit, state=state,
                                  merchant_id=merchant_id)


def get_with_attempts(db, event_id):
    """(event with its deliveries, attempts oldest first)."""
    conn = db.connection()
    event = event_rows.get(conn, event_id)
    if event is None:
        raise EventNotFound(event_id)
    return event, event_rows.attempts_of(conn, event_id)


def replay(db, event_id, now, endpoint_id=None):
    """Re-queue an event for an attempt at once; the event as it is then. By default its failed
    and cancelled deliveries, or, when none is, every delivery (an event delivered everywhere is
    sent again everywhere); given `endpoint_id` (one of the merchant's endpoints), its delivery to
    that endpoint whatever its state, made if the event never went there. Attempt histories are
    kept; each re-queued delivery's count starts from zero, so the whole schedule applies again."""
    now = int(now)
    with db.transaction() as conn:
        event = event_rows.get(conn, event_id)
        if event is None:
            raise EventNotFound(event_id)
        if event.process_id is None:
            raise NotReplayed(f"Event {event_id} is a test event, sent once: send another instead.")
        if endpoint_id is not None:
            endpoint = endpoint_rows.get(conn, endpoint_id)
            if endpoint is None or endpoint.merchant_id != event.merchant_id or endpoint.deleted_at:
                raise NotReplayed(f"No endpoint {endpoint_id} of this event's merchant.")
            if not endpoint.enabled:
                raise NotReplayed(f"Endpoint {endpoint_id} is disabled: enable it first.")
            if not any(d.endpoint_id == endpoint_id for d in event.deliveries):
                event_rows.add_delivery(conn, event_id, endpoint_id, event.merchant_id, now)
            elif not event_rows.requeue(conn, event_id, now, endpoint_id=endpoint_id):
                raise EventInFlight(f"Event {event_id} is being attempted right now; try again"
                                    " shortly.")
        elif not event.deliveries:
            raise NotReplayed(f"Event {event_id} went to no endpoint: name one to send it there.")
        elif not (event_rows.requeue(conn, event_id, now, statuses=("failed", "cancelled"))
                  or event_rows.requeue(conn, event_id, now)):
            raise EventInFlight(f"Event {event_id} has nothing to re-queue now: its deliveries are"
                                " being attempted (try again shortly) or their endpoints are"
                                " disabled.")
    return event_rows.get(db.connection(), event_id)


def replay_where(db, now, *, statuses, merchant_id=None, since=None) -> list[str]:
    """Re-queue every delivery in one of `statuses` (failed, cancelled), and with "no_endpoint"
    send every event that went to no endpoint to the endpoints that want it now; the event ids."""
    with db.transaction() as conn:
        ids = set()
        kept = [s for s in statuses if s != "no_endpoint"]
        if kept:
            ids.update(event_rows.requeue_where(conn, int(now), statuses=kept,
                                                merchant_id=merchant_id, since=since))
        if "no_endpoint" in statuses:
            ids.update(event_rows.fan_out_undelivered(conn, int(now), merchant_id=merchant_id,
                                                      since=since))
        return sorted(ids)


def for_process(db, process_id):
    """Every event of one process, oldest first."""
    return event_rows.for_process(db.connection(), process_id)


def page_of(db, merchant_id, *, type=None, state=None, endpoint_id=None, before=None, limit=50):
    """(events newest first, each with its last attempt or None, has_more): the console's list of
    a merchant's events, before the event `before` (an id of this merchant's, else from the top);
    with `endpoint_id`, those that went to it, in the state of that delivery."""
    conn = db.connection()
    well_formed = before and re.fullmatch(r"[A-Za-z0-9_]{1,64}", before)  # else it names none
    anchor = event_rows.get(conn, before) if well_formed else None
    before_seq = anchor.seq if anchor is not None and anchor.merchant_id == merchant_id else None
    events, more = event_rows.page_of(conn, merchant_id, type=type, state=state,
                                      endpoint_id=endpoint_id, before_seq=before_seq, limit=limit)
    return [(e, (event_rows.attempts_of(conn, e.id) or [None])[-1]) for e in events], more


def failing(db, merchant_id, limit=50):
    """A merchant's failing deliveries (failed, or retrying), newest first: [(event, delivery)]."""
    return event_rows.failing(db.connection(), merchant_id, limit)
