"""SQL of the payout mode: merchants' payout addresses, networks' forwarder factories, the
payout-mode deposit addresses a collection reads, and the collections themselves
(app/chain/collect.py).

Amounts and wei are decimal-integer TEXT in the database and `int` in Python."""
from dataclasses import dataclass

from app.data.schema import dialect

# EIP-7528's stand-in address for a chain's gas coin (ETH, POL, ...), in collection_items.token.
GAS_COIN = "0xEeeeeEeeeEeEeeEeEeEeeEEEeeeeEeeeeeeeEEeE"


@dataclass(frozen=True)
class Deposit:
    """A payout-mode deposit address that may hold funds on a network."""
    process_id: str
    merchant_id: str
    address: str
    payout_address: str


@dataclass(frozen=True)
class Collection:
    """One transaction of `collect`: `pending` (sent, maybe mined: `block_number` set), `confirmed`
    (mined `confirmations` deep and proven on the kept chain by its anchor) or `reverted` (it moved
    nothing: reverted by the EVM, never mined, or removed by a reorganisation; `error` says
    which)."""
    id: int
    network_id: str
    chain_id: int
    factory: str
    sender: str
    nonce: int
    tx_hash: str
    raw_tx: str
    gas_limit: int
    max_fee_per_gas: int
    status: str
    block_number: int | None
    gas_used: int | None
    gas_price: int | None
    error: str | None
    created_at: int
    settled_at: int | None
    block_hash: str | None = None
    anchor_block: int | None = None
    anchor_hash: str | None = None
    note: str | None = None
    recorded_by: str | None = None  # the merchant whose console recorded it (a browser wallet's)

    def __repr__(self):
        return f"Collection(id={self.id}, tx_hash={self.tx_hash!r}, status={self.status!r})"


@dataclass(frozen=True)
class Item:
    collection_id: int
    address: str
    token: str
    process_id: str
    merchant_id: str
    payout_address: str
    amount: int


# Merchants' payout addresses

def get_payout(conn, merchant_id) -> str | None:
    row = conn.execute(
        "SELECT payout_address FROM merchant_payouts WHERE merchant_id = ?", (merchant_id,)
    ).fetchone()
    return row["payout_address"] if row else None


def set_payout(conn, merchant_id, address, now):
    conn.execute(
        "INSERT INTO merchant_payouts (merchant_id, payout_address, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (merchant_id) DO UPDATE SET payout_address = excluded.payout_address,"
        " updated_at = excluded.updated_at",
        (merchant_id, address, now),
    )


def is_deposit_address(conn, address) -> bool:
    return conn.execute(
        "SELECT 1 FROM payments WHERE lower(address) = lower(?)", (address,)
    ).fetchone() is not None


def lock_payout_address(conn, address):
    """Hold the payout address (EIP-55) until the transaction ends, so two merchants setting it at
    once see each other (PostgreSQL; SQLite's single writer serialises)."""
    if dialect(conn) == "postgresql":
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('payout-address/'"
                     " || CAST(? AS text), 0))", (address,))


def merchants_of(conn, addresses) -> dict[str, set[str]]:
    """{address, lowercase: the ids of the merchants it belongs to} for those of `addresses`
    (EIP-55, as stored) that are a merchant's payout address, one its payments' deposit addresses
    forward to (it may have changed its payout since), or one of its deposit addresses. Addresses of
    nobody are left out."""
    wanted = sorted(set(addresses))
    if not wanted:
        return {}
    marks = ",".join("?" * len(wanted))
    rows = conn.execute(
        f"SELECT merchant_id, payout_address AS address FROM merchant_payouts"
        f" WHERE payout_address IN ({marks})"
        f" UNION SELECT merchant_id, payout_address FROM payments WHERE payout_address IN ({marks})"
        f" UNION SELECT merchant_id, address FROM payments WHERE address IN ({marks})",
        (*wanted, *wanted, *wanted),
    )
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(row["address"].lower(), set()).add(row["merchant_id"])
    return found


# Factories

def get_factory(conn, network_id) -> str | None:
    found = factory_of(conn, network_id)
    return found[0] if found else None


def factory_of(conn, network_id) -> tuple[str, int] | None:
    """(address, version) of the network's factory (app/evm/forwarder.py's versions)."""
    row = conn.execute(
        "SELECT address, version FROM network_factories WHERE network_id = ?", (network_id,)
    ).fetchone()
    return (row["address"], row["version"]) if row else None


def set_factory(conn, network_id, address, tx_hash, now, version):
    conn.execute(
        "INSERT INTO network_factories (network_id, address, tx_hash, created_at, version)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (network_id) DO UPDATE SET address = excluded.address,"
        " tx_hash = excluded.tx_hash, created_at = excluded.created_at, version = excluded.version",
        (network_id, address, tx_hash, now, version),
    )


