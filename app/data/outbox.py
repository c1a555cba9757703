"""SQL for the outbox of webhook events and their delivery attempts."""
from app.core.records import Attempt, Event
from app.data.schema import dialect

_COLUMNS = (
    "seq, id, merchant_id, process_id, type, payload, created_at, status, attempts,"
    " next_attempt_at, lease_owner, lease_expires_at, last_error, delivered_at"
)

_QUALIFIED = ", ".join("e." + name.strip() for name in _COLUMNS.split(","))


def _event(row):
    return Event(**{name: row[name] for name in row.keys()})


def insert(conn, *, id, merchant_id, process_id, type, payload, now):
    """A new event, due at once."""
    conn.execute(
        "INSERT INTO events (id, merchant_id, process_id, type, payload, created_at, status,"
        " attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)",
        (id, merchant_id, process_id, type, payload, now, now),
    )


def insert_many(conn, events, attempts=()):
    """Bulk insert of Event records in any status and Attempt records (their `id` ignored): for
    loading data, e.g. a year of history in a test."""
    names = _COLUMNS.replace("seq, ", "")
    conn.executemany(
        f"INSERT INTO events ({names}) VALUES ({', '.join('?' * len(names.split(',')))})",
        ([getattr(e, name.strip()) for name in names.split(",")] for e in events),
    )
    conn.executemany(
        "INSERT INTO delivery_attempts (event_id, attempted_at, url, status_code, error, duration_ms)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        ((a.event_id, a.attempted_at, a.url, a.status_code, a.error, a.duration_ms) for a in attempts),
    )


def get(conn, event_id) -> Event | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
    return _event(row) if row else None


def for_process(conn, process_id) -> list[Event]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM events WHERE process_id = ? ORDER BY seq", (process_id,)
    )
    return [_event(row) for row in rows]


# --- The delivery worker -------------------------------------------------------------------------
# An event is claimable when it is pending, due, and not under a live lease. A lease is live while
# lease_expires_at > now; only the worker named in lease_owner may record a failure or a missing
# endpoint for it, so a worker whose lease ran out cannot overwrite what the next owner did.

_CLAIMABLE = (
    "status = 'pending' AND next_attempt_at <= :now"
    " AND (lease_expires_at IS NULL OR lease_expires_at <= :now)"
)


def claim_due(conn, *, owner, now, lease_until, limit, skip_merchants=(),
              merchant_id=None) -> list[Event]:
    """Lease up to `limit` due events to `owner`, oldest due first: none of `skip_merchants`,
    and only `merchant_id`'s when given. Call inside a write transaction.

    SQLite (one writer at a time): only the rows the UPDATE touched are returned (RETURNING),
    re-checked by its own WHERE. PostgreSQL: the due rows are locked FOR UPDATE SKIP LOCKED, so
    concurrent workers each claim different events at once instead of waiting for each other."""
    skip = tuple(skip_merchants)
    where = _CLAIMABLE
    params = {"owner": owner, "until": lease_until, "now": now, "limit": limit}
    if merchant_id is not None:
        where += " AND merchant_id = :merchant"
        params["merchant"] = merchant_id
    if skip:
        names = [f":skip{i}" for i in range(len(skip))]
        where += f" AND merchant_id NOT IN ({', '.join(names)})"
        params.update({name[1:]: merchant for name, merchant in zip(names, skip)})
    if dialect(conn) == "postgresql":
        sql = (
            f"WITH due AS (SELECT seq FROM events WHERE {where}"
            f"   ORDER BY next_attempt_at, seq LIMIT :limit FOR UPDATE SKIP LOCKED)"
            f" UPDATE events e SET lease_owner = :owner, lease_expires_at = :until"
            f" FROM due WHERE e.seq = due.seq"
            f" RETURNING {_QUALIFIED}"
        )
        rows = conn.execute(sql, params).fetchall()
        return sorted((_event(row) for row in rows), key=lambda e: (e.next_attempt_at, e.seq))
    rows = conn.execute(
        f"UPDATE events SET lease_owner = :owner, lease_expires_at = :until"
        f" WHERE seq IN (SELECT seq FROM events WHERE {where}"
        f"   ORDER BY next_attempt_at, seq LIMIT :limit)"
        f" AND {where}"
        f" RETURNING {_COLUMNS}",
        params,
    ).fetchall()
    return sorted((_event(row) for row in rows), key=lambda e: (e.next_attempt_at, e.seq))


def release(conn, event_ids, owner) -> int:
    """Give back claims that were not attempted: due again at once for any worker."""
    event_ids = list(event_ids)
    if not event_ids:
        return 0
    marks = ", ".join("?" * len(event_ids))
    return conn.execute(
        "UPDATE events SET lease_owner = NULL, lease_expires_at = NULL"
        f" WHERE id IN ({marks}) AND lease_owner = ? AND status = 'pending'",
        (*event_ids, owner),
    ).rowcount


def insert_attempt(conn, *, event_id, attempted_at, url, status_code, error, duration_ms):
    conn.execute(
        "INSERT INTO delivery_attempts (event_id, attempted_at, url, status_code, error, duration_ms)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (event_id, attempted_at, url, status_code, error, duration_ms),
    )


def mark_delivered(conn, event_id, now) -> bool:
    """A 2xx: recorded whoever holds the lease now (at least once; the receiver deduplicates)."""
    cur = conn.execute(
        "UPDATE events SET status = 'delivered', delivered_at = COALESCE(delivered_at, ?),"
        " attempts = attempts + 1, next_attempt_at = NULL, last_error = NULL,"
        " lease_owner = NULL, lease_expires_at = NULL WHERE id = ?",
        (now, event_id),
    )
    return cur.rowcount == 1


