"""SQL for the console's overview (docs/console.md, "The overview"): what a merchant was paid, what
it refunded, its completed processes per currency, its sandbox payments, its processes by status,
the partly paid ones and what waits in its deposit addresses. Every query reads one merchant and,
but for the counts by status, one time window (the last 30 UTC days), through an index: the page
costs the same at a million processes.

Amounts are summed exactly in SQL on both backends (`_sum`): as integers when every one fits in 64
bits (the usual case: PostgreSQL sums bigints as NUMERIC, SQLite raises on an overflow), else
PostgreSQL sums them as NUMERIC, and SQLite, which has no exact decimal type (its sum() of text
turns into a float), sums each amount cut into 9-digit pieces (`_pieces`), each piece as an integer
(no overflow below 10^9 rows), the sums joined again in Python (`_joined`). A day is `time / 86400`
(UTC)."""
from decimal import Decimal

from app.data import rollups
from app.data.outbox import STATES
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
    found = [f"sum(CAST(substr({whole}, {-9 * (k + 1)}, 9) AS INTEGER))"
             for k in range(_WHOLE_PIECES)]
    if fraction:
        found += [f"sum(CAST(substr({part} || '{'0' * 18}', {9 * j + 1}, 9) AS INTEGER))"
                  for j in range(_FRACTION_PIECES)]
    return found


def _sum(conn, sql, params, column, keys, fraction=False) -> list[tuple]:
    """Run `sql`, whose `{sums}` stands for the exact sum of `column` and whose first `keys`
    columns are its GROUP BY: [(*keys, Decimal)]. An integer column whose values all have at most
    18 digits (below 2^63) is summed as integers first, the quick way on both backends (PostgreSQL
    sums bigints as NUMERIC; SQLite's sum() raises on an overflow rather than rounding); a longer
    value, or that error, and it is summed again by `_pieces`."""
    if not fraction:
        quick = (f"sum(CASE WHEN length({column}) <= 18 THEN CAST({column} AS BIGINT) END),"
                 f" max(length({column}))")
        try:
            rows = conn.execute(sql.replace("{sums}", quick), params).fetchall()
        except Exception as e:  # sqlite3.OperationalError: integer overflow
            if "overflow" not in str(e):
                raise
        else:
            if all(r[keys + 1] is None or r[keys + 1] <= 18 for r in rows):
                return [(*r[:keys], Decimal(r[keys] or 0)) for r in rows]
    pieces = _pieces(conn, column, fraction)
    rows = conn.execute(sql.replace("{sums}", ", ".join(pieces)), params).fetchall()
    return [(*r[:keys], _joined(r[keys:], fraction)) for r in rows]


def seq_since(conn, since) -> int:
    """The first process `seq` created at or after `since`, found in a few primary-key reads:
    processes are numbered in the order they are created, so created_at grows with seq (but for
    the seconds two preorders at once may cross). What is counted "since" a time is then a range
    of seq, which the (merchant_id, status, seq) index reads directly."""
    low, high = 0, conn.execute("SELECT COALESCE(max(seq), 0) + 1 FROM processes").fetchone()[0]
    while low < high:  # the first seq whose process (or the next one) is not older than `since`
        middle = (low + high) // 2
        row = conn.execute("SELECT created_at FROM processes WHERE seq >= ? ORDER BY seq LIMIT 1",
                           (middle,)).fetchone()
        if row is not None and row[0] < since:
            low = middle + 1
        else:
            high = middle
    return low


def _joined(values, fraction=False) -> Decimal:
    """The exact sum from the values of `_pieces`' expressions."""
    values = [v or 0 for v in values]
    if len(values) == 1:
        return Decimal(values[0])
    whole = sum(int(v) * 10 ** (9 * k) for k, v in enumerate(values[:_WHOLE_PIECES]))
    part = sum(Decimal(int(v)).scaleb(-9 * (j + 1)) for j, v in enumerate(values[_WHOLE_PIECES:]))
    return Decimal(whole) + part if fraction else Decimal(whole)


