"""SQL for merchants and their secret keys."""
from app.core.records import Merchant, SecretKey

_MERCHANT_COLUMNS = (
    "m.id, m.name, m.livemode, m.public_key, m.webhook_secret, m.disabled_at, m.created_at,"
    " m.currency, m.display_name"
)
_KEY_COLUMNS = "id, merchant_id, key_prefix, created_at, revoked_at, expires_at"


def _merchant(row):
    return Merchant(
        id=row["id"],
        name=row["name"],
        livemode=bool(row["livemode"]),
        public_key=row["public_key"],
        webhook_secret=row["webhook_secret"],
        disabled_at=row["disabled_at"],
        created_at=row["created_at"],
        currency=row["currency"],
        display_name=row["display_name"],
    )


def _key(row):
    return SecretKey(
        id=row["id"],
        merchant_id=row["merchant_id"],
        key_prefix=row["key_prefix"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        expires_at=row["expires_at"],
    )


def insert(conn, merchant: Merchant):
    conn.execute(
        "INSERT INTO merchants (id, name, livemode, public_key, webhook_secret,"
        " disabled_at, created_at, currency) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            merchant.id,
            merchant.name,
            int(merchant.livemode),
            merchant.public_key,
            merchant.webhook_secret,
            merchant.disabled_at,
            merchant.created_at,
            merchant.currency,
        ),
    )


def insert_key(conn, merchant_id, key_hash, key_prefix, now):
    conn.execute(
        "INSERT INTO secret_keys (merchant_id, key_hash, key_prefix, created_at)"
        " VALUES (?, ?, ?, ?)",
        (merchant_id, key_hash, key_prefix, now),
    )


def by_secret_key_hash(conn, key_hash, now) -> Merchant | None:
    """The merchant holding this secret key, neither revoked nor past the end of its overlap."""
    row = conn.execute(
        f"SELECT {_MERCHANT_COLUMNS} FROM secret_keys k JOIN merchants m ON m.id = k.merchant_id"
        " WHERE k.key_hash = ? AND k.revoked_at IS NULL"
        " AND (k.expires_at IS NULL OR k.expires_at > ?)",
        (key_hash, now),
    ).fetchone()
    return _merchant(row) if row else None


def by_public_key(conn, public_key) -> Merchant | None:
    row = conn.execute(
        f"SELECT {_MERCHANT_COLUMNS} FROM merchants m WHERE m.public_key = ?", (public_key,)
    ).fetchone()
    return _merchant(row) if row else None


def get(conn, merchant_id) -> Merchant | None:
    row = conn.execute(
        f"SELECT {_MERCHANT_COLUMNS} FROM merchants m WHERE m.id = ?", (merchant_id,)
    ).fetchone()
    return _merchant(row) if row else None


def get_many(conn, merchant_ids) -> dict[str, Merchant]:
    """The merchants with these ids that exist, by id."""
    merchant_ids = list(merchant_ids)
    if not merchant_ids:
        return {}
    marks = ", ".join("?" * len(merchant_ids))
    rows = conn.execute(
        f"SELECT {_MERCHANT_COLUMNS} FROM merchants m WHERE m.id IN ({marks})", merchant_ids
    )
    return {row["id"]: _merchant(row) for row in rows}


def list_all(conn) -> list[Merchant]:
    rows = conn.execute(f"SELECT {_MERCHANT_COLUMNS} FROM merchants m ORDER BY m.created_at, m.id")
    return [_merchant(row) for row in rows]


def disable(conn, merchant_id, now) -> bool:
    cur = conn.execute(
        "UPDATE merchants SET disabled_at = ? WHERE id = ? AND disabled_at IS NULL",
        (now, merchant_id),
    )
    return cur.rowcount == 1


def keys(conn, merchant_id) -> list[SecretKey]:
    rows = conn.execute(
        f"SELECT {_KEY_COLUMNS} FROM secret_keys WHERE merchant_id = ? ORDER BY id",
        (merchant_id,),
    )
    return [_key(row) for row in rows]


def key_by_hash(conn, merchant_id, key_hash) -> SecretKey | None:
    row = conn.execute(
        f"SELECT {_KEY_COLUMNS} FROM secret_keys WHERE merchant_id = ? AND key_hash = ?",
        (merchant_id, key_hash),
    ).fetchone()
    return _key(row) if row else None


def revoke_key(conn, key_id, now) -> bool:
    cur = conn.execute(
        "UPDATE secret_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (now, key_id)
    )
    return cur.rowcount == 1


def expire_keys(conn, merchant_id, until, keep_hash) -> int:
    """Every working key of the merchant but the one hashed `keep_hash` stops working at `until`
    (a key already ending sooner keeps its end)."""
    return conn.execute(
        "UPDATE secret_keys SET expires_at = ? WHERE merchant_id = ? AND key_hash != ?"
        " AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
        (until, merchant_id, keep_hash, until),
    ).rowcount


def set_public_key(conn, merchant_id, public_key) -> bool:
    cur = conn.execute("UPDATE merchants SET public_key = ? WHERE id = ?",
                       (public_key, merchant_id))
    return cur.rowcount == 1


def set_webhook_secret(conn, merchant_id, secret) -> bool:
    """The secret a merchant without a webhook endpoint gives its first one."""
    return conn.execute("UPDATE merchants SET webhook_secret = ? WHERE id = ?",
                        (secret, merchant_id)).rowcount == 1


def get_tolerance(conn, merchant_id) -> str | None:
    """The merchant's underpayment tolerance in percent (decimal text); None: no such merchant."""
    row = conn.execute("SELECT underpayment_tolerance FROM merchants WHERE id = ?",
                       (merchant_id,)).fetchone()
    return row[0] if row else None


def set_tolerance(conn, merchant_id, tolerance: str) -> bool:
    cur = conn.execute("UPDATE merchants SET underpayment_tolerance = ? WHERE id = ?",
                       (tolerance, merchant_id))
    return cur.rowcount == 1


def set_currency(conn, merchant_id, currency) -> bool:
    """The currency of the merchant's processes whose preorder names none, from now on."""
    return conn.execute("UPDATE merchants SET currency = ? WHERE id = ?",
                        (currency, merchant_id)).rowcount == 1


def set_display_name(conn, merchant_id, name) -> bool:
    """What the checkout page shows (None: the merchant's name)."""
    return conn.execute("UPDATE merchants SET display_name = ? WHERE id = ?",
                        (name, merchant_id)).rowcount == 1