def networks_with_factory(conn) -> set[str]:
    return {row["network_id"] for row in conn.execute("SELECT network_id FROM network_factories")}


# Deposit addresses to collect

def deposits(conn, network_id, factory, merchant_id=None) -> list[Deposit]:
    """Payout-mode deposit addresses made with `factory` whose payment is, or was before the
    customer changed it, on the network; of one merchant or of all; ordered by process id."""
    mine, params = ("", ()) if merchant_id is None else (" AND p.merchant_id = ?", (merchant_id,))
    rows = conn.execute(
        "SELECT p.process_id, p.merchant_id, p.address, p.payout_address FROM payments p"
        f" WHERE p.mode = 'payout' AND p.factory = ?{mine}"
        " AND (p.network_id = ? OR EXISTS (SELECT 1 FROM payment_choices c"
        "  WHERE c.process_id = p.process_id AND c.network_id = ?))"
        " ORDER BY p.process_id",
        (factory, *params, network_id, network_id),
    )
    return [Deposit(r["process_id"], r["merchant_id"], r["address"], r["payout_address"])
            for r in rows]


def collectable(conn, factory, version, merchant_id=None) -> list[Deposit]:
    """The payout-mode deposit addresses that a factory at `factory` of `version` can empty on a
    network, whatever network their payment chose: those made with a factory of that address and
    version (a CREATE2 address is the same on every network where the same factory sits at the
    same address), of one merchant or of all; ordered by process id."""
    mine, params = ("", ()) if merchant_id is None else (" AND p.merchant_id = ?", (merchant_id,))
    rows = conn.execute(
        "SELECT p.process_id, p.merchant_id, p.address, p.payout_address FROM payments p"
        " JOIN network_factories f ON f.network_id = p.network_id AND f.address = p.factory"
        f" WHERE p.mode = 'payout' AND p.factory = ? AND f.version = ?{mine}"
        " ORDER BY p.process_id",
        (factory, version, *params),
    )
    return [Deposit(r["process_id"], r["merchant_id"], r["address"], r["payout_address"])
            for r in rows]


def deposits_at(conn, factory, addresses) -> dict[str, Deposit]:
    """{address: Deposit} of the payout-mode deposit addresses made with `factory` among
    `addresses` (EIP-55, as stored)."""
    found = list(addresses)
    if not found:
        return {}
    rows = conn.execute(
        "SELECT process_id, merchant_id, address, payout_address FROM payments"
        f" WHERE mode = 'payout' AND factory = ? AND address IN ({','.join('?' * len(found))})",
        (factory, *found),
    )
    return {r["address"]: Deposit(r["process_id"], r["merchant_id"], r["address"],
                                  r["payout_address"])
            for r in rows}


# Collections

_COLLECTION = (
    "id, network_id, chain_id, factory, sender, nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas,"
    " status, block_number, gas_used, gas_price, error, created_at, settled_at, block_hash,"
    " anchor_block, anchor_hash, note, recorded_by"
)


def _collection(row) -> Collection:
    values = {k: row[k] for k in row.keys()}
    values["max_fee_per_gas"] = int(values["max_fee_per_gas"])
    if values["gas_price"] is not None:
        values["gas_price"] = int(values["gas_price"])
    return Collection(**values)


def get_collection(conn, collection_id) -> Collection:
    return _collection(conn.execute(f"SELECT {_COLLECTION} FROM collections WHERE id = ?",
                                    (collection_id,)).fetchone())


def lock_collections(conn, network_id):
    """Hold the network's collections until the transaction ends, so two runs at once pick
    different nonces of one sender and never claim one address twice (PostgreSQL; SQLite's single
    writer serialises)."""
    if dialect(conn) == "postgresql":
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(CAST(? AS text) || '/collect',"
                     " 0))", (network_id,))


CLAIM_CHUNK = 500  # addresses per query


WALLET_CLAIM_SECONDS = 3600  # a browser wallet's collection not mined holds its addresses so long


def held(conn, network_id, addresses, read_block, now) -> set[str]:
    """Those of `addresses` (EIP-55, as stored) that a collection on the network holds: one still
    `pending` (not mined, or not yet deep enough), or one confirmed in a block after `read_block`
    (the block a run read their balances at: what it read is gone). A reverted one holds nothing,
    nor does a browser wallet's (`recorded_by`) not mined WALLET_CLAIM_SECONDS after it was
    recorded: a transaction its node dropped would hold them for ever (nothing here can send it
    again); if it is mined after all, a `collect` sent meanwhile moves nothing there.
    Served by collection_items' address index, whatever the number of collections."""
    wanted = sorted(set(addresses))
    found = set()
    for i in range(0, len(wanted), CLAIM_CHUNK):
        chunk = wanted[i:i + CLAIM_CHUNK]
        rows = conn.execute(
            "SELECT DISTINCT i.address FROM collection_items i JOIN collections c"
            " ON c.id = i.collection_id"
            f" WHERE i.address IN ({','.join('?' * len(chunk))}) AND c.network_id = ?"
            " AND ((c.status = 'pending' AND (c.recorded_by IS NULL OR c.block_number IS NOT NULL"
            "  OR c.created_at > ?)) OR (c.status = 'confirmed' AND c.block_number > ?))",
            (*chunk, network_id, int(now) - WALLET_CLAIM_SECONDS,
             -1 if read_block is None else read_block),
        )
        found.update(r["address"] for r in rows)
    return found


