"""SQL for live payments' setup and choices: networks, assets, merchant wallets, payments, and the
read of a process's transfers for display. (The chain watcher writes transfers:
app/data/transfers.py.)

Amounts in base units are decimal-integer TEXT in the database and `int` in the models."""

from app.core.records import Asset, Network, Payment, PaymentView, Transfer, Wallet
from app.data import unexpected as unexpected_rows

_NETWORK_COLUMNS = (
    "id, name, chain_id, rpc_url, confirmations, start_block, scanned_block, head_block,"
    " disabled_at, created_at, testnet, finality, max_block_age, polled_at, failing_since,"
    " ok_since, head_timestamp, tag_block, max_fee_per_gas"
)
_ASSET_COLUMNS = (
    "id, network_id, symbol, name, contract, decimals, disabled_at, created_at, eip3009_name,"
    " eip3009_version, peg"
)
_PAYMENT_COLUMNS = (
    "p.process_id, p.merchant_id, p.address_index, p.address, p.asset_id, p.network_id, p.chain_id,"
    " p.token_contract, p.decimals, p.amount_due, p.created_at, p.updated_at, n.head_block, p.mode,"
    " p.payout_address, p.factory, p.tolerance, n.finality, p.quote"
)
_TRANSFER_FIELDS = (
    "chain_id", "tx_hash", "log_index", "network_id", "process_id", "token_contract",
    "from_address", "amount", "block_number", "block_hash", "block_timestamp", "status", "seen_at",
    "confirmed_at",
)


def _network(row):
    values = {k: row[k] for k in row.keys()}
    values["testnet"] = bool(values["testnet"])
    return Network(**values)


def _asset(row):
    return Asset(**{k: row[k] for k in row.keys()})


def _payment(row):
    values = {k: row[k] for k in row.keys()}
    values["amount_due"] = int(values["amount_due"])
    return Payment(**values)


# Networks

def insert_network(conn, n: Network):
    conn.execute(
        f"INSERT INTO networks ({_NETWORK_COLUMNS})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (n.id, n.name, n.chain_id, n.rpc_url, n.confirmations, n.start_block, n.scanned_block,
         n.head_block, n.disabled_at, n.created_at, int(n.testnet), n.finality, n.max_block_age,
         n.polled_at, n.failing_since, n.ok_since, n.head_timestamp, n.tag_block,
         n.max_fee_per_gas),
    )


def get_network(conn, network_id) -> Network | None:
    row = conn.execute(f"SELECT {_NETWORK_COLUMNS} FROM networks WHERE id = ?",
                       (network_id,)).fetchone()
    return _network(row) if row else None


def network_with_chain_id(conn, chain_id) -> Network | None:
    row = conn.execute(
        f"SELECT {_NETWORK_COLUMNS} FROM networks WHERE chain_id = ?", (chain_id,)
    ).fetchone()
    return _network(row) if row else None


def list_networks(conn) -> list[Network]:
    rows = conn.execute(f"SELECT {_NETWORK_COLUMNS} FROM networks ORDER BY id").fetchall()
    return [_network(r) for r in rows]


def enabled_networks(conn) -> list[Network]:
    """The networks the chain watcher reads."""
    rows = conn.execute(f"SELECT {_NETWORK_COLUMNS} FROM networks WHERE disabled_at IS NULL"
                        " ORDER BY id")
    return [_network(row) for row in rows]


def disable_network(conn, network_id, now) -> bool:
    cur = conn.execute(
        "UPDATE networks SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL",
        (now, network_id),
    )
    return cur.rowcount == 1


def set_testnet(conn, network_id, testnet: bool) -> bool:
    """The operator's test flag (`networks set-mode`); False when no such network."""
    return conn.execute("UPDATE networks SET testnet = ? WHERE id = ?",
                        (int(testnet), network_id)).rowcount == 1


def set_finality(conn, network_id, finality) -> bool:
    """The recorded tag block is another tag's: forgotten (the next poll records the new one's)."""
    return conn.execute("UPDATE networks SET finality = ?, tag_block = NULL WHERE id = ?",
                        (finality, network_id)).rowcount == 1


def set_max_block_age(conn, network_id, seconds) -> bool:
    """`seconds` None: off."""
    return conn.execute("UPDATE networks SET max_block_age = ? WHERE id = ?",
                        (seconds, network_id)).rowcount == 1


