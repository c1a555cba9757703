"""SQL for the outbox: webhook events, their deliveries (one per endpoint) and the attempts.

An event is written once, with one delivery per endpoint of its merchant that is enabled and
subscribed to its type at that moment (`insert`, in the transaction of the change it reports).
Each delivery has its own state, attempts, schedule and lease; the delivery worker claims
deliveries, not events.
"""
import math

from app.core.records import Attempt, Delivery, Event
from app.data.schema import dialect

_EVENT_COLUMNS = "seq, id, merchant_id, process_id, type, payload, created_at"
_DELIVERY_COLUMNS = (
    "seq, event_id, endpoint_id, merchant_id, status, attempts, next_attempt_at, lease_owner,"
    " lease_expires_at, last_error, delivered_at"
)
_QUALIFIED = ", ".join("d." + name.strip() for name in _DELIVERY_COLUMNS.split(","))
_ATTEMPT_COLUMNS = "event_id, attempted_at, url, status_code, error, duration_ms, endpoint_id"


def _delivery(row):
    return Delivery(**{name: row[name] for name in row.keys()})


def _events(conn, rows) -> list[Event]:
    """Events from their rows, each with its deliveries (one query for all of them)."""
    rows = list(rows)
    if not rows:
        return []
    ids = [row["id"] for row in rows]
    marks = ", ".join("?" * len(ids))
    deliveries = {}
    for row in conn.execute(f"SELECT {_DELIVERY_COLUMNS} FROM deliveries"
                            f" WHERE event_id IN ({marks}) ORDER BY seq", ids):
        deliveries.setdefault(row["event_id"], []).append(_delivery(row))
    return [Event(**{name: row[name] for name in row.keys()},
                  deliveries=tuple(deliveries.get(row["id"], ()))) for row in rows]


def _like(event_type) -> str:
    """A LIKE pattern matching a comma-joined list that holds `event_type`."""
    return "%," + event_type.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ",%"


def insert(conn, *, id, merchant_id, process_id, type, payload, now, endpoint_id=None) -> int:
    """A new event and its deliveries, due at once: to every enabled endpoint of the merchant
    subscribed to `type`, or only to `endpoint_id` (a test event). Returns how many."""
    conn.execute(
        "INSERT INTO events (id, merchant_id, process_id, type, payload, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)", (id, merchant_id, process_id, type, payload, now))
    if endpoint_id is not None:
        which, params = "id = ?", (endpoint_id,)
    else:
        which = ("merchant_id = ? AND enabled = 1 AND deleted_at IS NULL"
                 " AND (events = '*' OR ',' || events || ',' LIKE ? ESCAPE '\\')")
        params = (merchant_id, _like(type))
    return conn.execute(
        "INSERT INTO deliveries (event_id, endpoint_id, merchant_id, status, attempts,"
        " next_attempt_at) SELECT ?, id, merchant_id, 'pending', 0, ? FROM webhook_endpoints"
        f" WHERE {which} ORDER BY seq", (id, now, *params)).rowcount


