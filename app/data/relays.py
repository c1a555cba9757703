"""SQL for the relayer's authorizations (app/chain/relayer.py): one row per ERC-3009 authorization
it submitted or began to, what counts against RELAYER_MAX_PER_HOUR (and per payer), the one in
flight per process, what is in flight from a payer (its balance is reserved for it), and the
relayer's turn (at most one row `sending`: its nonce is the node's pending count, read in turn);
what the relays came to (paid, reverted: the payer charged, RELAYER_MAX_REVERTS_PER_HOUR); and the
refused authorizations per client address (`429 rate_limited`)."""
from dataclasses import dataclass

from app.data.schema import dialect


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
    paid_at: int | None = None  # when the relayer learned it paid
    reverted_at: int | None = None  # when it learned its transaction reverted, the payer's doing


_COLUMNS = ("id, process_id, network_id, token_contract, from_address, value, valid_before, nonce,"
            " state, tx_hash, relayer_nonce, created_at, final_at, raw_tx, paid_at, reverted_at")


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
    """Transactions the relayer sent (or is sending) since `since` that paid or may still pay (in
    flight): what the hourly cap counts, and with `from_address` its per-payer limit. A relay over
    without paying (reverted: RELAYER_MAX_REVERTS_PER_HOUR counts it; lost or expired) is not."""
    sql = ("SELECT count(*) FROM relayed_authorizations WHERE state IN ('sending', 'sent')"
           " AND created_at > ? AND (final_at IS NULL OR paid_at IS NOT NULL)")
    if from_address is None:
        return conn.execute(sql, (since,)).fetchone()[0]
    return conn.execute(sql + " AND from_address = ?", (since, from_address)).fetchone()[0]


def reverted_since(conn, since) -> int:
    """Relays learned to have reverted since `since`, every payer's."""
    return conn.execute("SELECT count(*) FROM relayed_authorizations WHERE reverted_at > ?",
                        (since,)).fetchone()[0]


def last_revert_of(conn, from_address, since) -> int | None:
    """When a relay of this payer was last learned to have reverted, if since `since`."""
    return conn.execute("SELECT max(reverted_at) FROM relayed_authorizations"
                        " WHERE from_address = ? AND reverted_at > ?",
                        (from_address, since)).fetchone()[0]


def has_paid(conn, from_address) -> bool:
    """Whether a relay of this payer paid: it is not new to the relayer."""
    return conn.execute("SELECT 1 FROM relayed_authorizations WHERE from_address = ?"
                        " AND paid_at IS NOT NULL LIMIT 1", (from_address,)).fetchone() is not None


def unsettled(conn, network_id, since, limit) -> list[Relay]:
    """The network's relays sent since `since` whose outcome is not known yet (not final, not
    known to have paid), oldest first, at most `limit`."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM relayed_authorizations WHERE network_id = ?"
                        " AND final_at IS NULL AND paid_at IS NULL AND state = 'sent'"
                        " AND tx_hash IS NOT NULL AND created_at > ? ORDER BY id LIMIT ?",
                        (network_id, since, limit)).fetchall()
    return [_relay(r) for r in rows]


def paid(conn, relay_id, now):
    conn.execute("UPDATE relayed_authorizations SET paid_at = ? WHERE id = ? AND paid_at IS NULL",
                 (now, relay_id))


def reverted(conn, relay_id, now):
    """Its transaction reverted, its authorization unused: final, charged to its payer."""
    conn.execute("UPDATE relayed_authorizations SET reverted_at = ?,"
                 " final_at = coalesce(final_at, ?)"
                 " WHERE id = ? AND reverted_at IS NULL AND paid_at IS NULL", (now, now, relay_id))


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
        (process_id, network_id, token_contract, from_address, str(value), valid_before, nonce,
         now),
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


# --- Refused authorizations, per client address ------------------------------------------------
# A row per authorization request from a client, written before it is checked (so requests at
# once are counted one after the other) and kept when it is refused (400 or 409); deleted when it
# was not (202, 404, 503…).

# What one request prunes at most, of each kind: expired rows go in small steps.
PRUNE_BATCH = 100


def hold_client(conn, client):
    """Until the transaction ends, hold `client`: its concurrent requests count one after the
    other. SQLite's single writer (BEGIN IMMEDIATE) already serialises them; PostgreSQL takes a
    transaction-scoped advisory lock."""
    if dialect(conn) == "postgresql":
        conn.execute("SELECT pg_advisory_xact_lock("
                     "hashtextextended('relay-refusals/' || CAST(? AS text), 0))", (client,))


def refusals_since(conn, client, process_id, since) -> tuple[int, int | None, int, int | None]:
    """(the client's refusals since `since`, the time of its first; those for `process_id`, the
    time of their first); requests still being checked count."""
    row = conn.execute(
        "SELECT count(*), min(refused_at),"
        " coalesce(sum(CASE WHEN process_id = ? THEN 1 ELSE 0 END), 0),"
        " min(CASE WHEN process_id = ? THEN refused_at END)"
        " FROM relay_refusals WHERE client = ? AND refused_at > ?",
        (process_id, process_id, client, since)).fetchone()
    return row[0], row[1], row[2], row[3]


def insert_refusal(conn, client, process_id, now) -> int:
    return conn.execute("INSERT INTO relay_refusals (client, process_id, refused_at)"
                        " VALUES (?, ?, ?) RETURNING id", (client, process_id, now)).fetchone()[0]


def delete_refusal(conn, refusal_id):
    conn.execute("DELETE FROM relay_refusals WHERE id = ?", (refusal_id,))


def prune_refusals(conn, since, max_rows):
    """Keep what is stored bounded: rows older than `since`, and rows beyond the newest
    `max_rows` (then a client with many addresses mostly evicts its own). On PostgreSQL rows
    another request holds are skipped."""
    skip = " FOR UPDATE SKIP LOCKED" if dialect(conn) == "postgresql" else ""
    conn.execute("DELETE FROM relay_refusals WHERE id IN (SELECT id FROM relay_refusals"
                 f" WHERE refused_at <= ? ORDER BY refused_at LIMIT {PRUNE_BATCH}{skip})", (since,))
    conn.execute("DELETE FROM relay_refusals WHERE id IN (SELECT id FROM relay_refusals"
                 f" WHERE id <= (SELECT max(id) FROM relay_refusals) - ? ORDER BY id"
                 f" LIMIT {PRUNE_BATCH}{skip})", (max_rows,))
