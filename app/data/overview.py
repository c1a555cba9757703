"""SQL for the console's overview (docs/console.md, "The overview"): what a merchant was paid, what
it refunded, its sandbox payments, its processes by status, the partly paid ones and what waits in
its deposit addresses. Every query reads one merchant and, but for the counts by status, one time
window (the last 30 UTC days), through an index: the page costs the same at a million processes.

Amounts are summed exactly in SQL on both backends. PostgreSQL sums them as NUMERIC. SQLite has no
exact decimal type (its sum() of integers stops at 2^63, of text it turns into a float), so each
amount is cut into 9-digit pieces (`_pieces`), each piece summed as an integer (no overflow below
10^9 rows) and the sums joined again in Python (`_joined`). A day is `time / 86400` (UTC)."""
from decimal import Decimal

from app.data.processes import HELD
from app.data.schema import dialect

DAY = 86_400
_WHOLE_PIECES = 9  # 81 digits: more than any uint256 (78)
_FRACTION_PIECES = 2  # 18 decimal places: more than AMOUNT_DECIMALS allows


def _pieces(conn, column, fraction=False) -> list[str]:
    """The aggregate expressions that sum `column` (decimal text) exactly, `fraction`: it may hold a
    decimal point (a process amount), else it is an integer (base units)."""
    if dialect(conn) == "postgresql":
        return [f"sum(CAST({column} AS NUMERIC))"]
    whole, part = column, "''"
    if fraction:
        point = f"instr({column}, '.')"
        whole = f"(CASE WHEN {point} > 0 THEN substr({column}, 1, {point} - 1) ELSE {column} END)"
        part = f"(CASE WHEN {point} > 0 THEN substr({column}, {point} + 1) ELSE '' END)"
    found = [f"sum(CAST(substr({whole}, {-9 * (k + 1)}, 9) AS INTEGER))" for k in range(_WHOLE_PIECES)]
    if fraction:
        found += [f"sum(CAST(substr({part} || '{'0' * 18}', {9 * j + 1}, 9) AS INTEGER))"
                  for j in range(_FRACTION_PIECES)]
    return found


def _joined(values, fraction=False) -> Decimal:
    """The exact sum from the values of `_pieces`' expressions."""
    values = [v or 0 for v in values]
    if len(values) == 1:
        return Decimal(values[0])
    whole = sum(int(v) * 10 ** (9 * k) for k, v in enumerate(values[:_WHOLE_PIECES]))
    part = sum(Decimal(int(v)).scaleb(-9 * (j + 1)) for j, v in enumerate(values[_WHOLE_PIECES:]))
    return Decimal(whole) + part if fraction else Decimal(whole)


def paid_by_day(conn, merchant_id, since) -> list[tuple]:
    """Confirmed transfers to the merchant's deposit addresses, confirmed at or after `since`:
    [(network id, token contract, day, transfers, base units)]."""
    sums = _pieces(conn, "t.amount")
    rows = conn.execute(
        f"SELECT t.network_id, t.token_contract, t.confirmed_at / {DAY}, count(*), {', '.join(sums)}"
        " FROM transfers t JOIN payments p ON p.process_id = t.process_id"
        " WHERE t.status = 'confirmed' AND t.confirmed_at >= ? AND p.merchant_id = ?"
        " GROUP BY 1, 2, 3", (since, merchant_id)).fetchall()
    return [(r[0], r[1], r[2], r[3], int(_joined(r[4:]))) for r in rows]


def refunded_by_day(conn, merchant_id, since) -> list[tuple]:
    """The merchant's refunds completed at or after `since`: [(asset id, decimals, day, refunds,
    base units)]."""
    sums = _pieces(conn, "amount")
    rows = conn.execute(
        f"SELECT asset_id, decimals, updated_at / {DAY}, count(*), {', '.join(sums)} FROM refunds"
        " WHERE merchant_id = ? AND status = 'completed' AND updated_at >= ? GROUP BY 1, 2, 3",
        (merchant_id, since)).fetchall()
    return [(r[0], r[1], r[2], r[3], int(_joined(r[4:]))) for r in rows]


