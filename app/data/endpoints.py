"""SQL for webhook endpoints: a merchant's places to deliver events to (app/domain/endpoints.py).

A deleted endpoint keeps its row (`deleted_at`) so its deliveries and attempts keep their endpoint;
it is in no list, takes no event and does not count towards the limit.
"""
from app.core.records import Endpoint
from app.data.schema import dialect

_COLUMNS = ("seq, id, merchant_id, url, events, enabled, description, secret, previous_secret,"
            " previous_secret_until, created_at, deleted_at")


def _endpoint(row):
    fields = {name: row[name] for name in row.keys()}
    fields["events"] = tuple(fields["events"].split(","))
    fields["enabled"] = bool(fields["enabled"])
    return Endpoint(**fields)


def insert(conn, endpoint: Endpoint):
    conn.execute(
        "INSERT INTO webhook_endpoints (id, merchant_id, url, events, enabled, description, secret,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (endpoint.id, endpoint.merchant_id, endpoint.url, ",".join(endpoint.events),
         int(endpoint.enabled), endpoint.description, endpoint.secret, endpoint.created_at))


def of_merchant(conn, merchant_id) -> list[Endpoint]:
    """The merchant's endpoints not deleted, oldest first."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE merchant_id = ?"
                        " AND deleted_at IS NULL ORDER BY seq", (merchant_id,))
    return [_endpoint(row) for row in rows]


def get(conn, endpoint_id) -> Endpoint | None:
    """The endpoint, deleted or not."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE id = ?",
                       (endpoint_id,)).fetchone()
    return _endpoint(row) if row else None


def get_many(conn, endpoint_ids) -> dict[str, Endpoint]:
    endpoint_ids = list(endpoint_ids)
    if not endpoint_ids:
        return {}
    marks = ", ".join("?" * len(endpoint_ids))
    rows = conn.execute(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE id IN ({marks})",
                        endpoint_ids)
    return {row["id"]: _endpoint(row) for row in rows}


def lock_merchant(conn, merchant_id):
    """Serialise changes to one merchant's endpoints (the limit is counted after this): a row lock
    on PostgreSQL; SQLite's write transaction already holds the only write lock."""
    if dialect(conn) == "postgresql":
        conn.execute("SELECT 1 FROM merchants WHERE id = ? FOR UPDATE", (merchant_id,))


def update(conn, endpoint_id, **fields) -> bool:
    """Set some of url, events (a tuple), enabled, description on an endpoint not deleted."""
    if "events" in fields:
        fields["events"] = ",".join(fields["events"])
    if "enabled" in fields:
        fields["enabled"] = int(fields["enabled"])
    sets = ", ".join(f"{name} = ?" for name in fields)
    return conn.execute(f"UPDATE webhook_endpoints SET {sets} WHERE id = ? AND deleted_at IS NULL",
                        (*fields.values(), endpoint_id)).rowcount == 1


def set_secret(conn, endpoint_id, secret, previous=None, previous_until=None) -> bool:
    return conn.execute(
        "UPDATE webhook_endpoints SET secret = ?, previous_secret = ?, previous_secret_until = ?"
        " WHERE id = ? AND deleted_at IS NULL",
        (secret, previous, previous_until, endpoint_id)).rowcount == 1


def delete(conn, endpoint_id, now) -> bool:
    return conn.execute("UPDATE webhook_endpoints SET deleted_at = ?, enabled = 0"
                        " WHERE id = ? AND deleted_at IS NULL", (now, endpoint_id)).rowcount == 1
