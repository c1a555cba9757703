"""SQL of `reconcile` (app/chain/reconcile.py): what the books hold about one network, read in one
read-only snapshot. Nothing here writes."""
from app.data import payouts as payout_rows
from app.data import refunds as refund_rows
from app.data.transfers import _TRANSFER, _transfer
from app.data.unexpected import _COLUMNS as _UNEXPECTED
from app.data.unexpected import _row as _unexpected


def transfers_on(conn, network_id) -> list:
    """Every paying transfer recorded on the network, whatever its state."""
    rows = conn.execute(f"SELECT {_TRANSFER} FROM transfers WHERE network_id = ?", (network_id,))
    return [_transfer(row) for row in rows]


def unexpected_on(conn, network_id) -> list:
    rows = conn.execute(f"SELECT {_UNEXPECTED} FROM unexpected_transfers WHERE network_id = ?",
                        (network_id,))
    return [_unexpected(row) for row in rows]


def deposit_addresses(conn, livemode) -> dict[str, tuple[str, str]]:
    """{address (lowercase): (process id, mode)} of every deposit address of `livemode`
    merchants' processes: those the watcher watches on a network of that mode."""
    rows = conn.execute(
        "SELECT p.address, p.process_id, p.mode FROM payments p JOIN processes pr"
        " ON pr.id = p.process_id WHERE pr.livemode = ?", (int(livemode),))
    return {row["address"].lower(): (row["process_id"], row["mode"]) for row in rows}


def first_payment_at(conn, livemode) -> int | None:
    """When the first deposit address of `livemode` processes was handed out (unix seconds)."""
    return conn.execute(
        "SELECT min(p.created_at) FROM payments p JOIN processes pr ON pr.id = p.process_id"
        " WHERE pr.livemode = ?", (int(livemode),)).fetchone()[0]


def completed_refunds_on(conn, network_id) -> list:
    rows = conn.execute(
        f"SELECT {refund_rows._COLUMNS} FROM refunds WHERE network_id = ? AND status = 'completed'"
        " ORDER BY seq", (network_id,))
    return [refund_rows._refund(row) for row in rows]


def confirmed_collections_on(conn, network_id) -> list:
    rows = conn.execute(
        f"SELECT {payout_rows._COLLECTION} FROM collections WHERE network_id = ?"
        " AND status = 'confirmed' ORDER BY id", (network_id,))
    return [payout_rows._collection(row) for row in rows]


def payout_deposits(conn) -> dict:
    """{address (EIP-55, as stored): Deposit} of every payout-mode deposit address, with the
    factory it was made with: what a collection's logs are read against."""
    rows = conn.execute("SELECT process_id, merchant_id, address, payout_address, factory"
                        " FROM payments WHERE mode = 'payout'")
    return {(row["factory"], row["address"]): payout_rows.Deposit(
        row["process_id"], row["merchant_id"], row["address"], row["payout_address"])
        for row in rows}


def completed_on(conn, network_id) -> list[tuple]:
    """(process id, completed_by, amount due (base units), tolerance, token contract, mixed,
    (amount, currency, token decimals, quote)) of the completed processes whose payment is on the
    network; `mixed`: whether some of its money is not simply its token on this network (a transfer
    on another network or of another token, an unexpected transfer accepted as payment), which only
    the payment's view counts right; the last, what its amount due was quoted from."""
    rows = conn.execute(
        "SELECT pr.id, pr.completed_by, p.amount_due, p.tolerance, p.token_contract,"
        " pr.amount, pr.currency, p.decimals, p.quote,"
        " (EXISTS (SELECT 1 FROM transfers t WHERE t.process_id = pr.id"
        "   AND (t.network_id <> p.network_id"
        " OR lower(t.token_contract) <> lower(p.token_contract)))"
        "  OR EXISTS (SELECT 1 FROM unexpected_transfers u WHERE u.process_id = pr.id"
        "   AND u.accepted_at IS NOT NULL)) AS mixed"
        " FROM processes pr JOIN payments p ON p.process_id = pr.id"
        " WHERE p.network_id = ? AND pr.status = 'completed' ORDER BY pr.seq", (network_id,))
    return [(row[0], row[1], int(row[2]), row[3], row[4], bool(row[9]), tuple(row[5:9]))
            for row in rows]
