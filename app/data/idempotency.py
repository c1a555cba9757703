"""SQL for Idempotency-Key records."""


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
        "INSERT OR REPLACE INTO idempotency_keys"
        " (merchant_id, key, request_hash, process_id, response_body, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (merchant_id, key, request_hash, process_id, response_body, now),
    )


def purge(conn, not_before) -> int:
    return conn.execute("DELETE FROM idempotency_keys WHERE created_at < ?", (not_before,)).rowcount