def set_max_fee_per_gas(conn, network_id, wei) -> bool:
    """`wei` None: no ceiling."""
    return conn.execute("UPDATE networks SET max_fee_per_gas = ? WHERE id = ?",
                        (wei, network_id)).rowcount == 1


def poll_succeeded(conn, network_id, now, head_timestamp, tag_block, ok_since):
    """A successful poll's mark (app/domain/health.py): `ok_since` when it was unavailable before;
    `tag_block` (None: unchanged) only when above the one recorded: it never goes back but by
    tag_replaced."""
    conn.execute(
        "UPDATE networks SET polled_at = ?, failing_since = NULL, head_timestamp = ?,"
        " ok_since = COALESCE(?, ok_since) WHERE id = ?",
        (now, head_timestamp, ok_since, network_id))
    if tag_block is not None:
        conn.execute("UPDATE networks SET tag_block = ? WHERE id = ?"
                     " AND (tag_block IS NULL OR tag_block < ?)",
                     (tag_block, network_id, tag_block))


def tag_replaced(conn, network_id, fork):
    """A reorganisation replaced blocks above `fork`, at or below the recorded tag block: the
    chain's own word takes the record back to the fork."""
    conn.execute("UPDATE networks SET tag_block = ? WHERE id = ? AND tag_block > ?",
                 (fork, network_id, fork))


def poll_failed(conn, network_id, now):
    """A failed poll's mark: the first failure since the last success is kept."""
    conn.execute("UPDATE networks SET failing_since = COALESCE(failing_since, ?) WHERE id = ?",
                 (now, network_id))


def pending_chosen_on(conn, network_id, livemode) -> int:
    """Pending processes of `livemode` merchants whose payment was chosen on the network (now or
    as an earlier choice): the watcher credits them there only while its mode is theirs."""
    return conn.execute(
        "SELECT count(*) FROM processes pr JOIN payments p ON p.process_id = pr.id"
        " WHERE pr.status = 'pending' AND pr.livemode = ? AND (p.network_id = ? OR EXISTS"
        "  (SELECT 1 FROM payment_choices c WHERE c.process_id = p.process_id"
        "   AND c.network_id = ?))",
        (int(livemode), network_id, network_id)).fetchone()[0]


# Assets

def insert_asset(conn, a: Asset):
    conn.execute(
        f"INSERT INTO assets ({_ASSET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (a.id, a.network_id, a.symbol, a.name, a.contract, a.decimals, a.disabled_at, a.created_at,
         a.eip3009_name, a.eip3009_version, a.peg),
    )


def set_peg(conn, asset_id, peg, network_id=None) -> int:
    """The asset's peg, on one network or on every one it is on: the rows changed."""
    if network_id is None:
        return conn.execute("UPDATE assets SET peg = ? WHERE id = ?", (peg, asset_id)).rowcount
    return conn.execute("UPDATE assets SET peg = ? WHERE id = ? AND network_id = ?",
                        (peg, asset_id, network_id)).rowcount


def get_asset(conn, asset_id, network_id) -> Asset | None:
    row = conn.execute(
        f"SELECT {_ASSET_COLUMNS} FROM assets WHERE id = ? AND network_id = ?",
        (asset_id, network_id),
    ).fetchone()
    return _asset(row) if row else None


def asset_with_contract(conn, network_id, contract) -> Asset | None:
    row = conn.execute(
        f"SELECT {_ASSET_COLUMNS} FROM assets WHERE network_id = ? AND lower(contract) = lower(?)",
        (network_id, contract),
    ).fetchone()
    return _asset(row) if row else None


def list_assets(conn) -> list[Asset]:
    rows = conn.execute(f"SELECT {_ASSET_COLUMNS} FROM assets ORDER BY id, network_id").fetchall()
    return [_asset(r) for r in rows]


def payable_assets(conn) -> list[tuple[Asset, str, int, int, bool]]:
    """Enabled assets on enabled networks, by asset id then network id: (asset, the network's
    name, its chain id, its confirmations, its --testnet flag)."""
    rows = conn.execute(
        "SELECT a.id AS a_id, a.network_id, a.symbol, a.name AS a_name, a.contract, a.decimals,"
        " a.created_at AS a_created_at, a.eip3009_name, a.eip3009_version, a.peg, n.name AS n_name,"
        " n.chain_id, n.confirmations, n.testnet"
        " FROM assets a JOIN networks n ON n.id = a.network_id"
        " WHERE a.disabled_at IS NULL AND n.disabled_at IS NULL ORDER BY a.id, a.network_id"
    ).fetchall()
    return [
        (
            Asset(id=r["a_id"], network_id=r["network_id"], symbol=r["symbol"], name=r["a_name"],
                  contract=r["contract"], decimals=r["decimals"], disabled_at=None,
                  created_at=r["a_created_at"], eip3009_name=r["eip3009_name"],
                  eip3009_version=r["eip3009_version"], peg=r["peg"]),
            r["n_name"],
            r["chain_id"],
            r["confirmations"],
            bool(r["testnet"]),
        )
        for r in rows
    ]


