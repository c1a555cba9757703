"""Merchant accounts and their credentials (used by the operator CLI)."""
import time
import uuid
from dataclasses import replace

from app.core import currency, keys
from app.core.money import AmountError, parse_tolerance
from app.core.records import Merchant, SecretKey
from app.data import merchants as merchant_rows
from app.domain import endpoints
from app.webhooks.signing import new_secret as new_webhook_secret


class MerchantError(ValueError):
    """An operator request about a merchant that cannot be carried out; str() says why."""


def new_merchant_id() -> str:
    return "mer_" + uuid.uuid4().hex[:24]


def check_webhook_url(url: str, livemode: bool, *, allow_loopback: bool,
                      resolve=None) -> str | None:
    """The SSRF guard when a URL is set (endpoints.check_url), as a MerchantError."""
    try:
        return endpoints.check_url(url, livemode, allow_loopback=allow_loopback, resolve=resolve)
    except endpoints.EndpointError as e:
        raise MerchantError(str(e)) from None


def credentials(merchant, secret_key) -> dict:
    """What an operator keeps from `create` (`merchants create --json`, the demo's keys file)."""
    return {"merchantId": merchant.id, "secretKey": secret_key, "publicKey": merchant.public_key,
            "webhookSecret": merchant.webhook_secret, "livemode": merchant.livemode}


def create(db, *, name, livemode, webhook_url, now, allow_loopback=False):
    """A new merchant and its first secret key, returned in clear this once; given a webhook URL,
    its first endpoint too, signing with the merchant's webhook secret (`allow_loopback`:
    WEBHOOK_ALLOW_LOOPBACK, for that URL)."""
    name = name.strip()
    if not name:
        raise MerchantError("The merchant needs a name.")
    if webhook_url is not None:
        check_webhook_url(webhook_url, livemode, allow_loopback=allow_loopback)
    merchant = Merchant(
        id=new_merchant_id(),
        name=name,
        livemode=livemode,
        public_key=keys.new_public_key(livemode),
        webhook_secret=new_webhook_secret(),
        disabled_at=None,
        created_at=int(now),
    )
    secret_key = keys.new_secret_key(livemode)
    with db.transaction() as conn:
        merchant_rows.insert(conn, merchant)
        merchant_rows.insert_key(
            conn, merchant.id, keys.hash_key(secret_key), keys.key_prefix(secret_key), int(now)
        )
        if webhook_url is not None:
            endpoints.add_first(conn, merchant, webhook_url, now)
    return merchant, secret_key


def _existing(conn, merchant_id) -> Merchant:
    merchant = merchant_rows.get(conn, merchant_id)
    if merchant is None:
        raise MerchantError(f"No merchant {merchant_id}.")
    return merchant


def rotate_key(db, merchant_id, now) -> str:
    """Issue one more secret key; the existing ones keep working until revoked."""
    with db.transaction() as conn:
        merchant = _existing(conn, merchant_id)
        secret_key = keys.new_secret_key(merchant.livemode)
        merchant_rows.insert_key(
            conn, merchant.id, keys.hash_key(secret_key), keys.key_prefix(secret_key), int(now)
        )
    return secret_key


def roll_overlap_seconds(config, hours=None) -> int:
    """The overlap of a roll: `hours` when given (the CLI's --overlap-hours), else the
    KEY_ROLL_OVERLAP_HOURS setting; the CLI and the console both ask here."""
    return 3600 * (config["KEY_ROLL_OVERLAP_HOURS"] if hours is None else int(hours))


def roll_key(db, merchant_id, now, overlap_seconds) -> str:
    """Issue a new secret key, returned in clear this once; every other working key of the merchant
    keeps working for `overlap_seconds` more (KEY_ROLL_OVERLAP_HOURS), then answers 401
    invalid_secret_key. 0 ends them at once."""
    if overlap_seconds < 0:
        raise MerchantError("The overlap must not be negative.")
    now = int(now)
    with db.transaction() as conn:
        merchant = _existing(conn, merchant_id)
        secret_key = keys.new_secret_key(merchant.livemode)
        key_hash = keys.hash_key(secret_key)
        merchant_rows.insert_key(conn, merchant.id, key_hash, keys.key_prefix(secret_key), now)
        merchant_rows.expire_keys(conn, merchant.id, now + int(overlap_seconds), key_hash)
    return secret_key


def rotate_public_key(db, merchant_id) -> str:
    """Replace the public key at once: the old one stops working (pages embedding it must
    change)."""
    with db.transaction() as conn:
        merchant = _existing(conn, merchant_id)
        public_key = keys.new_public_key(merchant.livemode)
        merchant_rows.set_public_key(conn, merchant_id, public_key)
    return public_key


def rotate_webhook_secret(db, merchant_id, now, overlap_seconds=0) -> str:
    """Replace the signing secret of the merchant's first webhook endpoint (endpoints.roll_secret);
    one without an endpoint gets a new secret for the first endpoint it will have. The new one."""
    if overlap_seconds < 0:
        raise MerchantError("The overlap must not be negative.")
    _existing(db.connection(), merchant_id)
    endpoint = endpoints.first(db, merchant_id)
    if endpoint is not None:
        return endpoints.roll_secret(db, merchant_id, endpoint.id, now, overlap_seconds)
    secret = new_webhook_secret()
    with db.transaction() as conn:
        merchant_rows.set_webhook_secret(conn, merchant_id, secret)
    return secret


