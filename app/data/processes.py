"""SQL for payment processes. Transitions are single guarded UPDATEs: the row changes only if it is
still in the state the caller saw, so of two racing transitions exactly one touches the row.

The console's search reads `process_search`: each top-level scalar value of a process's metadata,
trimmed and lowercased (`search_values`), written with the process in the same transaction, as its
`search_key`."""
import hashlib
import json
from itertools import islice

from app.core.records import Process
from app.data import rollups
from app.data.schema import dialect
from app.data.unexpected import HAS_UNEXPECTED

_STORED = (
    "seq, id, merchant_id, status, amount, metadata, livemode, created_at, updated_at, expires_at,"
    " currency, description, success_url, cancel_url, checkout_base, link_id"
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
        currency=row["currency"],
        description=row["description"],
        success_url=row["success_url"],
        cancel_url=row["cancel_url"],
        checkout_base=row["checkout_base"],
        link_id=row["link_id"],
    )


# seq is left to the database (SQLite's rowid alias, PostgreSQL's identity column).
_INSERT = (
    "INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode, created_at,"
    " updated_at, expires_at, currency, description, success_url, cancel_url, checkout_base,"
    " link_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _values(p: Process):
    return (p.id, p.merchant_id, p.status, p.amount, p.metadata, int(p.livemode), p.created_at,
            p.updated_at, p.expires_at, p.currency, p.description, p.success_url, p.cancel_url,
            p.checkout_base, p.link_id)


# What the console's search indexes of one process: enough for order references, e-mails and
# customer ids, while a large metadata object (line items) costs a preorder no more than a few rows.
SEARCH_MAX_VALUES = 32
SEARCH_MAX_LENGTH = 200


def search_value(text) -> str:
    """A value as the search index keeps it (and as a search box's text is looked up): trimmed,
    lowercased, a NUL character as U+FFFD (PostgreSQL's text cannot hold NUL; both backends alike,
    so a search for it finds it)."""
    return text.strip().lower().replace("\x00", "\ufffd")


def search_key(merchant_id, value) -> int:
    """A search row's key: the first 8 bytes of SHA-256 of "merchant_id/value" (UTF-8) as a signed
    big-endian integer (PostgreSQL's bigint): 8 bytes a row whatever the value's length. Two
    values of one merchant share a key with odds about n² / 2**65 (n: its values), and the list
    checks the merchant too."""
    text = f"{merchant_id}/{value}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big", signed=True)


def search_values(metadata: str) -> list[str]:
    """The distinct searchable values of a metadata JSON text: its top-level strings and numbers
    (the number's literal text), trimmed, lowercased, at most SEARCH_MAX_LENGTH characters."""
    if metadata == "{}":
        return []
    data = json.loads(metadata, parse_float=str, parse_int=str)  # numbers keep their literal text
    found = []
    for value in data.values():
        if isinstance(value, str):
            value = search_value(value)
            if value and len(value) <= SEARCH_MAX_LENGTH and value not in found:
                found.append(value)
                if len(found) == SEARCH_MAX_VALUES:
                    break
    return found


_SEARCH_ROW = "INSERT INTO process_search (key, seq) VALUES (?, ?) ON CONFLICT DO NOTHING"


def insert(conn, p: Process, search=None):
    """Insert the process and its search rows (`search`: its search_values, when the caller made
    them before taking the write lock)."""
    values = search_values(p.metadata) if search is None else search
    if not values:
        conn.execute(_INSERT, _values(p))
        return
    seq = conn.execute(_INSERT + " RETURNING seq", _values(p)).fetchone()[0]
    conn.executemany(_SEARCH_ROW, [(search_key(p.merchant_id, value), seq) for value in values])


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


# The console's filters on what a process was paid, as conditions on `processes`: name -> SQL,
# with one `?` for the value chosen where the name ends in "=". A new filter is one more entry.
_CONFIRMED = ("EXISTS (SELECT 1 FROM transfers t WHERE t.process_id = processes.id"
              " AND t.status = 'confirmed')")
CONDITIONS = {
    "paid": _CONFIRMED,
    # Money confirmed on a process that did not complete; "below what is due" is checked exactly
    # by the caller (app/console/processes.py), amounts being decimal text.
    "partly": f"processes.status <> 'completed' AND {_CONFIRMED}",
    # Money confirmed: "above what is due" is checked exactly by the caller, as "partly" is.
    "overpaid": _CONFIRMED,
    "refunded": ("EXISTS (SELECT 1 FROM refunds r WHERE r.process_id = processes.id"
                 " AND r.status = 'completed')"),
    "asset=": ("EXISTS (SELECT 1 FROM payments p WHERE p.process_id = processes.id"
               " AND p.asset_id = ?)"),
    "network=": ("EXISTS (SELECT 1 FROM payments p WHERE p.process_id = processes.id"
                 " AND p.network_id = ?)"),
    "unexpected": HAS_UNEXPECTED,  # a confirmed transfer that is not the payment's choice
    "link=": "processes.link_id = ?",  # made from that payment link (the processes_link index)
}


