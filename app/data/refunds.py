"""SQL for refunds: their rows, the amount a process still has to refund, and what the chain
watcher settles (app/chain/refunds.py). Amounts are base units, decimal-integer TEXT in the
database and `int` in the models. Every change is a guarded UPDATE from the state it leaves: of a
cancel and a settlement racing, exactly one touches the row."""
from dataclasses import dataclass

from app.core import records
from app.data import rollups
from app.data.schema import dialect


@dataclass(frozen=True, repr=False)
class Refund(records.Refund):
    """app/core/records.Refund with version 19's columns: who paid it and who named its transaction,
    and the last name the watcher cleared with why (docs/payments.md, "Refunds")."""
    sender: str | None = None  # the settling transfer's from address (EIP-55), once completed
    named_by: str | None = None  # the console user's e-mail, or "secret key"; None: nothing named
    cleared_tx_hash: str | None = None  # the last name the watcher cleared
    cleared_reason: str | None = None  # why, a sentence for the merchant


_COLUMNS = (
    "id, process_id, merchant_id, status, asset_id, network_id, chain_id, token_contract, decimals,"
    " amount, address, reason, created_at, updated_at, scanned_block, tx_hash, log_index,"
    " block_number, block_timestamp, transfer_amount, named_tx_hash, block_hash, anchor_block,"
    " anchor_hash, sender, named_by, cleared_tx_hash, cleared_reason"
)


def _refund(row) -> Refund:
    values = {name: row[name] for name in row.keys() if name != "seq"}
    values["amount"] = int(values["amount"])
    if values["transfer_amount"] is not None:
        values["transfer_amount"] = int(values["transfer_amount"])
    return Refund(**values)


def insert(conn, r: Refund):
    conn.execute(
        f"INSERT INTO refunds ({_COLUMNS}) VALUES"
        f" ({', '.join('?' * 28)})",
        (r.id, r.process_id, r.merchant_id, r.status, r.asset_id, r.network_id, r.chain_id,
         r.token_contract, r.decimals, str(r.amount), r.address, r.reason, r.created_at,
         r.updated_at, r.scanned_block, r.tx_hash, r.log_index, r.block_number, r.block_timestamp,
         None if r.transfer_amount is None else str(r.transfer_amount), r.named_tx_hash,
         r.block_hash, r.anchor_block, r.anchor_hash, *_extra(r)),
    )


def _extra(r) -> tuple:
    """Version 19's columns of `r` (a core record has none of them set)."""
    return tuple(getattr(r, name, None)
                 for name in ("sender", "named_by", "cleared_tx_hash", "cleared_reason"))


def get(conn, process_id, refund_id) -> Refund | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM refunds WHERE id = ? AND process_id = ?",
                       (refund_id, process_id)).fetchone()
    return _refund(row) if row else None


def of_processes(conn, process_ids) -> dict[str, list[Refund]]:
    """The refunds of these processes, by process id, each list oldest first (one query)."""
    ids = list(process_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM refunds WHERE process_id IN ({marks}) ORDER BY seq", ids
    ).fetchall()
    found: dict[str, list[Refund]] = {}
    for row in rows:
        found.setdefault(row["process_id"], []).append(_refund(row))
    return found


def of_process(conn, process_id) -> list[Refund]:
    return of_processes(conn, (process_id,)).get(process_id, [])


def lock_name(conn, merchant_id, chain_id, tx_hash):
    """Hold the name `tx_hash` among the merchant's refunds until the transaction ends, so two of
    its refunds named at once with one hash see each other (PostgreSQL; SQLite's single writer
    serialises). Per merchant: another merchant naming the same hash never waits on this one."""
    if dialect(conn) == "postgresql":
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(CAST(? AS text) || '/'"
                     " || CAST(? AS text) || '/refund-tx/' || CAST(? AS text), 0))",
                     (merchant_id, chain_id, tx_hash))


def hash_taken(conn, merchant_id, chain_id, tx_hash, refund_id) -> bool:
    """Whether another refund of the same merchant, not cancelled, names this transaction or was
    settled by it. Another merchant's refunds are never looked at: its names are not this one's to
    learn, nor to be held back by (the watcher settles only a merchant's own payment)."""
    return conn.execute(
        "SELECT 1 FROM refunds WHERE merchant_id = ? AND chain_id = ? AND id != ?"
        " AND status != 'cancelled' AND (named_tx_hash = ? OR tx_hash = ?) LIMIT 1",
        (merchant_id, chain_id, refund_id, tx_hash, tx_hash),
    ).fetchone() is not None


def name(conn, refund_id, tx_hash, named_by, now) -> bool:
    """The merchant names the transaction that paid a pending refund (replacing an earlier name);
    `named_by`: the console user's e-mail, or "secret key"."""
    return conn.execute(
        "UPDATE refunds SET named_tx_hash = ?, named_by = ?, updated_at = ?"
        " WHERE id = ? AND status = 'pending'",
        (tx_hash, named_by, now, refund_id),
    ).rowcount == 1


def cancel(conn, refund_id, now) -> bool:
    return conn.execute(
        "UPDATE refunds SET status = 'cancelled', updated_at = ? WHERE id = ?"
        " AND status = 'pending'",
        (now, refund_id),
    ).rowcount == 1


# --- The chain watcher's part --------------------------------------------------------------------

