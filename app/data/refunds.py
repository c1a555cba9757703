"""SQL for refunds: their rows, the amount a process still has to refund, and what the chain
watcher settles (app/chain/refunds.py). Amounts are base units, decimal-integer TEXT in the
database and `int` in the models. Every change is a guarded UPDATE from `pending`: of a cancel and
a settlement racing, exactly one touches the row."""
from app.records import Refund

_COLUMNS = (
    "id, process_id, merchant_id, status, asset_id, network_id, chain_id, token_contract, decimals,"
    " amount, address, reason, created_at, updated_at, scanned_block, tx_hash, log_index,"
    " block_number, block_timestamp, transfer_amount"
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
        " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (r.id, r.process_id, r.merchant_id, r.status, r.asset_id, r.network_id, r.chain_id,
         r.token_contract, r.decimals, str(r.amount), r.address, r.reason, r.created_at,
         r.updated_at, r.scanned_block, r.tx_hash, r.log_index, r.block_number, r.block_timestamp,
         None if r.transfer_amount is None else str(r.transfer_amount)),
    )


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


def cancel(conn, refund_id, now) -> bool:
    return conn.execute(
        "UPDATE refunds SET status = 'cancelled', updated_at = ? WHERE id = ? AND status = 'pending'",
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


def transfer_used(conn, chain_id, tx_hash, log_index) -> bool:
    """Whether this transfer already settled a refund (one transfer settles one refund)."""
    return conn.execute(
        "SELECT 1 FROM refunds WHERE chain_id = ? AND tx_hash = ? AND log_index = ?",
        (chain_id, tx_hash, log_index),
    ).fetchone() is not None


def complete(conn, refund_id, *, tx_hash, log_index, block_number, block_timestamp, amount,
             now) -> bool:
    """pending -> completed by this transfer, only while still pending (not cancelled meanwhile)."""
    return conn.execute(
        "UPDATE refunds SET status = 'completed', updated_at = ?, tx_hash = ?, log_index = ?,"
        " block_number = ?, block_timestamp = ?, transfer_amount = ?"
        " WHERE id = ? AND status = 'pending'",
        (now, tx_hash, log_index, block_number, block_timestamp, str(amount), refund_id),
    ).rowcount == 1


def advance(conn, network_id, scanned_block):
    """Every pending refund on the network has been searched for up to `scanned_block`."""
    conn.execute(
        "UPDATE refunds SET scanned_block = ? WHERE network_id = ? AND status = 'pending'"
        " AND scanned_block < ?",
        (scanned_block, network_id, scanned_block),
    )
