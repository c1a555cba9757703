"""SQL for what the console's overview sums, kept current in `overview_days` as it happens: each
change it counts (a process reaching a final status, a transfer confirmed or reversed, a refund
completed or reversed) adds to its merchant's row of that kind, day and key in the same transaction,
so a view reads at most 30 days of rows whatever the history (docs/console.md, "The overview").

Amounts are exact decimal text. PostgreSQL adds them as NUMERIC in the UPSERT itself (concurrent
writers of one row queue on its lock); SQLite, whose only exact arithmetic is on integers, reads the
row and writes the sum, which its one writer at a time makes safe."""
from decimal import Decimal

from app.data.schema import dialect

DAY = 86_400


def bump(conn, merchant_id, kind, key, day, count, amount=0):
    """Add `count` and `amount` (a Decimal or int; negative to take away) to the row."""
    amount = Decimal(amount)
    if dialect(conn) == "postgresql":
        conn.execute(
            "INSERT INTO overview_days (merchant_id, kind, day, key, count, amount)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (merchant_id, kind, day, key) DO UPDATE SET"
            " count = overview_days.count + excluded.count, amount = CAST(CAST(overview_days.amount"
            " AS NUMERIC) + CAST(excluded.amount AS NUMERIC) AS TEXT)",
            (merchant_id, kind, day, key, count, _text(amount)))
        return
    row = conn.execute("SELECT count, amount FROM overview_days WHERE merchant_id = ? AND kind = ?"
                       " AND day = ? AND key = ?", (merchant_id, kind, day, key)).fetchone()
    if row is not None:
        count, amount = row[0] + count, Decimal(row[1]) + amount
    conn.execute("INSERT INTO overview_days (merchant_id, kind, day, key, count, amount)"
                 " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (merchant_id, kind, day, key)"
                 " DO UPDATE SET count = excluded.count, amount = excluded.amount",
                 (merchant_id, kind, day, key, count, _text(amount)))


def _text(amount: Decimal) -> str:
    return format(amount, "f")


def on_final(conn, process_id, status, now):
    """A process just reached `status` (completed, cancelled, expired) at `now`."""
    row = conn.execute(
        "SELECT merchant_id, created_at, amount, currency,"
        " EXISTS (SELECT 1 FROM payments p WHERE p.process_id = processes.id) AS paid_live"
        " FROM processes WHERE id = ?", (process_id,)).fetchone()
    merchant_id, created_at, amount, code, live = row
    bump(conn, merchant_id, "final", status, created_at // DAY, 1)
    if status == "completed":
        bump(conn, merchant_id, "completed", code, now // DAY, 1, Decimal(amount))
        if not live:
            bump(conn, merchant_id, "sandbox", code, now // DAY, 1, Decimal(amount))


def on_paid(conn, transfer, sign=1):
    """A transfer to a deposit address was confirmed (`sign` 1) or, once confirmed, reversed (-1):
    counted on the day it was confirmed."""
    row = conn.execute("SELECT merchant_id FROM payments WHERE process_id = ?",
                       (transfer.process_id,)).fetchone()
    if row is None:
        return
    bump(conn, row[0], "paid", f"{transfer.network_id} {transfer.token_contract}",
         transfer.confirmed_at // DAY, sign, sign * transfer.amount)


def on_refund(conn, refund, sign=1):
    """A refund completed (`sign` 1) on the day of its `updated_at`, or a completed one reversed
    (-1, on the day it had completed)."""
    bump(conn, refund.merchant_id, "refunded", f"{refund.asset_id} {refund.decimals}",
         refund.updated_at // DAY, sign, sign * refund.amount)


def rows(conn, merchant_id, kind, since_day) -> list[tuple]:
    """[(key, day, count, Decimal amount)] of the merchant's rows of `kind` from `since_day` on."""
    return [(key, day, count, Decimal(amount)) for key, day, count, amount in conn.execute(
        "SELECT key, day, count, amount FROM overview_days WHERE merchant_id = ? AND kind = ?"
        " AND day >= ? ORDER BY day, key", (merchant_id, kind, since_day))]


def clear(conn):
    conn.execute("DELETE FROM overview_days")


def is_empty(conn) -> bool:
    return conn.execute("SELECT 1 FROM overview_days LIMIT 1").fetchone() is None