def pending_on(conn, network_id) -> list[Refund]:
    """The pending refunds on a network, oldest first (the first made is the first settled)."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM refunds WHERE network_id = ? AND status = 'pending' ORDER BY seq",
        (network_id,),
    ).fetchall()
    return [_refund(row) for row in rows]


def payout_senders(conn, network_id) -> dict[str, set[str]]:
    """{refund id: the lowercase addresses whose transfers settle it automatically} for the pending
    refunds on a network without a named transaction: its merchant's payout address, and the one
    its payment's deposit address forwards to (payout mode; the merchant may have changed it since).
    A refund of a merchant with neither is settled only by a named transaction."""
    rows = conn.execute(
        "SELECT r.id, mp.payout_address AS current, p.payout_address AS forwarded FROM refunds r"
        " LEFT JOIN merchant_payouts mp ON mp.merchant_id = r.merchant_id"
        " LEFT JOIN payments p ON p.process_id = r.process_id"
        " WHERE r.network_id = ? AND r.status = 'pending' AND r.named_tx_hash IS NULL",
        (network_id,),
    )
    return {row["id"]: {a.lower() for a in (row["current"], row["forwarded"]) if a}
            for row in rows}


def clear_name(conn, refund_id, tx_hash, reason, now) -> bool:
    """A named transaction that holds no transfer paying the refund: the refund stays pending,
    without it, which is kept with `reason` (a sentence) as the last cleared name (only while it
    still names that transaction)."""
    return conn.execute(
        "UPDATE refunds SET cleared_tx_hash = named_tx_hash, cleared_reason = ?,"
        " named_tx_hash = NULL, named_by = NULL, updated_at = ?"
        " WHERE id = ? AND status = 'pending' AND named_tx_hash = ?",
        (reason, now, refund_id, tx_hash),
    ).rowcount == 1


def completed_anchored(conn, network_id, lowest) -> list[Refund]:
    """Completed refunds on the network whose proof's anchor is at or above `lowest` (the lowest
    kept block: below it nothing is known any more): those a reorganisation may still undo."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM refunds WHERE network_id = ? AND status = 'completed'"
        " AND anchor_block >= ? ORDER BY seq",
        (network_id, lowest),
    ).fetchall()
    return [_refund(row) for row in rows]


def reanchor(conn, refund_id, anchor_block, anchor_hash):
    conn.execute("UPDATE refunds SET anchor_block = ?, anchor_hash = ? WHERE id = ?"
                 " AND status = 'completed'", (anchor_block, anchor_hash, refund_id))


def reverse(conn, r: Refund, now) -> bool:
    """completed -> pending: its transfer's block left the chain. The transfer is forgotten (it may
    come back in another block, and settle it again); a named transaction stays named; the search
    resumes below the transfer's block; its sender is forgotten with it. Only while still completed
    by that block."""
    if conn.execute(
        "UPDATE refunds SET status = 'pending', updated_at = ?, tx_hash = NULL, log_index = NULL,"
        " block_number = NULL, block_timestamp = NULL, transfer_amount = NULL, block_hash = NULL,"
        " anchor_block = NULL, anchor_hash = NULL, sender = NULL, scanned_block = ?"
        " WHERE id = ? AND status = 'completed' AND block_hash = ?",
        (now, min(r.scanned_block, r.block_number - 1), r.id, r.block_hash),
    ).rowcount != 1:
        return False
    rollups.on_refund(conn, r, -1)  # off the day it had completed (its updated_at then)
    return True


def transfer_used(conn, chain_id, tx_hash, log_index) -> bool:
    """Whether this transfer already settled a refund (one transfer settles one refund)."""
    return conn.execute(
        "SELECT 1 FROM refunds WHERE chain_id = ? AND tx_hash = ? AND log_index = ?",
        (chain_id, tx_hash, log_index),
    ).fetchone() is not None


def complete(conn, refund_id, entry, sender, header, anchor, now) -> bool:
    """pending -> completed by this transfer (an rpc.Log) from `sender` (its from address, EIP-55)
    in the block of `header`, proven by the kept block `anchor`; only while still pending (not
    cancelled meanwhile)."""
    if conn.execute(
        "UPDATE refunds SET status = 'completed', updated_at = ?, tx_hash = ?, log_index = ?,"
        " block_number = ?, block_timestamp = ?, transfer_amount = ?, block_hash = ?,"
        " anchor_block = ?, anchor_hash = ?, sender = ? WHERE id = ? AND status = 'pending'",
        (now, entry.tx_hash, entry.log_index, entry.block_number, header.timestamp,
         str(entry.amount), header.hash, anchor.number, anchor.hash, sender, refund_id),
    ).rowcount != 1:
        return False
    rollups.on_refund(conn, _refund(conn.execute(f"SELECT {_COLUMNS} FROM refunds WHERE id = ?",
                                                 (refund_id,)).fetchone()))
    return True


def advance(conn, network_id, scanned_block):
    """Every pending refund on the network without a named transaction has been searched for up to
    `scanned_block` (a named one keeps its position: if its name is cleared, its search resumes
    where it stopped)."""
    conn.execute(
        "UPDATE refunds SET scanned_block = ? WHERE network_id = ? AND status = 'pending'"
        " AND named_tx_hash IS NULL AND scanned_block < ?",
        (scanned_block, network_id, scanned_block),
    )


def payers_of(conn, process_id) -> set[str]:
    """The addresses (lowercase) that sent money to the process's deposit address: a transfer from
    one of them to the customer is the customer's, never the merchant's refund."""
    rows = conn.execute("SELECT from_address FROM transfers WHERE process_id = ? UNION"
                        " SELECT from_address FROM unexpected_transfers WHERE process_id = ?",
                        (process_id, process_id))
    return {row[0].lower() for row in rows}

