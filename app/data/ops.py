"""SQL for operating the service: the figures of /metrics and /healthz, and retention (pruning).

Figures are counted from the database on every call, so every gunicorn worker gives the same ones.
Each count walks an index or reads a few kept rows: the pending part of `deliveries_due` for the
backlog, `delivery_totals` for the deliveries that ended, `overview_days` and
`processes_status_expiry` for processes by status.
"""
from app.core.records import FINAL_DELIVERY_STATUSES, STATUSES, OutboxBacklog, Snapshot
from app.data.outbox import lease_now
from app.data.processes import HELD
from app.data.schema import dialect


def outbox_backlog(conn, now) -> OutboxBacklog:
    """Pending deliveries: due (waiting for a worker), in flight (leased), waiting for a retry; and
    how long the oldest due one (in flight or not) has been due."""
    leased = f"lease_expires_at > {lease_now(conn)}"  # by the lease clock, as the worker sees it
    row = conn.execute(
        "SELECT"
        f" count(*) FILTER (WHERE {leased}) AS in_flight,"
        f" count(*) FILTER (WHERE next_attempt_at <= :now AND NOT COALESCE({leased}, FALSE))"
        " AS due,"
        f" count(*) FILTER (WHERE next_attempt_at > :now AND NOT COALESCE({leased}, FALSE))"
        " AS retrying,"
        " min(next_attempt_at) FILTER (WHERE next_attempt_at <= :now) AS oldest_due"
        " FROM deliveries WHERE status = 'pending'",
        {"now": now},
    ).fetchone()
    oldest = row["oldest_due"]
    return OutboxBacklog(due=row["due"], in_flight=row["in_flight"], retrying=row["retrying"],
                         oldest_due_age=max(0, now - oldest) if oldest is not None else 0)


def snapshot(conn, now) -> Snapshot:
    """Everything /metrics shows, read in one transaction (a consistent view: on PostgreSQL that
    takes REPEATABLE READ, its READ COMMITTED gives each statement its own snapshot)."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ" if dialect(conn) == "postgresql"
                 else "BEGIN")
    try:
        backlog = outbox_backlog(conn, now)
        totals = dict.fromkeys(FINAL_DELIVERY_STATUSES, 0)
        totals.update(conn.execute("SELECT status, count FROM delivery_totals").fetchall())
        # Final processes from the overview's kept counts (app/data/rollups.py: a few rows a
        # merchant and day), pending ones through the (status, expires_at) index: a scrape costs
        # the same at ten million processes.
        processes = dict.fromkeys(STATUSES, 0)
        processes.update((status, int(count)) for status, count in conn.execute(
            "SELECT key, sum(count) FROM overview_days WHERE kind = 'final' GROUP BY key"))
        processes["pending"] = conn.execute(
            "SELECT count(*) FROM processes WHERE status = 'pending'").fetchone()[0]
        # A pending process past its expiry is expired, as the API shows it, swept or not (unless
        # held by HELD: then it is pending, as the API shows it).
        unswept = conn.execute(
            "SELECT count(*) FROM processes WHERE status = 'pending' AND expires_at <= ?"
            f" AND NOT {HELD}", (now,)
        ).fetchone()[0]
    finally:
        conn.execute("COMMIT")
    processes["pending"] -= unswept
    processes["expired"] += unswept
    return Snapshot(
        backlog=backlog,
        pending=backlog.due + backlog.in_flight + backlog.retrying,
        deliveries=totals,
        processes=processes,
    )


# --- Retention -----------------------------------------------------------------------------------
# Only events none of whose deliveries is pending go, with their deliveries and attempts; never a
# pending delivery, never a process. Each batch is its own short transaction (the caller's), so the
# write lock is never held long.

def prune_events(conn, created_before, limit, after=(-1, -1)) -> tuple[int, int, tuple]:
    """Look at up to `limit` events created before `created_before`, oldest first from the
    (created_at, seq) `after`; delete those with no pending delivery, with their deliveries and
    attempts (/metrics' delivery totals are kept apart: they do not go down).
    Pass the returned cursor as `after` to go on. Returns (events deleted, attempts deleted,
    cursor; None once fewer than `limit` were left). Call inside a write transaction."""
    rows = conn.execute(
        "SELECT seq, id, created_at FROM events"
        " WHERE created_at < ? AND (created_at, seq) > (?, ?) ORDER BY created_at, seq LIMIT ?",
        (created_before, *after, limit),
    ).fetchall()
    cursor = (rows[-1]["created_at"], rows[-1]["seq"]) if len(rows) == limit else None
    if not rows:
        return 0, 0, cursor
    ids = [row["id"] for row in rows]
    marks = ", ".join("?" * len(ids))
    # Re-checked in each statement: an event a replay made pending meanwhile stays whole.
    conn.execute(
        f"DELETE FROM deliveries WHERE event_id IN ({marks}) AND NOT EXISTS (SELECT 1 FROM"
        " deliveries p WHERE p.event_id = deliveries.event_id AND p.status = 'pending')", ids)
    final = (f"id IN ({marks}) AND NOT EXISTS"
             " (SELECT 1 FROM deliveries d WHERE d.event_id = events.id)")
    attempts = conn.execute(
        f"DELETE FROM delivery_attempts WHERE event_id IN (SELECT id FROM events WHERE {final})",
        ids).rowcount
    events = conn.execute(f"DELETE FROM events WHERE {final}", ids).rowcount
    return events, attempts, cursor


def prune_idempotency_keys(conn, created_before, limit) -> int:
    """Delete up to `limit` Idempotency-Key records created before `created_before`."""
    return conn.execute(
        "DELETE FROM idempotency_keys WHERE (merchant_id, key) IN (SELECT merchant_id, key"
        " FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)",
        (created_before, limit),
    ).rowcount
