"""SQL for the relayer's authorizations (app/chain/relayer.py): one row per ERC-3009 authorization it
submitted or began to, what counts against RELAYER_MAX_PER_HOUR (and per payer), the one in flight
per process, what is in flight from a payer (its balance is reserved for it), and the relayer's
turn (at most one row `sending`: its nonce is the node's pending count, read in turn)."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Relay:
    id: int
    process_id: str
    network_id: str
    token_contract: str
    from_address: str
    value: int
    valid_before: int
    nonce: str
    state: str  # sending | sent | dropped
    tx_hash: str | None
    relayer_nonce: int | None
    created_at: int
    final_at: int | None
    raw_tx: str | None  # the signed transaction, to broadcast again one a node lost


_COLUMNS = ("id, process_id, network_id, token_contract, from_address, value, valid_before, nonce,"
            " state, tx_hash, relayer_nonce, created_at, final_at, raw_tx")


def _relay(row) -> Relay:
    values = {k: row[k] for k in row.keys()}
    values["value"] = int(values["value"])
    return Relay(**values)


def open_for(conn, process_id) -> Relay | None:
    """The process's authorization in flight (not final), if any."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM relayed_authorizations"
                       " WHERE process_id = ? AND final_at IS NULL", (process_id,)).fetchone()
    return _relay(row) if row else None


def open_from(conn, token_contract, from_address) -> list[Relay]:
    """The payer's authorizations of this token in flight (not final), on any process."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM relayed_authorizations WHERE from_address = ?"
                        " AND lower(token_contract) = lower(?) AND final_at IS NULL ORDER BY id",
                        (from_address, token_contract)).fetchall()
    return [_relay(r) for r in rows]


def sent_since(conn, since, from_address=None) -> int:
    """Transactions the relayer sent (or is sending) since `since`: what the hourly cap counts (all
    of them, reverted ones too: each cost gas), and with `from_address` its per-payer limit."""
    sql = ("SELECT count(*) FROM relayed_authorizations"
           " WHERE state IN ('sending', 'sent') AND created_at > ?")
    if from_address is None:
        return conn.execute(sql, (since,)).fetchone()[0]
    return conn.execute(sql + " AND from_address = ?", (since, from_address)).fetchone()[0]


def payment_recorded(conn, relay: Relay) -> bool:
    """Whether the chain watcher recorded the transfer of a relay whose authorization is used: its
    transaction's, or (another submitted the authorization first) one of its value from its payer
    to the process, seen since the relay was sent."""
    return conn.execute(
        "SELECT 1 FROM transfers WHERE process_id = ? AND status IN ('seen', 'confirmed')"
        " AND (tx_hash = ? OR (lower(from_address) = ? AND amount = ? AND seen_at >= ?))",
        (relay.process_id, relay.tx_hash, relay.from_address.lower(), str(relay.value),
         relay.created_at)).fetchone() is not None


def release_stale(conn, before, now):
    """A turn left by a worker that died mid-way (started before `before`): `sent` when it had
    signed (it may have gone out: the in-flight check asks the chain), else `dropped`."""
    conn.execute(
        "UPDATE relayed_authorizations SET state = CASE WHEN tx_hash IS NULL THEN 'dropped'"
        " ELSE 'sent' END, final_at = CASE WHEN tx_hash IS NULL THEN ? ELSE final_at END"
        " WHERE state = 'sending' AND created_at < ?", (now, before))


def begin(conn, *, process_id, network_id, token_contract, from_address, value, valid_before,
          nonce, now) -> int | None:
    """A new row `sending` (the relayer's turn), or None when the process has one in flight or
    another relay holds the turn (the caller tells which with open_for)."""
    row = conn.execute(
        "INSERT INTO relayed_authorizations (process_id, network_id, token_contract, from_address,"
        " value, valid_before, nonce, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'sending', ?)"
        " ON CONFLICT DO NOTHING RETURNING id",
        (process_id, network_id, token_contract, from_address, str(value), valid_before, nonce, now),
    ).fetchone()
    return row[0] if row else None


def signed(conn, relay_id, tx_hash, relayer_nonce, raw_tx):
    conn.execute("UPDATE relayed_authorizations SET tx_hash = ?, relayer_nonce = ?, raw_tx = ?"
                 " WHERE id = ?", (tx_hash, relayer_nonce, raw_tx, relay_id))


def sent(conn, relay_id):
    conn.execute("UPDATE relayed_authorizations SET state = 'sent' WHERE id = ?", (relay_id,))


def dropped(conn, relay_id, now):
    conn.execute("UPDATE relayed_authorizations SET state = 'dropped', final_at = ? WHERE id = ?",
                 (now, relay_id))


def final(conn, relay_id, now):
    conn.execute("UPDATE relayed_authorizations SET final_at = ? WHERE id = ? AND final_at IS NULL",
                 (now, relay_id))