def insert_many(conn, events, attempts=(), deliveries=()):
    """Bulk insert of Event, Delivery and Attempt records as they are (their seq and attempt ids
    given by the database): for loading data, e.g. a year of history in a test."""
    names = _EVENT_COLUMNS.replace("seq, ", "")
    conn.executemany(
        f"INSERT INTO events ({names}) VALUES ({', '.join('?' * len(names.split(',')))})",
        ([getattr(e, name.strip()) for name in names.split(",")] for e in events))
    names = _DELIVERY_COLUMNS.replace("seq, ", "")
    conn.executemany(
        f"INSERT INTO deliveries ({names}) VALUES ({', '.join('?' * len(names.split(',')))})",
        ([getattr(d, name.strip()) for name in names.split(",")] for d in deliveries))
    conn.executemany(
        f"INSERT INTO delivery_attempts ({_ATTEMPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ([getattr(a, name.strip()) for name in _ATTEMPT_COLUMNS.split(",")] for a in attempts))


def get(conn, event_id) -> Event | None:
    rows = conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchall()
    return (_events(conn, rows) or [None])[0]


def get_many(conn, event_ids) -> dict[str, Event]:
    """The events with these ids, by id, without their deliveries (what a worker sends)."""
    event_ids = list(event_ids)
    if not event_ids:
        return {}
    marks = ", ".join("?" * len(event_ids))
    rows = conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE id IN ({marks})", event_ids)
    return {row["id"]: Event(**{name: row[name] for name in row.keys()}) for row in rows}


def for_process(conn, process_id) -> list[Event]:
    rows = conn.execute(
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE process_id = ? ORDER BY seq", (process_id,)
    ).fetchall()
    return _events(conn, rows)


# --- The delivery worker -------------------------------------------------------------------------
# A delivery is claimable when it is pending, due, and not under a live lease. A lease is live while
# lease_expires_at > the lease clock; only the worker named in lease_owner may record a failure for
# it, so a worker whose lease ran out cannot overwrite what the next owner did.
#
# The lease clock (unix seconds): on PostgreSQL the database server's, read in the statement that
# grants or checks a lease, so workers and operators on several hosts agree on it whatever their own
# clocks say; on SQLite (one host) the caller's `now`, the app's injectable clock. Whether a
# delivery is due (next_attempt_at) is the caller's clock on both: a schedule, not a lease.

# statement_timestamp(): the server's time at the statement's start (stable within it, so indexes
# still serve the comparison); seconds with a fraction.
_SERVER_NOW = "EXTRACT(EPOCH FROM statement_timestamp())"


def lease_now(conn) -> str:
    """SQL for the lease clock: the server's on PostgreSQL, the :now parameter on SQLite."""
    return _SERVER_NOW if dialect(conn) == "postgresql" else ":now"


def _claimable(conn) -> str:
    return ("status = 'pending' AND next_attempt_at <= :now"
            f" AND (lease_expires_at IS NULL OR lease_expires_at <= {lease_now(conn)})")


def claim_due(conn, *, owner, now, lease_seconds, limit, skip_endpoints=(),
              endpoint_id=None) -> list[Delivery]:
    """Lease up to `limit` due deliveries to `owner` for `lease_seconds` by the lease clock (whole
    seconds, rounded up), oldest due first: none to `skip_endpoints`, and only to `endpoint_id`
    when given. Call inside a write transaction.

    SQLite (one writer at a time): only the rows the UPDATE touched are returned (RETURNING),
    re-checked by its own WHERE. PostgreSQL: the due rows are locked FOR UPDATE SKIP LOCKED, so
    concurrent workers each claim different deliveries at once instead of waiting for each other."""
    skip = tuple(skip_endpoints)
    where = _claimable(conn)
    params = {"owner": owner, "now": now, "limit": limit}
    if endpoint_id is not None:
        where += " AND endpoint_id = :endpoint"
        params["endpoint"] = endpoint_id
    if skip:
        names = [f":skip{i}" for i in range(len(skip))]
        where += f" AND endpoint_id NOT IN ({', '.join(names)})"
        params.update({name[1:]: endpoint for name, endpoint in zip(names, skip, strict=True)})
    if dialect(conn) == "postgresql":
        params["seconds"] = int(lease_seconds)
        sql = (
            f"WITH due AS (SELECT seq FROM deliveries WHERE {where}"
            f"   ORDER BY next_attempt_at, seq LIMIT :limit FOR UPDATE SKIP LOCKED)"
            f" UPDATE deliveries d SET lease_owner = :owner,"
            f"  lease_expires_at = CAST(CEIL({_SERVER_NOW}) AS BIGINT) + :seconds"
            f" FROM due WHERE d.seq = due.seq"
            f" RETURNING {_QUALIFIED}"
        )
    else:
        params["until"] = math.ceil(now) + int(lease_seconds)
        sql = (
            f"UPDATE deliveries SET lease_owner = :owner, lease_expires_at = :until"
            f" WHERE seq IN (SELECT seq FROM deliveries WHERE {where}"
            f"   ORDER BY next_attempt_at, seq LIMIT :limit)"
            f" AND {where}"
            f" RETURNING {_DELIVERY_COLUMNS}"
        )
    rows = conn.execute(sql, params).fetchall()
    return sorted((_delivery(row) for row in rows), key=lambda d: (d.next_attempt_at, d.seq))


def release(conn, delivery_seqs, owner) -> int:
    """Give back claims that were not attempted: due again at once for any worker."""
    seqs = list(delivery_seqs)
    if not seqs:
        return 0
    marks = ", ".join("?" * len(seqs))
    return conn.execute(
        "UPDATE deliveries SET lease_owner = NULL, lease_expires_at = NULL"
        f" WHERE seq IN ({marks}) AND lease_owner = ? AND status = 'pending'",
        (*seqs, owner),
    ).rowcount


def insert_attempt(conn, *, event_id, endpoint_id, attempted_at, url, status_code, error,
                   duration_ms):
    conn.execute(
        f"INSERT INTO delivery_attempts ({_ATTEMPT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (event_id, attempted_at, url, status_code, error, duration_ms, endpoint_id),
    )


def mark_delivered(conn, delivery_seq, now) -> bool:
    """A 2xx: recorded whoever holds the lease now, and whatever the state (at least once; the
    receiver deduplicates): a delivery cancelled while its attempt was in flight was delivered.
    False when it already was (a late 2xx of a worker whose lease ran out)."""
    cur = conn.execute(
        "UPDATE deliveries SET status = 'delivered', delivered_at = COALESCE(delivered_at, ?),"
        " attempts = attempts + 1, next_attempt_at = NULL, last_error = NULL,"
        " lease_owner = NULL, lease_expires_at = NULL WHERE seq = ? AND status <> 'delivered'",
        (now, delivery_seq),
    )
    return cur.rowcount == 1


def count_final(conn, counts):
    """Add {final status: deliveries that just reached it} to /metrics' totals (delivery_totals),
    in the transaction that made them so."""
    conn.executemany(
        "INSERT INTO delivery_totals (status, count) VALUES (?, ?)"
        " ON CONFLICT (status) DO UPDATE SET count = delivery_totals.count + excluded.count",
        [(status, n) for status, n in counts.items() if n])


def mark_attempt_failed(conn, delivery_seq, owner, *, error, next_attempt_at,
                        status="failed") -> bool:
    """A failed attempt: due again at next_attempt_at, or `status` (failed; cancelled: its endpoint
    is gone) when it is None. Only while `owner` still holds the delivery and it is pending (not
    cancelled meanwhile)."""
    cur = conn.execute(
        "UPDATE deliveries SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?,"
        " status = ?, lease_owner = NULL, lease_expires_at = NULL"
        " WHERE seq = ? AND lease_owner = ? AND status = 'pending'",
        (error, next_attempt_at, status if next_attempt_at is None else "pending", delivery_seq,
         owner),
    )
    return cur.rowcount == 1


def cancel_pending(conn, endpoint_id) -> int:
    """An endpoint disabled or deleted: its pending deliveries end `cancelled` (replay resumes
    them). One in flight is cancelled too; a 2xx it gets still counts (mark_delivered)."""
    cancelled = conn.execute(
        "UPDATE deliveries SET status = 'cancelled', next_attempt_at = NULL"
        " WHERE endpoint_id = ? AND status = 'pending'", (endpoint_id,)).rowcount
    count_final(conn, {"cancelled": cancelled})
    return cancelled


# --- Operators -----------------------------------------------------------------------------------

# Re-queue: due at once, attempts counted from zero again (the schedule starts over), history kept.
# A delivery under a live lease (by the lease clock; whatever its state: one cancelled while in
# flight keeps it) is being attempted right now and is left alone; so is one to an endpoint disabled
# or deleted. A test event's delivery (its event has no process) is sent once and never re-queued.
_REQUEUE = (
    "UPDATE deliveries SET status = 'pending', attempts = 0, next_attempt_at = :now,"
    " delivered_at = NULL, lease_owner = NULL, lease_expires_at = NULL"
    " WHERE COALESCE(lease_expires_at, 0) <= {lease_now}"
    " AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE enabled = 1"
    "  AND deleted_at IS NULL)"
    " AND event_id IN (SELECT id FROM events WHERE process_id IS NOT NULL{events})"
)


def requeue(conn, event_id, now, *, endpoint_id=None, statuses=None) -> int:
    """Re-queue the event's deliveries (to `endpoint_id` only; in one of `statuses` only); how
    many."""
    where, params = " AND event_id = :event", {"now": now, "event": event_id}
    if endpoint_id is not None:
        where += " AND endpoint_id = :endpoint"
        params["endpoint"] = endpoint_id
    if statuses:
        names = [f":status{i}" for i in range(len(statuses))]
        where += f" AND status IN ({', '.join(names)})"
        params.update({name[1:]: status for name, status in zip(names, statuses, strict=True)})
    return conn.execute(_REQUEUE.format(events=" AND id = :event", lease_now=lease_now(conn))
                        + where, params).rowcount


def add_delivery(conn, event_id, endpoint_id, merchant_id, now) -> bool:
    """A delivery of an existing event to an endpoint it did not go to (a replay to it)."""
    return conn.execute(
        "INSERT INTO deliveries (event_id, endpoint_id, merchant_id, status, attempts,"
        " next_attempt_at) VALUES (?, ?, ?, 'pending', 0, ?) ON CONFLICT DO NOTHING",
        (event_id, endpoint_id, merchant_id, now)).rowcount == 1


def requeue_where(conn, now, *, statuses, merchant_id=None, since=None) -> list[str]:
    """Re-queue every delivery in one of `statuses` (optionally one merchant's, of events created
    >= since); the ids of their events."""
    names = [f":status{i}" for i in range(len(statuses))]
    where = f" AND status IN ({', '.join(names)})"
    params = {name[1:]: status for name, status in zip(names, statuses, strict=True)}
    params["now"] = now
    events = ""
    if merchant_id is not None:
        where += " AND merchant_id = :merchant_id"
        params["merchant_id"] = merchant_id
    if since is not None:
        events = " AND created_at >= :since"
        params["since"] = since
    rows = conn.execute(f"{_REQUEUE.format(events=events, lease_now=lease_now(conn))}{where}"
                        " RETURNING event_id",
                        params).fetchall()
    return sorted({row["event_id"] for row in rows})


def fan_out_undelivered(conn, now, *, merchant_id=None, since=None) -> list[str]:
    """Events that went to no endpoint (their merchant had none that wanted them): one delivery
    each to every enabled endpoint of their merchant subscribed now; the ids of those events."""
    where, params = "", {"now": now, "pre": "%,", "post": ",%"}
    if merchant_id is not None:
        where += " AND e.merchant_id = :merchant_id"
        params["merchant_id"] = merchant_id
    if since is not None:
        where += " AND e.created_at >= :since"
        params["since"] = since
    rows = conn.execute(
        "INSERT INTO deliveries (event_id, endpoint_id, merchant_id, status, attempts,"
        " next_attempt_at)"
        " SELECT e.id, w.id, e.merchant_id, 'pending', 0, :now FROM events e"
        " JOIN webhook_endpoints w ON w.merchant_id = e.merchant_id AND w.enabled = 1"
        "  AND w.deleted_at IS NULL"
        "  AND (w.events = '*' OR ',' || w.events || ',' LIKE :pre || replace(e.type, '_', '\\_')"
        "   || :post ESCAPE '\\')"
        " WHERE e.process_id IS NOT NULL AND NOT EXISTS"
        f" (SELECT 1 FROM deliveries d WHERE d.event_id = e.id){where}"
        " ORDER BY e.seq, w.seq RETURNING event_id", params).fetchall()
    return sorted({row["event_id"] for row in rows})


# An event's delivery states, the filters of the console and `events list`: name -> condition on
# a delivery `d` (retrying: pending after a failed attempt; failing: failed or retrying).
STATES = {
    "pending": "d.status = 'pending' AND d.last_error IS NULL",
    "retrying": "d.status = 'pending' AND d.last_error IS NOT NULL",
    "failing": "(d.status = 'failed' OR (d.status = 'pending' AND d.last_error IS NOT NULL))",
    "delivered": "d.status = 'delivered'",
    "failed": "d.status = 'failed'",
    "cancelled": "d.status = 'cancelled'",
    "no_endpoint": None,  # no delivery at all
}


def _state_filter(state, endpoint_id):
    """SQL on `events e` for: a delivery (to `endpoint_id`, if given) in `state`; params."""
    to = " AND d.endpoint_id = ?" if endpoint_id is not None else ""
    params = [endpoint_id] if endpoint_id is not None else []
    if state == "no_endpoint":
        return f" AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id{to})", params
    condition = f" AND {STATES[state]}" if state is not None else ""
    return (f" AND EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id{to}{condition})",
            params)


def list_recent(conn, *, limit, state=None, merchant_id=None) -> list[Event]:
    """Newest first; `state` one of STATES."""
    where, params = "1 = 1", []
    if merchant_id is not None:
        where += " AND e.merchant_id = ?"
        params.append(merchant_id)
    if state is not None:
        extra, more = _state_filter(state, None)
        where += extra
        params += more
    rows = conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events e WHERE {where}"
                        " ORDER BY e.seq DESC LIMIT ?", (*params, limit)).fetchall()
    return _events(conn, rows)