def _confirmed(conn) -> str:
    """The confirmed transfers, read by when they were confirmed (transfers_confirmed): SQLite's
    planner, which cannot tell how few rows a recent window holds, is told to."""
    return "transfers t" + (" INDEXED BY transfers_confirmed" if dialect(conn) == "sqlite" else "")


def _alone(conn, merchant_id) -> bool:
    """Whether every payment in the database is the merchant's (a self-hosted shop): two reads of
    the (merchant_id, address_index) index."""
    return not any(conn.execute(f"SELECT 1 FROM payments WHERE merchant_id {op} ? LIMIT 1",
                                (merchant_id,)).fetchone() for op in ("<", ">"))


def paid_by_day(conn, merchant_id, since) -> list[tuple]:
    """Confirmed transfers to the merchant's deposit addresses, confirmed at or after `since`:
    [(network id, token contract, day, transfers, base units)]. When every payment is the
    merchant's, its transfers are read without joining their payments (a join per transfer
    costs more than the sum)."""
    join, where, params = "", "", (since,)
    if not _alone(conn, merchant_id):
        join, where, params = (" JOIN payments p ON p.process_id = t.process_id",
                               " AND p.merchant_id = ?", (since, merchant_id))
    rows = _sum(conn, f"SELECT t.network_id, t.token_contract, t.confirmed_at / {DAY}, count(*),"
                f" {{sums}} FROM {_confirmed(conn)}{join} WHERE t.status = 'confirmed'"
                f" AND t.confirmed_at >= ?{where} GROUP BY 1, 2, 3", params, "t.amount", 4)
    return [(*r[:4], int(r[4])) for r in rows]


def refunded_by_day(conn, merchant_id, since) -> list[tuple]:
    """The merchant's refunds completed at or after `since`: [(asset id, decimals, day, refunds,
    base units)]."""
    rows = _sum(conn, f"SELECT asset_id, decimals, updated_at / {DAY}, count(*), {{sums}}"
                " FROM refunds WHERE merchant_id = ? AND status = 'completed' AND updated_at >= ?"
                " GROUP BY 1, 2, 3", (merchant_id, since), "amount", 4)
    return [(*r[:4], int(r[4])) for r in rows]


def completed_without_transfer_by_day(conn, merchant_id, since, from_seq) -> list[tuple]:
    """Processes created from `from_seq` on (seq_since) and completed at or after `since` with no
    live payment (sandbox payments; in live mode, completed by the operator): [(currency, day,
    processes, sum of their amounts)], amounts of one currency only summed together. Such a
    completion comes before the expiry, so within the creation window."""
    return _sum(conn, f"SELECT currency, updated_at / {DAY}, count(*), {{sums}} FROM processes"
                " WHERE merchant_id = ? AND status = 'completed' AND seq >= ? AND updated_at >= ?"
                " AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.process_id = processes.id)"
                " GROUP BY 1, 2", (merchant_id, from_seq, since), "amount", 3, fraction=True)


def completed_by_day(conn, merchant_id, since, from_seq) -> list[tuple]:
    """Processes created from `from_seq` on (seq_since) and completed at or after `since` (a
    completed process's `updated_at` is when it completed: nothing changes it afterwards), live
    or sandbox: [(currency, day, processes, exact sum of their amounts)]. One range of the
    `(merchant_id, status, seq)` index; the caller starts `from_seq` early enough for a process
    completed after its creation day."""
    return _sum(conn, f"SELECT currency, updated_at / {DAY}, count(*), {{sums}} FROM processes"
                " WHERE merchant_id = ? AND status = 'completed' AND seq >= ? AND updated_at >= ?"
                " GROUP BY 1, 2", (merchant_id, from_seq, since), "amount", 3, fraction=True)


def final_by_created_day(conn, merchant_id, from_seq) -> list[tuple]:
    """The merchant's processes created from `from_seq` on that reached a final status: [(status,
    day created, processes)]."""
    return [tuple(r) for r in conn.execute(
        f"SELECT status, created_at / {DAY}, count(*) FROM processes WHERE merchant_id = ?"
        " AND status IN ('completed', 'cancelled', 'expired') AND seq >= ? GROUP BY 1, 2",
        (merchant_id, from_seq))]


