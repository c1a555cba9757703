"""SQL of the chain watcher: its position per network, the transfers it records, the block hashes
it keeps to notice a reorganisation, and what it watches (deposit addresses per network).

Several watchers may run at once: a transfer is inserted once (its primary key is chain id, tx hash,
log index; the insert that wrote it is the one that reports it), a transfer is confirmed or orphaned
by a guarded UPDATE (from `seen` only), and the scan position moves by compare-and-set, so a
watcher whose view is stale rolls its step back instead of overwriting another's. A confirmed
transfer whose block left the chain (a reorganisation deeper than the confirmations) is `reversed`,
also by a guarded UPDATE.
"""
from dataclasses import replace

from app.core.records import ChainBlock, Transfer, WatchedAddress
from app.data import rollups
from app.data.schema import dialect, fetch_as

_TRANSFER = (
    "chain_id, tx_hash, log_index, network_id, process_id, token_contract, from_address, amount,"
    " block_number, block_hash, block_timestamp, status, seen_at, confirmed_at"
)


# The two tables of transfers to deposit addresses, with the same first columns and the same life:
# `transfers` (what pays a process) and `unexpected_transfers` (app/data/unexpected.py).
PAYING, UNEXPECTED = "transfers", "unexpected_transfers"


def _table(table):
    if table not in (PAYING, UNEXPECTED):
        raise ValueError(f"not a table of transfers: {table!r}")
    return table


def _transfer(row):
    values = {name: row[name] for name in row.keys()}
    values["amount"] = int(values["amount"])
    return Transfer(**values)


# --- Networks and the scan position --------------------------------------------------------------

def advance(conn, network_id, expected, scanned_block) -> bool:
    """Move the scan position from `expected` to `scanned_block`; False when another watcher moved
    it meanwhile (the caller rolls its step back)."""
    return conn.execute(
        "UPDATE networks SET scanned_block = ? WHERE id = ? AND scanned_block = ?",
        (scanned_block, network_id, expected),
    ).rowcount == 1


def _larger(conn):
    """SQL's two-argument maximum and minimum: SQLite's scalar MAX/MIN, PostgreSQL's
    GREATEST/LEAST."""
    return ("GREATEST", "LEAST") if dialect(conn) == "postgresql" else ("MAX", "MIN")


def rewind(conn, network_id, scanned_block):
    """Read again from scanned_block + 1 (after a reorganisation), never before the start block."""
    larger, smaller = _larger(conn)
    conn.execute(
        f"UPDATE networks SET scanned_block = {larger}(start_block - 1,"
        f" {smaller}(scanned_block, ?)) WHERE id = ?",
        (scanned_block, network_id),
    )


def set_head(conn, network_id, head):
    """The head confirmations are counted from. Only forwards: a lagging node behind a load
    balancer must not make confirmed transfers look shallower."""
    conn.execute(f"UPDATE networks SET head_block = {_larger(conn)[0]}(head_block, ?) WHERE id = ?",
                 (head, network_id))


# --- What the watcher watches --------------------------------------------------------------------

def watched_addresses(conn, livemode) -> list[WatchedAddress]:
    """Deposit addresses of `livemode` merchants' processes (the mode of the networks they are
    watched on), each with the network and token of its payment's choice and of each earlier choice
    (the customer may have paid with it before changing): watch_list's rows of the mode, one
    narrow table, so its cost follows what is watched, not the number of processes. The chain
    watcher looks for every transfer to these addresses on every network of the mode: one on a
    row's network and token pays, any other is unexpected. A payment on a network of the other
    mode (made before networks had modes) is never credited.

    The processes pending, or final at or after the monitoring window's start, are all there; so
    may be some final before it that prune_watch_list has not deleted yet: the watcher checks what
    it records against the process (final_before)."""
    return fetch_as(  # in its fields' order, lowercase already
        conn, "SELECT process_id, address, token_contract, expires_at, network_id FROM watch_list"
        " WHERE livemode = ?", (int(livemode),), WatchedAddress._make)


_WATCH_ROW = (  # watch_list rows of payments p (choices c) of processes w
    "INSERT INTO watch_list (process_id, network_id, token_contract, address, livemode,"
    " expires_at) SELECT w.id, {network}, lower({token}), lower(p.address), w.livemode,"
    " w.expires_at FROM {tables} WHERE {where} ON CONFLICT DO NOTHING")


