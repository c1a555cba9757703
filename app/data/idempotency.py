"""SQL for Idempotency-Key records."""
from app.data.schema import dialect


def lock(conn, merchant_id, key):
    """Hold (merchant, key) until the transaction ends, so that `find` then `save` is one step: a
    second request with the key waits, then finds the first one's record. SQLite's single writer
    (BEGIN IMMEDIATE) already serialises them; under PostgreSQL's READ COMMITTED two requests could
    both find nothing and create two processes, so a transaction-scoped advisory lock does it."""
    if dialect(conn) == "postgresql":
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(CAST(? AS text)"
            " || '/' || CAST(? AS text), 0))",
            (merchant_id, key),
        )


def find(conn, merchant_id, key, not_before):
    """(request_hash, response_body) of a record younger than not_before, else None."""
    row = conn.execute(
        "SELECT request_hash, response_body FROM idempotency_keys"
        " WHERE merchant_id = ? AND key = ? AND created_at >= ?",
        (merchant_id, key, not_before),
    ).fetchone()
    return (row["request_hash"], row["response_body"]) if row else None


def save(conn, merchant_id, key, request_hash, process_id, response_body, now):
    """Record the first response; an expired record under the same key is replaced."""
    conn.execute(
        "INSERT INTO idempotency_keys"
        " (merchant_id, key, request_hash, process_id, response_body, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (merchant_id, key) DO UPDATE SET request_hash = excluded.request_hash,"
        " process_id = excluded.process_id, response_body = excluded.response_body,"
        " created_at = excluded.created_at",
        (merchant_id, key, request_hash, process_id, response_body, now),
    )


def purge(conn, not_before) -> int:
    return conn.execute("DELETE FROM idempotency_keys WHERE created_at < ?", (not_before,)).rowcount
