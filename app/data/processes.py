"""SQL for payment processes. Transitions are single guarded UPDATEs: the row changes only if it is
still in the state the caller saw, so of two racing transitions exactly one touches the row."""
from app.data.schema import dialect
from app.models import Process

_STORED = (
    "seq, id, merchant_id, status, amount, metadata, livemode, created_at, updated_at, expires_at"
)
# Held past its expiry: not expired, by the sweep or on display (docs/payments.md), while either
# - paid in time, still confirming: a `seen` transfer to its deposit address in a block at or before
#   its expiry; or
# - the watcher has not yet read the payment's network past the expiry: the kept block at the scan
#   position is missing or not after `expires_at`, so a transfer mined in time may still be found.
#   A disabled network is not read at all: it holds nothing.
HELD = (
    "(EXISTS (SELECT 1 FROM transfers t WHERE t.process_id = processes.id AND t.status = 'seen'"
    " AND t.block_timestamp <= processes.expires_at)"
    " OR EXISTS (SELECT 1 FROM payments pay JOIN networks n ON n.id = pay.network_id"
    " WHERE pay.process_id = processes.id AND n.disabled_at IS NULL AND NOT EXISTS"
    " (SELECT 1 FROM chain_blocks b WHERE b.network_id = n.id AND b.number = n.scanned_block"
    " AND b.timestamp > processes.expires_at)))"
)
_COLUMNS = f"{_STORED}, {HELD} AS held"


def _process(row):
    return Process(
        seq=row["seq"],
        id=row["id"],
        merchant_id=row["merchant_id"],
        status=row["status"],
        amount=row["amount"],
        metadata=row["metadata"],
        livemode=bool(row["livemode"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
        held=bool(row["held"]),
    )


# seq is left to the database (SQLite's rowid alias, PostgreSQL's identity column).
_INSERT = (
    "INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode, created_at,"
    " updated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _values(p: Process):
    return (p.id, p.merchant_id, p.status, p.amount, p.metadata, int(p.livemode), p.created_at,
            p.updated_at, p.expires_at)


def insert(conn, p: Process):
    conn.execute(_INSERT, _values(p))


def get(conn, process_id) -> Process | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM processes WHERE id = ?", (process_id,)).fetchone()
    return _process(row) if row else None


def lock(conn, process_id):
    """Hold the process's row until the transaction ends, so a concurrent writer of the same process
    waits (PostgreSQL; SQLite's single writer already serialises every write transaction)."""
    if dialect(conn) == "postgresql":
        conn.execute("SELECT 1 FROM processes WHERE id = ? FOR UPDATE", (process_id,))


def get_many(conn, process_ids) -> dict[str, Process]:
    """These processes, by id (one query)."""
    ids = list(process_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {_COLUMNS} FROM processes WHERE id IN ({marks})", ids).fetchall()
    return {row["id"]: _process(row) for row in rows}


def get_for_merchant(conn, merchant_id, process_id) -> Process | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM processes WHERE id = ? AND merchant_id = ?",
        (process_id, merchant_id),
    ).fetchone()
    return _process(row) if row else None


def _status_clause(status, now):
    """SQL condition (and its parameters) for an *effective* status, expiry included."""
    if status is None:
        return "", ()
    if status == "pending":
        return f" AND status = 'pending' AND (expires_at > ? OR {HELD})", (now,)
    if status == "expired":
        return (f" AND (status = 'expired' OR (status = 'pending' AND expires_at <= ?"
                f" AND NOT {HELD}))"), (now,)
    return " AND status = ?", (status,)


def list_page(conn, *, now, limit, merchant_id=None, status=None, before_seq=None):
    """Newest first; `limit + 1` rows are read so the caller can tell whether there is more."""
    where, params = "WHERE 1 = 1", []
    if merchant_id is not None:
        where += " AND merchant_id = ?"
        params.append(merchant_id)
    clause, extra = _status_clause(status, now)
    where += clause
    params.extend(extra)
    if before_seq is not None:
        where += " AND seq < ?"
        params.append(before_seq)
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM processes {where} ORDER BY seq DESC LIMIT ?",
        (*params, limit + 1),
    ).fetchall()
    return [_process(row) for row in rows[:limit]], len(rows) > limit


def transition(conn, process_id, to_status, now) -> bool:
    """pending -> to_status, only while the process is pending and not yet past its expiry (or
    held past it: HELD)."""
    cur = conn.execute(
        "UPDATE processes SET status = ?, updated_at = ?"
        f" WHERE id = ? AND status = 'pending' AND (expires_at > ? OR {HELD})",
        (to_status, now, process_id, now),
    )
    return cur.rowcount == 1


def complete_paid(conn, process_id, now) -> bool:
    """pending -> completed by the chain watcher: paid in time (checked by the caller from the
    transfers' block timestamps), so expires_at is not checked here."""
    cur = conn.execute(
        "UPDATE processes SET status = 'completed', updated_at = ? WHERE id = ? AND status = 'pending'",
        (now, process_id),
    )
    return cur.rowcount == 1


def expire(conn, process_id, now) -> bool:
    """pending -> expired, only once the expiry has passed and nothing holds it (HELD: no
    paid-in-time transfer still confirming, the watcher past the expiry)."""
    cur = conn.execute(
        "UPDATE processes SET status = 'expired', updated_at = expires_at"
        f" WHERE id = ? AND status = 'pending' AND expires_at <= ? AND NOT {HELD}",
        (process_id, now),
    )
    return cur.rowcount == 1


def due_for_expiry(conn, now, limit) -> list[str]:
    """In one total order (seq breaks ties): sweepers that expire the same processes at once lock
    their rows in the same order, so on PostgreSQL they wait for each other instead of deadlocking."""
    rows = conn.execute(
        "SELECT id FROM processes WHERE status = 'pending' AND expires_at <= ?"
        f" AND NOT {HELD} ORDER BY expires_at, seq LIMIT ?",
        (now, limit),
    )
    return [row["id"] for row in rows]


def insert_many(conn, processes) -> int:
    """Bulk insert (an iterable of Process): for loading data, e.g. the 1M-process benchmark."""
    return conn.executemany(_INSERT, map(_values, processes)).rowcount