def highest_open_nonce(conn, network_id, sender) -> int | None:
    """The highest nonce of the sender's pending collections: a new one takes a nonce above it,
    whatever the node's count says (two runs at once never sign the same nonce)."""
    return conn.execute(
        "SELECT max(nonce) FROM collections WHERE network_id = ? AND sender = ?"
        " AND status = 'pending'",
        (network_id, sender),
    ).fetchone()[0]


def insert_collection(conn, c: Collection, items: list[Item]) -> int:
    """The collection (status `pending`) and its planned items; returns its id."""
    row = conn.execute(
        "INSERT INTO collections (network_id, chain_id, factory, sender, nonce, tx_hash, raw_tx,"
        " gas_limit, max_fee_per_gas, status, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?) RETURNING id",
        (c.network_id, c.chain_id, c.factory, c.sender, c.nonce, c.tx_hash, c.raw_tx, c.gas_limit,
         str(c.max_fee_per_gas), c.created_at),
    ).fetchone()
    collection_id = row["id"]
    _insert_items(conn, collection_id, items)
    return collection_id


def _insert_items(conn, collection_id, items):
    if items:
        conn.executemany(
            "INSERT INTO collection_items (collection_id, address, token, process_id, merchant_id,"
            " payout_address, amount) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(collection_id, i.address, i.token, i.process_id, i.merchant_id, i.payout_address,
              str(i.amount)) for i in items],
        )


def _replace_items(conn, collection_id, items):
    conn.execute("DELETE FROM collection_items WHERE collection_id = ?", (collection_id,))
    _insert_items(conn, collection_id, items)


def open_collections(conn, network_id) -> list[Collection]:
    """Pending collections, by sender and nonce."""
    rows = conn.execute(
        f"SELECT {_COLLECTION} FROM collections WHERE network_id = ? AND status = 'pending'"
        " ORDER BY sender, nonce, id",
        (network_id,),
    )
    return [_collection(r) for r in rows]


def with_nonce(conn, network_id, sender, nonce) -> list[Collection]:
    """Every collection of the sender with this nonce (a replacement, a reorganised one), oldest
    first: at most one of them is ever mined."""
    rows = conn.execute(
        f"SELECT {_COLLECTION} FROM collections WHERE network_id = ? AND sender = ? AND nonce = ?"
        " ORDER BY id",
        (network_id, sender, nonce),
    )
    return [_collection(r) for r in rows]


def confirmed_anchored(conn, network_id, lowest) -> list[Collection]:
    """Confirmed collections whose proof's anchor is at or above `lowest` (the lowest kept block):
    those a reorganisation may still remove."""
    rows = conn.execute(
        f"SELECT {_COLLECTION} FROM collections WHERE network_id = ? AND status = 'confirmed'"
        " AND anchor_block >= ? ORDER BY id",
        (network_id, lowest),
    )
    return [_collection(r) for r in rows]


def mined(conn, collection_id, receipt, items, note) -> bool:
    """A pending (or reverted: its receipt came back) collection is in a block, not yet deep
    enough: pending, with what its logs show it moved."""
    done = conn.execute(
        "UPDATE collections SET status = 'pending', block_number = ?, block_hash = ?, gas_used = ?,"
        " gas_price = ?, anchor_block = NULL, anchor_hash = NULL, error = NULL, note = ?"
        " WHERE id = ? AND status IN ('pending', 'reverted')",
        (receipt.block_number, receipt.block_hash, receipt.gas_used, str(receipt.gas_price), note,
         collection_id),
    ).rowcount == 1
    if done:
        _replace_items(conn, collection_id, items)
    return done


def confirm(conn, collection_id, anchor, now) -> bool:
    """pending -> confirmed: mined (as `mined` recorded it) `confirmations` deep, proven by
    `anchor`."""
    return conn.execute(
        "UPDATE collections SET status = 'confirmed', anchor_block = ?, anchor_hash = ?,"
        " settled_at = ? WHERE id = ? AND status = 'pending' AND block_number IS NOT NULL",
        (anchor.number, anchor.hash, now, collection_id),
    ).rowcount == 1


