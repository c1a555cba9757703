"""SQL of unexpected transfers: ERC-20 Transfers to a watched deposit address that are not its
process's choice (the watcher records them with app/data/transfers.py's functions, table
UNEXPECTED; this module holds what is theirs alone): what the token contract says of itself, the one
`payment.unexpected` of each, what the payment object lists, and staff's acceptance as payment."""
from app.core.records import Transfer, UnexpectedTransfer
from app.data.transfers import UNEXPECTED

_COLUMNS = (
    "chain_id, tx_hash, log_index, network_id, process_id, token_contract, from_address, amount,"
    " block_number, block_hash, block_timestamp, status, seen_at, confirmed_at, symbol, decimals,"
    " reported_at, accepted_at, accepted_by, credited_amount"
)

_PREFIXED = ", ".join("u." + name.strip() for name in _COLUMNS.split(","))


def _row(row) -> UnexpectedTransfer:
    values = {k: row[k] for k in row.keys() if k != "head_block"}
    values["amount"] = int(values["amount"])
    if values["credited_amount"] is not None:
        values["credited_amount"] = int(values["credited_amount"])
    return UnexpectedTransfer(**values)


def describe(conn, t: Transfer, symbol, decimals):
    """What the token's contract answered (app/evm/tokens.py), kept with the transfer."""
    conn.execute(
        f"UPDATE {UNEXPECTED} SET symbol = ?, decimals = ?"
        " WHERE chain_id = ? AND tx_hash = ? AND log_index = ?",
        (symbol, decimals, t.chain_id, t.tx_hash, t.log_index))


def report(conn, t: Transfer, now) -> bool:
    """Whether `payment.unexpected` is to be written for the transfer now: the first time it
    confirms only (a transfer revived after a reorganisation and confirmed again is reported
    once)."""
    return conn.execute(
        f"UPDATE {UNEXPECTED} SET reported_at = ?"
        " WHERE chain_id = ? AND tx_hash = ? AND log_index = ? AND reported_at IS NULL",
        (now, t.chain_id, t.tx_hash, t.log_index)).rowcount == 1


def of_processes(conn, process_ids) -> dict[str, list[UnexpectedTransfer]]:
    """The confirmed unexpected transfers of these processes, by process id, each list by block
    then log index; one query."""
    ids = list(process_ids)
    if not ids:
        return {}
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM {UNEXPECTED} WHERE process_id IN ({','.join('?' * len(ids))})"
        " AND status = 'confirmed' ORDER BY block_number, log_index", ids)
    found: dict[str, list[UnexpectedTransfer]] = {}
    for row in rows:
        found.setdefault(row["process_id"], []).append(_row(row))
    return found


def accepted_of(conn, process_ids) -> dict[str, list[Transfer]]:
    """The unexpected transfers of these processes accepted as payment and still confirmed, as the
    transfers they count as: their credited amount, in the payment's base units."""
    ids = list(process_ids)
    if not ids:
        return {}
    rows = conn.execute(
        f"SELECT {_PREFIXED}, n.head_block FROM {UNEXPECTED} u"
        " JOIN networks n ON n.id = u.network_id"
        f" WHERE u.process_id IN ({','.join('?' * len(ids))}) AND u.status = 'confirmed'"
        " AND u.accepted_at IS NOT NULL", ids)
    found: dict[str, list[Transfer]] = {}
    for row in rows:
        t = _row(row)
        found.setdefault(t.process_id, []).append(Transfer(
            chain_id=t.chain_id, tx_hash=t.tx_hash, log_index=t.log_index, network_id=t.network_id,
            process_id=t.process_id, token_contract=t.token_contract, from_address=t.from_address,
            amount=t.credited_amount, block_number=t.block_number, block_hash=t.block_hash,
            block_timestamp=t.block_timestamp, status="confirmed", seen_at=t.seen_at,
            confirmed_at=t.accepted_at, head_block=row["head_block"], accepted=True))
    return found


def get(conn, process_id, tx_hash, log_index) -> UnexpectedTransfer | None:
    """The process's unexpected transfer of that transaction and log (any state)."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM {UNEXPECTED} WHERE process_id = ? AND tx_hash = ?"
        " AND log_index = ? ORDER BY confirmed_at IS NULL, chain_id LIMIT 1",
        (process_id, tx_hash, log_index)
    ).fetchone()
    return _row(row) if row else None


def accept(conn, t: UnexpectedTransfer, who, credited, now) -> bool:
    """Accepted as payment, counting `credited` base units of the payment's token: once, and only
    while confirmed."""
    return conn.execute(
        f"UPDATE {UNEXPECTED} SET accepted_at = ?, accepted_by = ?, credited_amount = ?"
        " WHERE chain_id = ? AND tx_hash = ? AND log_index = ? AND status = 'confirmed'"
        " AND accepted_at IS NULL",
        (now, who, str(credited), t.chain_id, t.tx_hash, t.log_index)).rowcount == 1


# The console's filter "has unexpected transfers" (app/data/processes.py list_page).
HAS_UNEXPECTED = (f"EXISTS (SELECT 1 FROM {UNEXPECTED} u WHERE u.process_id = processes.id"
                  " AND u.status = 'confirmed')")
