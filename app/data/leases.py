"""SQL for the watchers' leases: per network, the one `watch-payments` process that polls it
(app/chain/watcher/lease.py says how they are used; docs/storage.md, "Several watchers").

Times are the database's clock (unix seconds), never a host's: every watcher, on any host, compares
expiries against the same clock, so a host whose clock is off cannot take a lease early.
"""
from app.data.schema import dialect

# The database's clock, in unix seconds with a fraction. PostgreSQL: the time of the statement
# itself (now() would be the transaction's start); SQLite: julianday (unixepoch('subsec') needs
# 3.42).
_NOW = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}

LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for a lock not granted within lock_timeout


def _now(conn) -> str:
    return _NOW[dialect(conn)]


def take(conn, network_id, owner, seconds) -> bool:
    """In the caller's transaction: the network's lease for `owner` until `seconds` from now,
    renewed when `owner` holds it (even expired: nobody took it meanwhile), taken when it is free or
    expired. False: another watcher holds it. On PostgreSQL a row its holder keeps locked (a
    transaction of a poll under way, or of a hung process) is waited for one second at most, then
    counts as held: a standby never queues behind a hung holder."""
    now = _now(conn)
    if dialect(conn) == "postgresql":
        conn.execute("SET LOCAL lock_timeout = '1s'")
    cursor = conn.execute(
        f"INSERT INTO watcher_leases (network_id, owner, expires_at, since)"
        f" VALUES (?, ?, {now} + ?, {now})"
        f" ON CONFLICT (network_id) DO UPDATE SET owner = excluded.owner,"
        f"  expires_at = excluded.expires_at,"
        f"  since = CASE WHEN watcher_leases.owner = excluded.owner THEN watcher_leases.since"
        f"          ELSE excluded.since END"
        f" WHERE watcher_leases.owner = excluded.owner OR watcher_leases.expires_at <= {now}",
        (network_id, owner, float(seconds)))
    return cursor.rowcount == 1


def renew(conn, network_id, owner, seconds) -> bool:
    """In the caller's transaction, before its writes: the lease renewed for `seconds` if `owner`
    still holds it (False: another watcher took it over, and the caller must write nothing). On
    PostgreSQL the row stays locked until the transaction ends, so no other watcher can take it over
    while that transaction's writes are under way."""
    cursor = conn.execute(
        f"UPDATE watcher_leases SET expires_at = {_now(conn)} + ?"
        f" WHERE network_id = ? AND owner = ?", (float(seconds), network_id, owner))
    return cursor.rowcount == 1


def release(conn, network_id, owner):
    """The lease given up (a watcher stopping): a standby takes it at its next poll."""
    conn.execute("DELETE FROM watcher_leases WHERE network_id = ? AND owner = ?",
                 (network_id, owner))


def holder(conn, network_id):
    """(owner, seconds its lease has left, negative when expired), or None when nobody holds it."""
    row = conn.execute(f"SELECT owner, expires_at - {_now(conn)} FROM watcher_leases"
                       f" WHERE network_id = ?", (network_id,)).fetchone()
    return (row[0], float(row[1])) if row else None
