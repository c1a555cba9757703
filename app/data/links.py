"""SQL for payment links (app/domain/links.py): the links, the count of a link's completed
processes, and the rate limit's record of the processes each client address made from a link."""
from app.core.records import Link
from app.data.schema import dialect

_COLUMNS = ("id, merchant_id, livemode, amount, currency, description, metadata, success_url,"
            " max_payments, expires_at, deactivated_at, created_at")


def _link(row):
    values = {k: row[k] for k in row.keys()}
    values["livemode"] = bool(values["livemode"])
    return Link(**values)


def insert(conn, link: Link):
    conn.execute(f"INSERT INTO links ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (link.id, link.merchant_id, int(link.livemode), link.amount, link.currency,
                  link.description, link.metadata, link.success_url, link.max_payments,
                  link.expires_at, link.deactivated_at, link.created_at))


def get(conn, link_id) -> Link | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM links WHERE id = ?", (link_id,)).fetchone()
    return _link(row) if row else None


def page(conn, merchant_id, limit, before=None) -> tuple[list[Link], bool]:
    """(links, has_more), newest first, after the link `before` (a Link) when given."""
    where, params = "merchant_id = ?", [merchant_id]
    if before is not None:
        where += " AND (created_at < ? OR (created_at = ? AND id < ?))"
        params += [before.created_at, before.created_at, before.id]
    rows = conn.execute(f"SELECT {_COLUMNS} FROM links WHERE {where}"
                        " ORDER BY created_at DESC, id DESC LIMIT ?",
                        (*params, limit + 1)).fetchall()
    return [_link(r) for r in rows[:limit]], len(rows) > limit


def lock(conn, link_id):
    """Hold the link's row until the transaction ends (PostgreSQL; SQLite's one writer already
    queues every write transaction), so clicks at once are counted one after the other."""
    if dialect(conn) == "postgresql":
        conn.execute("SELECT 1 FROM links WHERE id = ? FOR UPDATE", (link_id,))


def deactivate(conn, link_id, now) -> bool:
    return conn.execute("UPDATE links SET deactivated_at = ? WHERE id = ?"
                        " AND deactivated_at IS NULL", (now, link_id)).rowcount == 1


def payments(conn, link_ids) -> dict[str, int]:
    """Completed processes of each of these links (the processes_link index)."""
    ids = list(link_ids)
    if not ids:
        return {}
    rows = conn.execute(f"SELECT link_id, count(*) FROM processes WHERE link_id IN"
                        f" ({','.join('?' * len(ids))}) AND status = 'completed' GROUP BY link_id",
                        ids)
    return {row[0]: row[1] for row in rows}


def hits_since(conn, link_id, client, since) -> list[int]:
    """When the client made processes from the link since `since`, oldest first."""
    return [row[0] for row in conn.execute(
        "SELECT created_at FROM link_hits WHERE link_id = ? AND client = ? AND created_at >= ?"
        " ORDER BY created_at", (link_id, client, since))]


def hit(conn, link_id, client, now, forget_before):
    """A process made from the link by the client; hits before `forget_before` (of any link) are
    forgotten a few at a time, so the table stays about a minute of clicks."""
    conn.execute("INSERT INTO link_hits (link_id, client, created_at) VALUES (?, ?, ?)",
                 (link_id, client, now))
    conn.execute("DELETE FROM link_hits WHERE created_at < ? AND created_at IN (SELECT created_at"
                 " FROM link_hits WHERE created_at < ? ORDER BY created_at LIMIT 100)",
                 (forget_before, forget_before))
