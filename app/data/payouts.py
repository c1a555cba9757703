"""SQL of the payout mode: merchants' payout addresses, networks' forwarder factories, the payout-mode
deposit addresses a collection reads, and the collections themselves (app/collect.py).

Amounts and wei are decimal-integer TEXT in the database and `int` in Python."""
from dataclasses import dataclass

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


# Factories

def get_factory(conn, network_id) -> str | None:
    row = conn.execute(
        "SELECT address FROM network_factories WHERE network_id = ?", (network_id,)
    ).fetchone()
    return row["address"] if row else None


def set_factory(conn, network_id, address, tx_hash, now):
    conn.execute(
        "INSERT INTO network_factories (network_id, address, tx_hash, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (network_id) DO UPDATE SET address = excluded.address,"
        " tx_hash = excluded.tx_hash, created_at = excluded.created_at",
        (network_id, address, tx_hash, now),
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


# Collections

_COLLECTION = (
    "id, network_id, chain_id, factory, sender, nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas,"
    " status, block_number, gas_used, gas_price, error, created_at, settled_at"
)


def _collection(row) -> Collection:
    values = {k: row[k] for k in row.keys()}
    values["max_fee_per_gas"] = int(values["max_fee_per_gas"])
    if values["gas_price"] is not None:
        values["gas_price"] = int(values["gas_price"])
    return Collection(**values)


def insert_collection(conn, c: Collection, items: list[Item]) -> int:
    """The collection (status `sent`) and its items; returns its id."""
    row = conn.execute(
        "INSERT INTO collections (network_id, chain_id, factory, sender, nonce, tx_hash, raw_tx,"
        " gas_limit, max_fee_per_gas, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'sent', ?)"
        " RETURNING id",
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


def open_collections(conn, network_id) -> list[Collection]:
    rows = conn.execute(
        f"SELECT {_COLLECTION} FROM collections WHERE network_id = ? AND status = 'sent'"
        " ORDER BY nonce",
        (network_id,),
    )
    return [_collection(r) for r in rows]


def settle(conn, collection_id, *, status, block_number, gas_used, gas_price, error, now,
           items=None) -> bool:
    """`sent` → `succeeded` or `failed`, once (guarded). `items` (on success): what the receipt
    shows moved, replacing the amounts read before sending."""
    cur = conn.execute(
        "UPDATE collections SET status = ?, block_number = ?, gas_used = ?, gas_price = ?,"
        " error = ?, settled_at = ? WHERE id = ? AND status = 'sent'",
        (status, block_number, gas_used, None if gas_price is None else str(gas_price), error, now,
         collection_id),
    )
    if cur.rowcount != 1:
        return False
    if items is not None:
        conn.execute("DELETE FROM collection_items WHERE collection_id = ?", (collection_id,))
        _insert_items(conn, collection_id, items)
    return True


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