def completed_without_transfer_by_day(conn, merchant_id, since) -> list[tuple]:
    """Processes completed at or after `since` with no live payment (sandbox payments; in live mode,
    completed by the operator): [(day, processes, sum of their amounts)]. Such a completion happens
    before the expiry, so `expires_at >= since` bounds the read (processes_status_expiry)."""
    sums = _pieces(conn, "amount", fraction=True)
    rows = conn.execute(
        f"SELECT updated_at / {DAY}, count(*), {', '.join(sums)} FROM processes"
        " WHERE status = 'completed' AND expires_at >= ? AND merchant_id = ? AND updated_at >= ?"
        " AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.process_id = processes.id) GROUP BY 1",
        (since, merchant_id, since)).fetchall()
    return [(r[0], r[1], _joined(r[2:], fraction=True)) for r in rows]


def counts_by_status(conn, merchant_id, now) -> dict[str, int]:
    """The merchant's processes by effective status (a pending one past its expiry, not held, is
    expired): one index-only count per stored status (processes_merchant_status_seq)."""
    counts = {row[0]: row[1] for row in conn.execute(
        "SELECT status, count(*) FROM processes WHERE merchant_id = ? GROUP BY status", (merchant_id,))}
    lapsed = conn.execute(
        "SELECT count(*) FROM processes WHERE merchant_id = ? AND status = 'pending' AND expires_at <= ?"
        f" AND NOT {HELD}", (merchant_id, now)).fetchone()[0]
    if lapsed:
        counts["pending"] -= lapsed
        counts["expired"] = counts.get("expired", 0) + lapsed
    return counts


def unsettled_paid(conn, merchant_id, since) -> list[str]:
    """Processes of the merchant, not completed, with money confirmed at or after `since`: those
    that may be partly paid (the caller compares what was paid with what was due, exactly)."""
    rows = conn.execute(
        "SELECT DISTINCT t.process_id FROM transfers t JOIN payments p ON p.process_id = t.process_id"
        " JOIN processes pr ON pr.id = t.process_id"
        " WHERE t.status = 'confirmed' AND t.confirmed_at >= ? AND p.merchant_id = ?"
        " AND pr.status <> 'completed'", (since, merchant_id)).fetchall()
    return [r[0] for r in rows]


def uncollected(conn, merchant_id, since) -> list[tuple]:
    """Money confirmed at or after `since` in the merchant's payout-mode deposit addresses that no
    confirmed collection took after it arrived, as the database knows it (the chain itself is read
    on the payouts page): [(network id, token contract, addresses, base units)]."""
    sums = _pieces(conn, "t.amount")
    rows = conn.execute(
        f"SELECT t.network_id, t.token_contract, count(DISTINCT p.address), {', '.join(sums)}"
        " FROM transfers t JOIN payments p ON p.process_id = t.process_id"
        " WHERE t.status = 'confirmed' AND t.confirmed_at >= ? AND p.merchant_id = ?"
        " AND p.mode = 'payout' AND NOT EXISTS (SELECT 1 FROM collection_items i"
        "  JOIN collections c ON c.id = i.collection_id WHERE i.address = p.address"
        "  AND i.token = t.token_contract AND c.status = 'confirmed' AND c.block_number >= t.block_number)"
        " GROUP BY 1, 2", (since, merchant_id)).fetchall()
    return [(r[0], r[1], r[2], int(_joined(r[3:]))) for r in rows]


def failing_deliveries(conn, merchant_id) -> int:
    """The merchant's events whose delivery is failing (outbox.failing's rule), read through the
    events_due index: failed and retrying events are few whatever the number of events."""
    return conn.execute(
        "SELECT count(*) FROM events WHERE merchant_id = ? AND process_id IS NOT NULL"
        " AND (status = 'failed' OR (status = 'pending' AND last_error IS NOT NULL))",
        (merchant_id,)).fetchone()[0]