MIN_REVOKE_PREFIX = 12


def revoke_key(db, merchant_id, prefix, now):
    """Revoke the one key of this merchant that `prefix` (>= 12 leading characters) designates."""
    if len(prefix) < MIN_REVOKE_PREFIX:
        raise MerchantError(f"Give at least {MIN_REVOKE_PREFIX} leading characters of the key.")
    with db.transaction() as conn:
        _existing(conn, merchant_id)
        if len(prefix) > keys.KEY_PREFIX_LENGTH:
            # Longer than the stored prefix: only the whole key can be checked (by its hash).
            key = merchant_rows.key_by_hash(conn, merchant_id, keys.hash_key(prefix))
            matches = [key] if key else []
        else:
            matches = [k for k in merchant_rows.keys(conn, merchant_id)
                       if k.key_prefix.startswith(prefix)]
        if not matches:
            raise MerchantError("No key of this merchant starts with that prefix.")
        if len(matches) > 1:
            raise MerchantError(f"That prefix matches {len(matches)} keys; give more characters.")
        key = matches[0]
        if key.revoked_at is not None:
            raise MerchantError(f"Key {key.key_prefix}… is already revoked.")
        merchant_rows.revoke_key(conn, key.id, int(now))
    return replace(key, revoked_at=int(now))


def revoke_key_now(db, merchant_id, key_id, now) -> SecretKey:
    """The console's "Revoke now": this key of the merchant stops working at once (a leaked key,
    kept working by a roll's overlap). Refused for the merchant's last working key: its server
    would be locked out of the API; roll first."""
    now = int(now)
    with db.transaction() as conn:
        keys_now = merchant_rows.keys(conn, merchant_id)
        key = next((k for k in keys_now if k.id == key_id), None)
        if key is None:
            raise MerchantError("No such key of this merchant.")
        if key.state(now) in ("revoked", "expired"):
            raise MerchantError(f"Key {key.key_prefix}… already stopped working.")
        if not any(k.id != key.id and k.state(now) in ("active", "expiring") for k in keys_now):
            raise MerchantError(f"Key {key.key_prefix}… is this merchant's last working key: roll"
                                " the secret key first, then revoke this one.")
        merchant_rows.revoke_key(conn, key.id, now)
    return replace(key, revoked_at=now)


def disable(db, merchant_id, now):
    with db.transaction() as conn:
        _existing(conn, merchant_id)
        if not merchant_rows.disable(conn, merchant_id, int(now)):
            raise MerchantError(f"Merchant {merchant_id} is already disabled.")


def set_tolerance(db, merchant_id, percent) -> str:
    """Set the merchant's underpayment tolerance (percent, a decimal from 0 to 5,
    app/core/money.py); the value stored. It applies to payments confirmed from now on: each keeps
    the one it was made under, so a change never completes or reopens a payment already under
    way."""
    try:
        tolerance = parse_tolerance(percent)
    except AmountError as e:
        raise MerchantError(str(e)) from None
    with db.transaction() as conn:
        _existing(conn, merchant_id)
        merchant_rows.set_tolerance(conn, merchant_id, tolerance)
    return tolerance


def set_currency(db, merchant_id, code) -> str:
    """The currency of the merchant's processes whose preorder names none, from now on (ISO 4217,
    app/core/currency.py); processes already made keep theirs."""
    try:
        currency.check(code)
    except ValueError as e:
        raise MerchantError(f"The currency: {e}") from None
    with db.transaction() as conn:
        _existing(conn, merchant_id)
        merchant_rows.set_currency(conn, merchant_id, code)
    return code


def tolerance_of(db, merchant_id) -> str:
    return merchant_rows.get_tolerance(db.connection(), merchant_id) or "0"


def set_webhook_url(db, merchant_id, url, now=None, *, allow_loopback=False):
    """Set the URL of the merchant's first webhook endpoint (made if it has none, at `now`: the
    system clock if None), or with None disable that endpoint: (the endpoint or None, a warning
    or None)."""
    now = time.time() if now is None else now
    merchant = _existing(db.connection(), merchant_id)
    try:
        return endpoints.set_first_url(db, merchant, url, now, allow_loopback=allow_loopback)
    except endpoints.EndpointError as e:
        raise MerchantError(str(e)) from None


def get(db, merchant_id) -> Merchant | None:
    return merchant_rows.get(db.connection(), merchant_id)


def list_all(db):
    return merchant_rows.list_all(db.connection())


def keys_of(db, merchant_id):
    conn = db.connection()
    _existing(conn, merchant_id)
    return merchant_rows.keys(conn, merchant_id)


def by_secret_key(db, key, now) -> Merchant | None:
    """The merchant whose secret key this is, while it works (a revoked key, or a rolled one past
    its overlap, is nobody's): looked up by the key's hash, on every request."""
    return merchant_rows.by_secret_key_hash(db.connection(), keys.hash_key(key), now)


def by_public_key(db, key) -> Merchant | None:
    return merchant_rows.by_public_key(db.connection(), key)