def pending_counts(conn, merchant_id, now, from_seq) -> tuple[int, int]:
    """(pending, lapsed) of the merchant's processes created from `from_seq` on that are still
    stored pending: lapsed ones are past their expiry and not held (shown as expired). The expiry
    sweep keeps these few: one range of the (merchant_id, status, seq) index."""
    pending = conn.execute("SELECT count(*) FROM processes WHERE merchant_id = ? AND status ="
                           " 'pending' AND seq >= ?", (merchant_id, from_seq)).fetchone()[0]
    lapsed = conn.execute(
        "SELECT count(*) FROM processes WHERE merchant_id = ? AND status = 'pending' AND seq >= ?"
        f" AND expires_at <= ? AND NOT {HELD}", (merchant_id, from_seq, now)).fetchone()[0] \
        if pending else 0
    return pending, lapsed


def days(conn, merchant_id, kind, since) -> list[tuple]:
    """The merchant's overview_days rows of `kind` from the day of `since` on, shaped as the
    history's queries give them (paid_by_day, refunded_by_day, completed_by_day,
    final_by_created_day): what a view reads instead of summing history. Rows a reversal brought
    back to nothing are left out."""
    found = []
    for key, day, count, amount in rollups.rows(conn, merchant_id, kind, since // DAY):
        if not count and not amount:
            continue
        if kind == "paid":
            network_id, token = key.split(" ", 1)
            found.append((network_id, token, day, count, int(amount)))
        elif kind == "refunded":
            asset_id, decimals = key.rsplit(" ", 1)
            found.append((asset_id, int(decimals), day, count, int(amount)))
        elif kind == "final":
            found.append((key, day, count))
        else:
            found.append((key, day, count, amount))
    return found


def rebuild(conn):
    """overview_days (app/data/rollups.py) summed anew from the history, exactly: init-db's upgrade
    to version 20, and tools that load rows without the service's writes (benchmark seeds)."""
    rollups.clear(conn)
    for (merchant_id,) in conn.execute("SELECT id FROM merchants").fetchall():
        for status, day, count in final_by_created_day(conn, merchant_id, 0):
            rollups.bump(conn, merchant_id, "final", status, day, count)
        for kind, found in (("completed", completed_by_day(conn, merchant_id, 0, 0)),
                            ("sandbox",
                             completed_without_transfer_by_day(conn, merchant_id, 0, 0))):
            for code, day, count, amount in found:
                rollups.bump(conn, merchant_id, kind, code, day, count, amount)
        for network_id, token, day, count, base in paid_by_day(conn, merchant_id, 0):
            rollups.bump(conn, merchant_id, "paid", f"{network_id} {token}", day, count, base)
        for asset_id, decimals, day, count, base in refunded_by_day(conn, merchant_id, 0):
            rollups.bump(conn, merchant_id, "refunded", f"{asset_id} {decimals}", day, count, base)


def _by_type(conn) -> str:
    return " INDEXED BY events_merchant_type" if dialect(conn) == "sqlite" else ""


def partly_paid_candidates(conn, merchant_id, since, limit) -> list[str]:
    """Processes of the merchant that reported a partial payment (`payment.partial`: confirmed
    money below what was due) at or after `since` and did not complete since, those of the newest
    reports first, `limit` at most: the caller compares what was paid with what is due, exactly (a
    later transfer may have paid the rest)."""
    rows = conn.execute(  # newest first down the index, a few reports a process at most
        f"SELECT e.process_id FROM events e{_by_type(conn)}"
        " JOIN processes pr ON pr.id = e.process_id"
        " WHERE e.merchant_id = ? AND e.type = 'payment.partial' AND e.created_at >= ?"
        " AND pr.status <> 'completed' ORDER BY e.created_at DESC LIMIT ?",
        (merchant_id, since, 3 * limit)).fetchall()
    return list(dict.fromkeys(r[0] for r in rows))[:limit]


def paid_candidates(conn, merchant_id, since, limit) -> list[str]:
    """Processes of the merchant with a transfer confirmed at or after `since`, those of the newest
    transfers first, `limit` at most (transfers_confirmed read backwards): the caller compares what
    was paid with what is due, exactly."""
    rows = conn.execute(
        f"SELECT t.process_id FROM {_confirmed(conn)}"
        " JOIN payments p ON p.process_id = t.process_id"
        " WHERE t.status = 'confirmed' AND t.confirmed_at >= ? AND p.merchant_id = ?"
        " ORDER BY t.confirmed_at DESC LIMIT ?", (since, merchant_id, 3 * limit)).fetchall()
    return list(dict.fromkeys(r[0] for r in rows))[:limit]


def partly_paid(conn, process_ids, over=False) -> tuple[int, list[str]]:
    """Of these processes, (how many are partly paid: confirmed money above zero and below what is
    due, in the token chosen, exact; with `over`, how many are overpaid: above what is due; the ids
    SQL cannot tell, some of their money having come in the token of an earlier choice: the caller
    checks those through their payment views)."""
    ids, rows = list(process_ids), []
    for start in range(0, len(ids), 500):  # a bounded IN list
        chunk = ids[start:start + 500]
        rows += _sum(conn, "SELECT p.process_id, p.amount_due, max(CASE WHEN t.token_contract <>"
                     " p.token_contract OR t.network_id <> p.network_id THEN 1 ELSE 0 END), {sums}"
                     " FROM payments p JOIN transfers t ON t.process_id = p.process_id"
                     f" WHERE p.process_id IN ({', '.join('?' * len(chunk))})"
                     " AND t.status = 'confirmed'"
                     " GROUP BY 1, 2", chunk, "t.amount", 3)
    count, unsure = 0, []
    for process_id, due, other, paid in rows:
        if other:
            unsure.append(process_id)
        elif (paid > int(due)) if over else (0 < paid < int(due)):
            count += 1
    return count, unsure


def last_collection(conn, merchant_id) -> dict[str, int]:
    """When each network's newest confirmed collection of the merchant's addresses was sent."""
    return {r[0]: r[1] for r in conn.execute(
        "SELECT c.network_id, max(c.created_at) FROM collections c WHERE c.status = 'confirmed'"
        " AND EXISTS (SELECT 1 FROM collection_items i WHERE i.collection_id = c.id"
        " AND i.merchant_id = ?) GROUP BY c.network_id", (merchant_id,))}


def uncollected(conn, merchant_id, network_id, since) -> list[tuple]:
    """Money confirmed on `network_id` at or after `since` in the merchant's payout-mode deposit
    addresses that no confirmed collection took after it arrived, as the database knows it (the
    chain itself is read on the payouts page): [(token contract, addresses, base units)]."""
    return [(r[0], r[1], int(r[2])) for r in _sum(
        conn, f"SELECT t.token_contract, count(DISTINCT p.address), {{sums}}"
        f" FROM {_confirmed(conn)} JOIN payments p ON p.process_id = t.process_id"
        " WHERE t.status = 'confirmed' AND t.confirmed_at >= ? AND t.network_id = ?"
        " AND p.merchant_id = ? AND p.mode = 'payout'"
        " AND NOT EXISTS (SELECT 1 FROM collection_items i"
        "  JOIN collections c ON c.id = i.collection_id WHERE i.address = p.address"
        "  AND lower(i.token) = lower(t.token_contract) AND c.status = 'confirmed'"
        " AND c.block_number >= t.block_number)"
        " GROUP BY 1", (since, network_id, merchant_id), "t.amount", 2)]


def failing_deliveries(conn, merchant_id) -> int:
    """The merchant's deliveries that are failing (outbox.failing's rule), read through the
    partial index deliveries_failing: its own failing ones only. Test events' are not counted."""
    return conn.execute(
        f"SELECT count(*) FROM deliveries d WHERE d.merchant_id = ? AND {STATES['failing']}"
        " AND EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id AND e.process_id IS NOT NULL)",
        (merchant_id,)).fetchone()[0]
