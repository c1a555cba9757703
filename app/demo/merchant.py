"""The demo shop's test-mode merchant: created once, its keys kept in a JSON file.

`flask --app app demo-merchant` (run by `make run`) calls `ensure`; the demo shop reads the file
with `read_keys` on each request, so re-running the command (e.g. after `init-db --reset`) needs no
restart. The file holds the secret key in clear (mode 0600): demo and test mode only.

Each database keeps its own file: by default it sits beside the SQLite file (app/demo/__init__.py),
and it names the database it was written for, so a command pointed at another database never takes
the file's merchant for its own, nor overwrites it.
"""
import json
import os
import secrets

from app.domain import accounts, links
from app.domain import merchants as service

# The on-chain demo's wallet (`make demo-onchain`): the account xpub (m/44'/60'/0') of the BIP39
# test seed phrase "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon
# abandon about", published in the BIP39 test vectors. Its first deposit address (m/44'/60'/0'/0/0)
# is 0x9858EfFD232B4033E47d90003D41EC34EcaEda94. Anyone can spend from it: local test chains only.
DEMO_XPUB = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5"
             "GFZaM6si3yZdUsT8ddYM3PwnATt")
DEMO_FIRST_ADDRESS = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"

# The on-chain demo's payout mode: the merchant's payout wallet is the local node's second dev
# account (Hardhat's published "test test … junk" accounts, #1), and the operator's key, which
# deploys the forwarder factory and pays the gas of `collect`, is dev account #2's published private
# key. Anyone can spend from both: local test chains only.
DEMO_PAYOUT_ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
DEMO_OPERATOR_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
# The relayer of payments without gas (RELAYER_KEY_FILE): dev account #3's published key, which
# holds the node's gas coin and no token.
DEMO_RELAYER_KEY = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6"


def read_keys(path):
    """The saved keys {merchantId, secretKey, publicKey, webhookSecret, livemode}, or None."""
    try:
        with open(path) as f:
            keys = json.load(f)
    except (OSError, ValueError):
        return None
    needed = ("merchantId", "secretKey", "publicKey", "webhookSecret")
    if not isinstance(keys, dict) or not all(isinstance(keys.get(k), str) for k in needed):
        return None
    return keys


def _write_keys(path, keys):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(keys, f, indent=2)


def ensure(db, path, *, webhook_url, now, allow_loopback=False, database=None, overlap=0):
    """The demo merchant saved at `path` for `database` (where it is, as `app.db.location` says).
    A `webhook_url` given is set on it either way (`allow_loopback`: WEBHOOK_ALLOW_LOOPBACK, as
    the demo's own inbox is on this machine). Returns (keys, how): how is "kept"; "created" when
    neither the file nor the database had one; "recovered" when the file was another database's
    (written before files named theirs) and this database has a demo merchant, known by its
    console owner and its name (a test-mode "Demo shop"): it gets a new secret key (its other keys
    keep working for `overlap` seconds), the only one ever saved in clear being lost. A file naming
    another database is refused with what to do."""
    keys = read_keys(path)
    known = {m.id: m for m in service.list_all(db)}
    if keys is not None and keys["merchantId"] in known:
        if webhook_url is not None:
            service.set_webhook_url(db, keys["merchantId"], webhook_url,
                                    allow_loopback=allow_loopback)
        # the webhook secret as the console may have rolled it (the receiver verifies with the
        # file's)
        current = dict(keys, webhookSecret=known[keys["merchantId"]].webhook_secret)
        if database is not None:
            current["database"] = database
        if current != keys:
            keys = current
            _write_keys(path, keys)
        return keys, "kept"
    if keys is not None and keys.get("database") not in (None, database):
        raise service.MerchantError(
            f"{path} holds the demo merchant of another database ({keys['database']}), not of"
            f" {database}. Give the command that database (FLASK_DATABASE={keys['database']}), or"
            " this database a keys file of its own (--file PATH, or FLASK_DEMO_MERCHANT_FILE); by"
            " default each database's file sits beside it, so make run and make demo-onchain never"
            " share one.")
    staff = accounts.user_by_email(db, DEMO_STAFF_EMAIL)
    merchant = known.get(staff.merchant_id) if staff is not None else None
    if merchant is not None and not merchant.livemode and merchant.name == DEMO_NAME:
        secret_key = service.roll_key(db, merchant.id, now, overlap)
        how = "recovered"
        if webhook_url is not None:
            service.set_webhook_url(db, merchant.id, webhook_url, allow_loopback=allow_loopback)
    else:
        merchant, secret_key = service.create(
            db, name=DEMO_NAME, livemode=False, webhook_url=webhook_url, now=now,
            allow_loopback=allow_loopback,
        )
        how = "created"
    keys = service.credentials(merchant, secret_key)
    if database is not None:
        keys["database"] = database
    _write_keys(path, keys)
    return keys, how