def list_page(conn, *, now, limit, merchant_id=None, status=None, before_seq=None, value=None,
              created_from=None, created_before=None, conditions=()):
    """Newest first; `limit + 1` rows are read so the caller can tell whether there is more.
    The console's filters: `value`, a metadata value as `search_value` writes it (the merchant's
    processes holding it, through the process_search index); `created_from` <= created_at <
    `created_before` (unix seconds); `conditions`: (name of CONDITIONS, value or None) pairs.
    Those read the merchant's processes newest first and test each (an EXISTS on an index), so a
    condition few processes meet reads far back for a page (docs/console.md)."""
    source, order = "processes", "seq"
    where, params = "WHERE 1 = 1", []
    if value is not None:  # the index's rows in its own order, each joined to its process
        source = "process_search s JOIN processes ON processes.seq = s.seq"
        order = "s.seq"
        where += " AND s.key = ?"
        params.append(search_key(merchant_id, value))
    if merchant_id is not None:
        where += " AND merchant_id = ?" if value is None else " AND processes.merchant_id = ?"
        params.append(merchant_id)
    clause, extra = _status_clause(status, now)
    where += clause
    params.extend(extra)
    if created_from is not None:
        where += " AND created_at >= ?"
        params.append(created_from)
    if created_before is not None:
        where += " AND created_at < ?"
        params.append(created_before)
    for name, chosen in conditions:
        where += f" AND {CONDITIONS[name]}"
        params.extend([chosen] if name.endswith("=") else [])
    if before_seq is not None:
        where += f" AND {order} < ?"
        params.append(before_seq)
    columns = _COLUMNS if value is None else _COLUMNS.replace(
        "seq, id, merchant_id,", "processes.seq, id, processes.merchant_id,", 1)
    rows = conn.execute(
        f"SELECT {columns} FROM {source} {where} ORDER BY {order} DESC LIMIT ?",
        (*params, limit + 1),
    ).fetchall()
    return [_process(row) for row in rows[:limit]], len(rows) > limit


def meets(conn, process_id, conditions) -> bool:
    """Whether the process meets every (name of CONDITIONS, value or None) of `conditions`."""
    where, params = "", [process_id]
    for name, chosen in conditions:
        where += f" AND {CONDITIONS[name]}"
        params.extend([chosen] if name.endswith("=") else [])
    return conn.execute(f"SELECT 1 FROM processes WHERE id = ?{where}",
                        params).fetchone() is not None


def transition(conn, process_id, to_status, now, completed_by=None) -> bool:
    """pending -> to_status, only while the process is pending and not yet past its expiry (or
    held past it: HELD). `completed_by`: how a completion came about ('operator', 'sandbox')."""
    cur = conn.execute(
        "UPDATE processes SET status = ?, updated_at = ?, completed_by = ?"
        f" WHERE id = ? AND status = 'pending' AND (expires_at > ? OR {HELD})",
        (to_status, now, completed_by, process_id, now),
    )
    if cur.rowcount != 1:
        return False
    rollups.on_final(conn, process_id, to_status, now)
    return True


def complete_paid(conn, process_id, now) -> bool:
    """pending -> completed by its payment (the chain watcher, or staff accepting an unexpected
    transfer): paid in time (checked by the caller from the transfers' block timestamps), so
    expires_at is not checked here."""
    cur = conn.execute(
        "UPDATE processes SET status = 'completed', updated_at = ?, completed_by = 'payment'"
        " WHERE id = ? AND status = 'pending'",
        (now, process_id),
    )
    if cur.rowcount != 1:
        return False
    rollups.on_final(conn, process_id, "completed", now)
    return True


def completed_by(conn, process_ids) -> dict[str, str | None]:
    """How each of these processes was completed (`reconcile`): 'payment', 'operator', 'sandbox',
    or None (not completed, or completed before that was recorded)."""
    ids = list(process_ids)
    if not ids:
        return {}
    rows = conn.execute("SELECT id, completed_by FROM processes"
                        f" WHERE id IN ({','.join('?' * len(ids))})", ids)
    return {row["id"]: row["completed_by"] for row in rows}


def expire(conn, process_id, now) -> bool:
    """pending -> expired, only once the expiry has passed and nothing holds it (HELD: no
    paid-in-time transfer still confirming, the watcher past the expiry)."""
    cur = conn.execute(
        "UPDATE processes SET status = 'expired', updated_at = expires_at"
        f" WHERE id = ? AND status = 'pending' AND expires_at <= ? AND NOT {HELD}",
        (process_id, now),
    )
    if cur.rowcount != 1:
        return False
    rollups.on_final(conn, process_id, "expired", now)
    return True


def due_for_expiry(conn, now, limit) -> list[str]:
    """In one total order (seq breaks ties): sweepers that expire the same processes at once lock
    their rows in the same order, so on PostgreSQL they wait for each other instead of
    deadlocking."""
    rows = conn.execute(
        "SELECT id FROM processes WHERE status = 'pending' AND expires_at <= ?"
        f" AND NOT {HELD} ORDER BY expires_at, seq LIMIT ?",
        (now, limit),
    )
    return [row["id"] for row in rows]


def insert_many(conn, processes) -> int:
    """Bulk insert (an iterable of Process), search rows included, in chunks (constant memory): for
    loading data, e.g. the 1M-process benchmarks."""
    count, processes = 0, iter(processes)
    while chunk := list(islice(processes, 10_000)):
        last = conn.execute("SELECT COALESCE(max(seq), 0) FROM processes").fetchone()[0]
        count += conn.executemany(_INSERT, map(_values, chunk)).rowcount
        seqs = {row[1]: row[0]
                for row in conn.execute("SELECT seq, id FROM processes WHERE seq > ?", (last,))}
        conn.executemany(_SEARCH_ROW, [(search_key(p.merchant_id, value), seqs[p.id])
                                       for p in chunk for value in search_values(p.metadata)])
    return count
