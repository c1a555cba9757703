"""What operators do with the outbox of webhook events: look at them, re-queue them."""
from app.data import events as event_rows


class EventNotFound(LookupError):
    pass


class EventInFlight(ValueError):
    """The event is leased by a worker attempting it right now."""


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
        if event_rows.get(conn, event_id) is None:
            raise EventNotFound(event_id)
        if not event_rows.requeue(conn, event_id, now):
            raise EventInFlight(f"Event {event_id} is being attempted right now; try again shortly.")
    return event_rows.get(db.connection(), event_id)


def replay_where(db, now, *, statuses, merchant_id=None, since=None) -> list[str]:
    """Re-queue every event in one of `statuses`; returns their ids."""
    with db.transaction() as conn:
        return event_rows.requeue_where(conn, int(now), statuses=statuses, merchant_id=merchant_id,
                                        since=since)