def key_works(db, keys, now) -> bool:
    """Whether the file's secret key still opens the demo merchant (not revoked in the console,
    nor rolled past its overlap)."""
    merchant = service.by_secret_key(db, keys["secretKey"], now)
    return merchant is not None and merchant.id == keys["merchantId"]


def give_secret_key(db, path, keys, secret_key, now):
    """Save `secret_key` in the keys file once it is checked to be a working secret key of the
    demo merchant (the one the console showed after a roll). Returns the keys."""
    merchant = service.by_secret_key(db, secret_key.strip(), now)
    if merchant is None or merchant.id != keys["merchantId"]:
        raise service.MerchantError(
            f"That is not a working secret key of the demo merchant {keys['merchantId']}: copy the"
            " one the console's Keys page showed when you rolled it (or roll again there).")
    keys = dict(keys, secretKey=secret_key.strip())
    _write_keys(path, keys)
    return keys


# The demo's console login (`demo-merchant --console-login`): an owner of the demo merchant.
DEMO_STAFF_EMAIL = "staff@demo.example"
DEMO_NAME = "Demo shop"  # the demo merchant's name


def ensure_staff(db, path, keys, *, now, hash_method):
    """The demo merchant's console owner: (email, password). The password is made at random when the
    user is created and kept in the keys file beside the merchant's keys (mode 0600, test mode
    only), so a later run prints it again; a user whose password the file does not hold gets a new
    one."""
    password = keys.get("consolePassword")
    user = accounts.user_by_email(db, DEMO_STAFF_EMAIL)
    if user is not None and user.merchant_id != keys["merchantId"]:
        raise service.MerchantError(
            f"The user {DEMO_STAFF_EMAIL} belongs to another merchant ({user.merchant_id}) than the"
            f" demo merchant of {path} ({keys['merchantId']}). Run the command without"
            " --console-login, or give it the keys file of that merchant's database (--file PATH).")
    if user is None or not password:
        password = secrets.token_urlsafe(12)
        if user is None:
            accounts.create_user(db, email=DEMO_STAFF_EMAIL, merchant_id=keys["merchantId"],
                                 role="owner", password=password, now=now, hash_method=hash_method)
        else:
            accounts.set_password(db, DEMO_STAFF_EMAIL, password, hash_method=hash_method)
        _write_keys(path, dict(keys, consolePassword=password))
    return DEMO_STAFF_EMAIL, password


# The demo's payment link (`demo-merchant` makes it once): a newcomer opens it and pays, no code.
DEMO_LINK = {"amount": "4.50", "currency": "USD", "description": "Demo: a cup of coffee"}


def ensure_link(db, path, keys, *, now, success_url=None):
    """The demo merchant's payment link: the one the keys file names while the database has it and
    it still takes payments, else a new one (its id saved in the file). Returns (link, created)."""
    merchant = service.get(db, keys["merchantId"])
    link_id = keys.get("paymentLinkId")
    if link_id:
        try:
            link = links.get(db, merchant.id, link_id)
        except links.LinkNotFound:
            link = None
        if link is not None and link.why_unavailable(
                links.payments(db, [link]).get(link.id, 0), now) is None:
            return link, False
    link = links.create(db, merchant, amount=DEMO_LINK["amount"], currency=DEMO_LINK["currency"],
                        description=DEMO_LINK["description"], now=now, success_url=success_url,
                        metadata='{"demo":"coffee"}')
    _write_keys(path, dict(read_keys(path) or keys, paymentLinkId=link.id))
    return link, True