def fill_watch_list(conn, final_since):
    """watch_list made from the payments (and earlier choices) of the processes pending or final
    at or after `final_since` (the upgrade that brought the table)."""
    recent = "(w.status = 'pending' OR w.updated_at >= ?)"
    conn.execute(_WATCH_ROW.format(
        network="p.network_id", token="p.token_contract",
        tables="payments p JOIN processes w ON w.id = p.process_id", where=recent), (final_since,))
    conn.execute(_WATCH_ROW.format(
        network="c.network_id", token="c.token_contract",
        tables="payment_choices c JOIN payments p ON p.process_id = c.process_id"
               " JOIN processes w ON w.id = c.process_id", where=recent), (final_since,))


def prune_watch_list(conn, final_since, limit) -> int:
    """Delete the rows of processes that became final before `final_since` (or are gone), from at
    most `limit` candidate rows. The candidates are those whose expiry is before it, oldest first:
    a process completed or cancelled became final before its expiry; one past it is final, or
    still pending (a payment in flight holds it) and kept. Returns the rows deleted."""
    return conn.execute(
        "DELETE FROM watch_list WHERE process_id IN (SELECT w.process_id FROM watch_list w"
        " WHERE w.expires_at < ? AND NOT EXISTS (SELECT 1 FROM processes p"
        "  WHERE p.id = w.process_id AND (p.status = 'pending' OR p.updated_at >= ?))"
        " ORDER BY w.expires_at LIMIT ?)", (final_since, final_since, limit)).rowcount


def watched_since(conn, since, livemode) -> list[WatchedAddress]:
    """What watched_addresses adds for the payments made, or changed to another choice, at or after
    `since` (a new payment's process is pending; one that became final is the caller's to check,
    with final_before)."""
    return fetch_as(  # in WatchedAddress's fields' order
        conn,
        "SELECT p.process_id, lower(p.address), lower(p.token_contract), pr.expires_at,"
        " p.network_id FROM payments p JOIN processes pr ON pr.id = p.process_id"
        " WHERE p.updated_at >= ? AND pr.livemode = ?"
        " UNION ALL SELECT p.process_id, lower(p.address), lower(c.token_contract), pr.expires_at,"
        " c.network_id FROM payment_choices c JOIN payments p ON p.process_id = c.process_id"
        " JOIN processes pr ON pr.id = c.process_id"
        " WHERE c.created_at >= ? AND pr.livemode = ?",
        (since, int(livemode), since, int(livemode)), WatchedAddress._make)


def final_before(conn, process_ids, final_since) -> set[str]:
    """Of these processes, those that became final before `final_since` (no longer watched)."""
    ids = list(process_ids)
    if not ids:
        return set()
    rows = conn.execute(
        f"SELECT id FROM processes WHERE id IN ({','.join('?' * len(ids))})"
        " AND status != 'pending' AND updated_at < ?", (*ids, final_since))
    return {row["id"] for row in rows}


# --- Transfers -----------------------------------------------------------------------------------

def record(conn, t: Transfer, table=PAYING) -> str | None:
    """Record a transfer in its status (`seen`, or `confirmed` when already deep enough): "new",
    "revived" (back on the chain after its block was orphaned or reversed: the same transaction
    included again in another block, now in `t`'s block and status), or None (already recorded).
    `table`: PAYING, or UNEXPECTED for one that is not the process's choice."""
    cur = conn.execute(
        f"INSERT INTO {_table(table)} ({_TRANSFER})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (t.chain_id, t.tx_hash, t.log_index, t.network_id, t.process_id, t.token_contract,
         t.from_address, str(t.amount), t.block_number, t.block_hash, t.block_timestamp, t.status,
         t.seen_at, t.confirmed_at),
    )
    if cur.rowcount == 1:
        if t.status == "confirmed" and table == PAYING:
            rollups.on_paid(conn, t)
        return "new"
    cur = conn.execute(
        f"UPDATE {table} SET block_number = ?, block_hash = ?, block_timestamp = ?, status = ?,"
        " seen_at = ?, confirmed_at = ?"
        " WHERE chain_id = ? AND tx_hash = ? AND log_index = ?"
        " AND status IN ('orphaned', 'reversed')",
        (t.block_number, t.block_hash, t.block_timestamp, t.status, t.seen_at, t.confirmed_at,
         t.chain_id, t.tx_hash, t.log_index),
    )
    if cur.rowcount != 1:
        return None
    if t.status == "confirmed" and table == PAYING:
        rollups.on_paid(conn, t)
    return "revived"


def orphan_block(conn, network_id, number, block_hash, table=PAYING) -> int:
    """The block left the chain: its unconfirmed transfers never count."""
    return conn.execute(
        f"UPDATE {_table(table)} SET status = 'orphaned'"
        " WHERE network_id = ? AND block_number = ? AND block_hash = ? AND status = 'seen'",
        (network_id, number, block_hash),
    ).rowcount