def mark_attempt_failed(conn, event_id, owner, *, error, next_attempt_at) -> bool:
    """A failed attempt: due again at next_attempt_at, or `failed` when it is None.
    Only while `owner` still holds the event."""
    cur = conn.execute(
        "UPDATE events SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?,"
        " status = ?, lease_owner = NULL, lease_expires_at = NULL"
        " WHERE id = ? AND lease_owner = ? AND status = 'pending'",
        (error, next_attempt_at, "failed" if next_attempt_at is None else "pending", event_id, owner),
    )
    return cur.rowcount == 1


def mark_no_endpoint(conn, event_id, owner, *, error) -> bool:
    cur = conn.execute(
        "UPDATE events SET status = 'no_endpoint', next_attempt_at = NULL, last_error = ?,"
        " lease_owner = NULL, lease_expires_at = NULL"
        " WHERE id = ? AND lease_owner = ? AND status = 'pending'",
        (error, event_id, owner),
    )
    return cur.rowcount == 1


# --- Operators -----------------------------------------------------------------------------------

# Re-queue: due at once, attempts counted from zero again (the schedule starts over), history kept.
# An event under a live lease is being attempted right now and is left alone.
# A test event (no process) is sent once and never re-queued.
_REQUEUE = (
    "UPDATE events SET status = 'pending', attempts = 0, next_attempt_at = :now,"
    " delivered_at = NULL, lease_owner = NULL, lease_expires_at = NULL"
    " WHERE NOT (status = 'pending' AND COALESCE(lease_expires_at, 0) > :now)"
    " AND process_id IS NOT NULL"
)


def requeue(conn, event_id, now) -> bool:
    return conn.execute(_REQUEUE + " AND id = :id", {"now": now, "id": event_id}).rowcount == 1


def requeue_where(conn, now, *, statuses, merchant_id=None, since=None) -> list[str]:
    """Re-queue every event in one of `statuses` (optionally one merchant's, created >= since)."""
    where, params = _filters(statuses=statuses, merchant_id=merchant_id, since=since)
    params["now"] = now
    rows = conn.execute(f"{_REQUEUE}{where} RETURNING id", params).fetchall()
    return [row["id"] for row in rows]


def _filters(*, statuses=None, merchant_id=None, since=None):
    where, params = "", {}
    if statuses:
        names = [f":status{i}" for i in range(len(statuses))]
        where += f" AND status IN ({', '.join(names)})"
        params.update({name[1:]: status for name, status in zip(names, statuses)})
    if merchant_id is not None:
        where += " AND merchant_id = :merchant_id"
        params["merchant_id"] = merchant_id
    if since is not None:
        where += " AND created_at >= :since"
        params["since"] = since
    return where, params


def list_recent(conn, *, limit, status=None, merchant_id=None) -> list[Event]:
    """Newest first."""
    where, params = _filters(statuses=[status] if status else None, merchant_id=merchant_id)
    params["limit"] = limit
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM events WHERE 1 = 1{where} ORDER BY seq DESC LIMIT :limit", params
    )
    return [_event(row) for row in rows]


def failing(conn, merchant_id, limit) -> list[Event]:
    """A merchant's events whose delivery is failing, newest first: `failed` (retries exhausted)
    and `pending` ones whose last attempt failed (retrying). Test events are not among them."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM events WHERE merchant_id = ? AND process_id IS NOT NULL"
        " AND (status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL))"
        " ORDER BY seq DESC LIMIT ?",
        (merchant_id, limit),
    )
    return [_event(row) for row in rows]


# The console's delivery states: name -> condition on `events` (retrying: pending after a failed
# attempt; failing: failed or retrying, outbox.failing's rule).
STATES = {
    "pending": "status = 'pending' AND last_error IS NULL",
    "retrying": "status = 'pending' AND last_error IS NOT NULL",
    "failing": "(status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL))",
    "delivered": "status = 'delivered'",
    "failed": "status = 'failed'",
    "no_endpoint": "status = 'no_endpoint'",
}


def page_of(conn, merchant_id, *, type=None, state=None, before_seq=None, limit=50):
    """A merchant's events of every kind (test events included), newest first, `limit + 1` read so
    the caller can tell whether there is more; `type` an event type, `state` one of STATES."""
    where, params = "merchant_id = ?", [merchant_id]
    if type is not None:
        where += " AND type = ?"
        params.append(type)
    if state is not None:
        where += f" AND {STATES[state]}"
    if before_seq is not None:
        where += " AND seq < ?"
        params.append(before_seq)
    rows = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE {where} ORDER BY seq DESC LIMIT ?",
                        (*params, limit + 1)).fetchall()
    return [_event(row) for row in rows[:limit]], len(rows) > limit


def test_waiting(conn, merchant_id) -> bool:
    """Whether a test event of the merchant is pending (at most one: events_one_pending_test)."""
    return conn.execute("SELECT 1 FROM events WHERE process_id IS NULL AND merchant_id = ?"
                        " AND status = 'pending'", (merchant_id,)).fetchone() is not None


def tests_of(conn, merchant_id, limit) -> list[Event]:
    """A merchant's test events (those without a process), newest first."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM events WHERE process_id IS NULL AND merchant_id = ?"
        " ORDER BY seq DESC LIMIT ?",
        (merchant_id, limit),
    )
    return [_event(row) for row in rows]


def attempts_of(conn, event_id) -> list[Attempt]:
    rows = conn.execute(
        "SELECT id, event_id, attempted_at, url, status_code, error, duration_ms"
        " FROM delivery_attempts WHERE event_id = ? ORDER BY id",
        (event_id,),
    )
    return [Attempt(**{name: row[name] for name in row.keys()}) for row in rows]