# Merchant wallets

def get_wallet(conn, merchant_id) -> Wallet | None:
    row = conn.execute(
        "SELECT merchant_id, xpub, next_index, updated_at FROM merchant_wallets"
        " WHERE merchant_id = ?",
        (merchant_id,),
    ).fetchone()
    return Wallet(**{k: row[k] for k in row.keys()}) if row else None


def wallet_holding(conn, xpub) -> str | None:
    """The merchant whose wallet is this xpub, if any."""
    row = conn.execute("SELECT merchant_id FROM merchant_wallets WHERE xpub = ?",
                       (xpub,)).fetchone()
    return row["merchant_id"] if row else None


def set_wallet(conn, merchant_id, xpub, now):
    """Register or replace the xpub; next_index is kept (an index is never given out twice)."""
    conn.execute(
        "INSERT INTO merchant_wallets (merchant_id, xpub, next_index, updated_at)"
        " VALUES (?, ?, 0, ?)"
        " ON CONFLICT (merchant_id) DO UPDATE SET xpub = excluded.xpub,"
        " updated_at = excluded.updated_at",
        (merchant_id, xpub, now),
    )


def take_index(conn, merchant_id, index) -> bool:
    """Move next_index past `index`, only while it is still `index` (guarded: of two writers that
    read the same value, one moves it)."""
    cur = conn.execute(
        "UPDATE merchant_wallets SET next_index = next_index + 1"
        " WHERE merchant_id = ? AND next_index = ?",
        (merchant_id, index),
    )
    return cur.rowcount == 1


# Payments

def get_payment(conn, process_id) -> Payment | None:
    row = conn.execute(
        f"SELECT {_PAYMENT_COLUMNS} FROM payments p JOIN networks n ON n.id = p.network_id"
        " WHERE p.process_id = ?",
        (process_id,),
    ).fetchone()
    return _payment(row) if row else None


def payments_of(conn, process_ids) -> dict[str, Payment]:
    """The payments of these processes, by process id (one query)."""
    ids = list(process_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT {_PAYMENT_COLUMNS} FROM payments p JOIN networks n ON n.id = p.network_id"
        f" WHERE p.process_id IN ({marks})",
        ids,
    ).fetchall()
    return {r["process_id"]: _payment(r) for r in rows}


def address_taken(conn, address) -> bool:
    return conn.execute(
        "SELECT 1 FROM payments WHERE address = ?", (address,)
    ).fetchone() is not None


def insert_payment(conn, p: Payment):
    """The payment (its address is then watched for its choice: watch_list's trigger)."""
    conn.execute(
        "INSERT INTO payments (process_id, merchant_id, address_index, address, asset_id,"
        " network_id, chain_id, token_contract, decimals, amount_due, created_at, updated_at, mode,"
        " payout_address, factory, tolerance, quote)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (p.process_id, p.merchant_id, p.address_index, p.address, p.asset_id, p.network_id,
         p.chain_id, p.token_contract, p.decimals, str(p.amount_due), p.created_at, p.updated_at,
         p.mode, p.payout_address, p.factory, p.tolerance, p.quote),
    )