def orphan_above(conn, network_id, number, table=PAYING) -> int:
    return conn.execute(
        f"UPDATE {_table(table)} SET status = 'orphaned'"
        " WHERE network_id = ? AND block_number > ? AND status = 'seen'",
        (network_id, number),
    ).rowcount


def confirmed_above(conn, network_id, number, table=PAYING) -> list[Transfer]:
    """Counted transfers above a block, oldest first (those a deep reorganisation may reverse)."""
    rows = conn.execute(
        f"SELECT {_TRANSFER} FROM {_table(table)} WHERE network_id = ? AND block_number > ?"
        " AND status = 'confirmed' ORDER BY block_number, log_index", (network_id, number),
    )
    return [_transfer(row) for row in rows]


def reverse(conn, t: Transfer, table=PAYING) -> bool:
    """confirmed -> reversed: its block (the one the caller found replaced) left the chain; only
    while still confirmed in that block, so a transfer is reversed once however many watchers
    saw it go."""
    if conn.execute(
        f"UPDATE {_table(table)} SET status = 'reversed'"
        " WHERE chain_id = ? AND tx_hash = ? AND log_index = ? AND status = 'confirmed'"
        " AND block_hash = ?",
        (t.chain_id, t.tx_hash, t.log_index, t.block_hash),
    ).rowcount != 1:
        return False
    if table == PAYING:
        rollups.on_paid(conn, t, -1)
    return True


def seen_up_to(conn, network_id, max_block, table=PAYING) -> list[Transfer]:
    """Unconfirmed transfers at or below max_block (deep enough to confirm), oldest first."""
    rows = conn.execute(
        f"SELECT {_TRANSFER} FROM {_table(table)} WHERE network_id = ? AND status = 'seen'"
        " AND block_number <= ? ORDER BY block_number, log_index",
        (network_id, max_block),
    )
    return [_transfer(row) for row in rows]


def confirm(conn, t: Transfer, now, table=PAYING) -> bool:
    """seen -> confirmed, only while still seen in the block the caller checked."""
    if conn.execute(
        f"UPDATE {_table(table)} SET status = 'confirmed', confirmed_at = ?"
        " WHERE chain_id = ? AND tx_hash = ? AND log_index = ? AND status = 'seen'"
        " AND block_hash = ?",
        (now, t.chain_id, t.tx_hash, t.log_index, t.block_hash),
    ).rowcount != 1:
        return False
    if table == PAYING:
        rollups.on_paid(conn, replace(t, status="confirmed", confirmed_at=now))
    return True


# --- Block hashes --------------------------------------------------------------------------------

def save_block(conn, network_id, number, block_hash, parent_hash, timestamp):
    conn.execute(
        "INSERT INTO chain_blocks (network_id, number, hash, parent_hash, timestamp)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (network_id, number) DO UPDATE SET"
        " hash = excluded.hash, parent_hash = excluded.parent_hash, timestamp = excluded.timestamp",
        (network_id, number, block_hash, parent_hash, timestamp),
    )


def blocks_from_top(conn, network_id, at_most) -> list[ChainBlock]:
    """Kept blocks at or below `at_most`, highest first."""
    rows = conn.execute(
        "SELECT network_id, number, hash, parent_hash, timestamp FROM chain_blocks"
        " WHERE network_id = ? AND number <= ? ORDER BY number DESC",
        (network_id, at_most),
    )
    return [ChainBlock(**{name: row[name] for name in row.keys()}) for row in rows]


def newest_block(conn, network_id, at_most) -> ChainBlock | None:
    """The highest kept block at or below `at_most`."""
    row = conn.execute(
        "SELECT network_id, number, hash, parent_hash, timestamp FROM chain_blocks"
        " WHERE network_id = ? AND number <= ? ORDER BY number DESC LIMIT 1",
        (network_id, at_most),
    ).fetchone()
    return ChainBlock(**{name: row[name] for name in row.keys()}) if row else None


def forget_blocks_above(conn, network_id, number):
    conn.execute("DELETE FROM chain_blocks WHERE network_id = ? AND number > ?",
                 (network_id, number))


def prune_blocks(conn, network_id, below, keep_latest):
    """Forget hashes below the unconfirmed window, but keep the highest `keep_latest` rows."""
    conn.execute(
        "DELETE FROM chain_blocks WHERE network_id = ? AND number < ? AND number NOT IN"
        " (SELECT number FROM chain_blocks WHERE network_id = ? ORDER BY number DESC LIMIT ?)",
        (network_id, below, network_id, keep_latest),
    )