def failing(conn, merchant_id, limit) -> list[tuple[Event, Delivery]]:
    """A merchant's deliveries that are failing (failed, or retrying), newest event first, each
    with its event. Test events are not among them."""
    rows = conn.execute(
        f"SELECT {_QUALIFIED} FROM deliveries d WHERE d.merchant_id = ? AND {STATES['failing']}"
        " ORDER BY d.seq DESC LIMIT ?", (merchant_id, limit)).fetchall()
    found = [_delivery(row) for row in rows]
    events = get_many(conn, {d.event_id for d in found})
    return [(events[d.event_id], d) for d in found if events[d.event_id].process_id is not None]


def page_of(conn, merchant_id, *, type=None, state=None, endpoint_id=None, before_seq=None,
            limit=50):
    """A merchant's events of every kind (test events included), newest first, `limit + 1` read so
    the caller can tell whether there is more; `type` an event type, `state` one of STATES, for
    its deliveries to `endpoint_id` when given (else: to any endpoint). Given an endpoint and no
    state, the events that went to it."""
    where, params = "e.merchant_id = ?", [merchant_id]
    if type is not None:
        where += " AND e.type = ?"
        params.append(type)
    if state is not None or endpoint_id is not None:
        extra, more = _state_filter(state, endpoint_id)
        where += extra
        params += more
    if before_seq is not None:
        where += " AND e.seq < ?"
        params.append(before_seq)
    rows = conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events e WHERE {where}"
                        " ORDER BY e.seq DESC LIMIT ?", (*params, limit + 1)).fetchall()
    return _events(conn, rows[:limit]), len(rows) > limit


def test_waiting(conn, endpoint_id) -> bool:
    """Whether a test event to the endpoint waits for the delivery worker."""
    return conn.execute(
        "SELECT 1 FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.endpoint_id = ?"
        " AND d.status = 'pending' AND e.process_id IS NULL", (endpoint_id,)).fetchone() is not None


def tests_of(conn, merchant_id, limit) -> list[Event]:
    """A merchant's test events (those without a process), newest first."""
    rows = conn.execute(
        f"SELECT {_EVENT_COLUMNS} FROM events WHERE process_id IS NULL AND merchant_id = ?"
        " ORDER BY seq DESC LIMIT ?", (merchant_id, limit)).fetchall()
    return _events(conn, rows)


def attempts_of(conn, event_id) -> list[Attempt]:
    rows = conn.execute(
        "SELECT id, event_id, attempted_at, url, status_code, error, duration_ms, endpoint_id"
        " FROM delivery_attempts WHERE event_id = ? ORDER BY id",
        (event_id,),
    )
    return [Attempt(**{name: row[name] for name in row.keys()}) for row in rows]