def change_choice(conn, p: Payment) -> bool:
    """A new asset/network for a payment (same address), only while no transfer to it is recorded
    other than orphaned or reversed ones (no longer on the chain) or of value 0 (no payment; an
    earlier release recorded them): the check and the change are one statement. The choice it
    replaces is kept in payment_choices (still watched) with what it was due, and the new one is
    watched too (watch_list's trigger); the caller rolls back when this returns False. An
    unexpected transfer accepted as payment locks it too (its credited amount is in this
    token)."""
    conn.execute(
        "INSERT INTO payment_choices (process_id, network_id, token_contract, decimals, created_at,"
        " amount_due) SELECT process_id, network_id, token_contract, decimals, ?, amount_due"
        " FROM payments WHERE process_id = ? ON CONFLICT (process_id, network_id, token_contract)"
        " DO UPDATE SET amount_due = excluded.amount_due",
        (p.updated_at, p.process_id),
    )
    cur = conn.execute(
        "UPDATE payments SET asset_id = ?, network_id = ?, chain_id = ?, token_contract = ?,"
        " decimals = ?, amount_due = ?, updated_at = ?, quote = ?"
        " WHERE process_id = ? AND NOT EXISTS (SELECT 1 FROM transfers t"
        "  WHERE t.process_id = payments.process_id AND t.status IN ('seen', 'confirmed')"
        "  AND t.amount <> '0') AND NOT EXISTS (SELECT 1 FROM unexpected_transfers u"
        "  WHERE u.process_id = payments.process_id AND u.accepted_at IS NOT NULL)",
        (p.asset_id, p.network_id, p.chain_id, p.token_contract, p.decimals, str(p.amount_due),
         p.updated_at, p.quote, p.process_id),
    )
    return cur.rowcount == 1


def transfers_of(conn, process_ids) -> dict[str, list[Transfer]]:
    """The seen and confirmed transfers of these processes (orphaned and reversed ones, no longer on
    the chain, never show), by process
    id, each list ordered by (block_number, log_index); one query. Each carries its network's head
    (for its confirmations); one sent with an earlier choice of the payment counts for the share of
    that choice's amount due it paid, in the current choice's base units (rounded down: never more
    than was sent); before quotes, every choice was due the same amount, rescaled by decimals."""
    ids = list(process_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT {', '.join('t.' + f for f in _TRANSFER_FIELDS)}, n.head_block,"
        " p.decimals AS chosen_decimals, p.amount_due AS chosen_due,"
        " c.decimals AS earlier_decimals, c.amount_due AS earlier_due"
        " FROM transfers t JOIN networks n ON n.id = t.network_id"
        " JOIN payments p ON p.process_id = t.process_id"
        " LEFT JOIN payment_choices c ON c.process_id = t.process_id"
        "  AND c.network_id = t.network_id AND lower(c.token_contract) = lower(t.token_contract)"
        "  AND NOT (p.network_id = t.network_id"
        " AND lower(p.token_contract) = lower(t.token_contract))"
        f" WHERE t.process_id IN ({marks}) AND t.status IN ('seen', 'confirmed')"
        " ORDER BY t.block_number, t.log_index",
        ids,
    ).fetchall()
    found: dict[str, list[Transfer]] = {}
    for r in rows:
        amount = int(r["amount"])  # base units, stored as decimal text
        if r["earlier_due"] is not None:  # an earlier choice's token (back to it: unchanged)
            amount = amount * int(r["chosen_due"]) // int(r["earlier_due"])
        elif r["earlier_decimals"] is not None:
            amount = _rescaled(amount, r["earlier_decimals"], r["chosen_decimals"])
        values = {k: r[k] for k in _TRANSFER_FIELDS}
        transfer = Transfer(**dict(values, amount=amount), head_block=r["head_block"])
        found.setdefault(r["process_id"], []).append(transfer)
    return found


def _rescaled(amount, decimals, to_decimals) -> int:
    """Base units of a token with `decimals` in those of one with `to_decimals`, exactly; what
    the coarser token cannot hold is left out (never more than was sent)."""
    if to_decimals >= decimals:
        return amount * 10 ** (to_decimals - decimals)
    return amount // 10 ** (decimals - to_decimals)


def views_of(conn, process_ids) -> dict[str, PaymentView]:
    """Payments with their transfers (those accepted as payment among them) and their unexpected
    transfers, by process id: four queries whatever the number of ids (the last three only when one
    of them has a payment)."""
    payments = payments_of(conn, process_ids)
    if not payments:
        return {}
    transfers = transfers_of(conn, payments)
    for pid, accepted in unexpected_rows.accepted_of(conn, payments).items():
        transfers[pid] = sorted(transfers.get(pid, []) + accepted,
                                key=lambda t: (t.block_timestamp, t.block_number, t.log_index))
    unexpected = unexpected_rows.of_processes(conn, payments)
    return {pid: PaymentView(p, tuple(transfers.get(pid, ())), tuple(unexpected.get(pid, ())))
            for pid, p in payments.items()}


def view_of(conn, process_id) -> PaymentView | None:
    return views_of(conn, (process_id,)).get(process_id)
