"""SQL for the outbox of webhook events and their delivery attempts."""
from app.models import Event

_COLUMNS = (
    "seq, id, merchant_id, process_id, type, payload, created_at, status, attempts,"
    " next_attempt_at, lease_owner, lease_expires_at, last_error, delivered_at"
)


def _event(row):
    return Event(**{name: row[name] for name in row.keys()})


def insert(conn, *, id, merchant_id, process_id, type, payload, now):
    """A new event, due at once."""
    conn.execute(
        "INSERT INTO events (id, merchant_id, process_id, type, payload, created_at, status,"
        " attempts, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?)",
        (id, merchant_id, process_id, type, payload, now, now),
    )


def get(conn, event_id) -> Event | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
    return _event(row) if row else None


def for_process(conn, process_id) -> list[Event]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM events WHERE process_id = ? ORDER BY seq", (process_id,)
    )
    return [_event(row) for row in rows]