def reanchor(conn, collection_id, anchor):
    conn.execute("UPDATE collections SET anchor_block = ?, anchor_hash = ? WHERE id = ?"
                 " AND status = 'confirmed'", (anchor.number, anchor.hash, collection_id))


def unmine(conn, collection_id, from_status) -> bool:
    """Back to pending, in no block: its block left the chain and the node holds the transaction
    again (it may be mined anew)."""
    return conn.execute(
        "UPDATE collections SET status = 'pending', block_number = NULL, block_hash = NULL,"
        " anchor_block = NULL, anchor_hash = NULL, settled_at = NULL WHERE id = ? AND status = ?",
        (collection_id, from_status),
    ).rowcount == 1


def revert(conn, collection_id, from_status, error, now, receipt=None) -> bool:
    """-> reverted: it moved nothing (its items, if any, are kept as they were planned or seen, and
    count for nothing); `receipt` when it was mined and reverted by the EVM."""
    return conn.execute(
        "UPDATE collections SET status = 'reverted', error = ?, settled_at = ?,"
        " block_number = ?, block_hash = ?, gas_used = ?, gas_price = ?, anchor_block = NULL,"
        " anchor_hash = NULL WHERE id = ? AND status = ?",
        (error, now, receipt and receipt.block_number, receipt and receipt.block_hash,
         receipt and receipt.gas_used, receipt and str(receipt.gas_price), collection_id,
         from_status),
    ).rowcount == 1


def items_of(conn, collection_ids) -> dict[int, list[Item]]:
    ids = list(collection_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        "SELECT collection_id, address, token, process_id, merchant_id, payout_address, amount"
        f" FROM collection_items WHERE collection_id IN ({marks}) ORDER BY collection_id, address,"
        " token",
        ids,
    )
    found: dict[int, list[Item]] = {}
    for r in rows:
        values = {k: r[k] for k in r.keys()}
        values["amount"] = int(values["amount"])
        found.setdefault(r["collection_id"], []).append(Item(**values))
    return found


def list_collections(conn, *, network_id=None, merchant_id=None, limit=100) -> list[Collection]:
    """Newest first; with `merchant_id`, those that moved some of its deposits."""
    where, params = [], []
    if network_id is not None:
        where.append("network_id = ?")
        params.append(network_id)
    if merchant_id is not None:
        where.append("EXISTS (SELECT 1 FROM collection_items i WHERE i.collection_id = c.id"
                     " AND i.merchant_id = ?)")
        params.append(merchant_id)
    rows = conn.execute(
        f"SELECT {_COLLECTION} FROM collections c"
        f"{' WHERE ' + ' AND '.join(where) if where else ''} ORDER BY id DESC LIMIT ?",
        (*params, limit),
    )
    return [_collection(r) for r in rows]


def insert_wallet_collection(conn, c: Collection, items: list[Item]) -> int | None:
    """A browser wallet's collection (`recorded_by` its merchant), pending, with the items that
    claim its addresses until its receipt shows what it moved; None when its transaction is
    recorded already."""
    if conn.execute("SELECT 1 FROM collections WHERE tx_hash = ?", (c.tx_hash,)).fetchone():
        return None
    collection_id = conn.execute(
        "INSERT INTO collections (network_id, chain_id, factory, sender, nonce, tx_hash, raw_tx,"
        " gas_limit, max_fee_per_gas, status, created_at, recorded_by)"
        " VALUES (?, ?, ?, ?, ?, ?, '', ?, ?, 'pending', ?, ?) RETURNING id",
        (c.network_id, c.chain_id, c.factory, c.sender, c.nonce, c.tx_hash, c.gas_limit,
         str(c.max_fee_per_gas), c.created_at, c.recorded_by)).fetchone()["id"]
    _insert_items(conn, collection_id, items)
    return collection_id


def wallet_pending(conn, network_id, merchant_id) -> list[Collection]:
    """The merchant's browser-wallet collections on the network still pending."""
    rows = conn.execute(f"SELECT {_COLLECTION} FROM collections WHERE recorded_by = ?"
                        " AND network_id = ? AND status = 'pending' ORDER BY id",
                        (merchant_id, network_id))
    return [_collection(r) for r in rows]


def of_merchant(conn, merchant_id, limit=50) -> list[Collection]:
    """Newest first: those that moved some of the merchant's deposits, and those its console
    recorded."""
    rows = conn.execute(
        f"SELECT {_COLLECTION} FROM collections c WHERE c.recorded_by = ? OR EXISTS"
        " (SELECT 1 FROM collection_items i WHERE i.collection_id = c.id AND i.merchant_id = ?)"
        " ORDER BY id DESC LIMIT ?", (merchant_id, merchant_id, limit))
    return [_collection(r) for r in rows]
