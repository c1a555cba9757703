"""The demo shop's test-mode merchant: created once, its keys kept in a JSON file.

`flask --app app demo-merchant` (run by `make run`) calls `ensure`; the demo shop reads the file with
`read_keys` on each request, so re-running the command (e.g. after `init-db --reset`) needs no restart.
The file holds the secret key in clear (mode 0600): demo and test mode only.
"""
import json
import os
import secrets

from app.domain import accounts, links
from app.domain import merchants as service

# The live demo's wallet (`make demo-live`): the account xpub (m/44'/60'/0') of the BIP39 test seed
# phrase "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon
# about", published in the BIP39 test vectors. Its first deposit address (m/44'/60'/0'/0/0) is
# 0x9858EfFD232B4033E47d90003D41EC34EcaEda94. Anyone can spend from it: local test chains only.
DEMO_XPUB = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5"
             "GFZaM6si3yZdUsT8ddYM3PwnATt")
DEMO_FIRST_ADDRESS = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"

# The live demo's payout mode: the merchant's payout wallet is the local node's second dev account
# (Hardhat's published "test test … junk" accounts, #1), and the operator's key, which deploys the
# forwarder factory and pays the gas of `collect`, is dev account #2's published private key.
# Anyone can spend from both: local test chains only.
DEMO_PAYOUT_ADDRESS = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
DEMO_OPERATOR_KEY = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a"
# The relayer of payments without gas (RELAYER_KEY_FILE): dev account #3's published key, which holds
# the node's gas coin and no token.
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


def ensure(db, path, *, webhook_url, now, allow_loopback=False):
    """The demo merchant saved at `path`, created when missing from the file or the database.
    A `webhook_url` given is set on it either way (`allow_loopback`: WEBHOOK_ALLOW_LOOPBACK, as
    the demo's own inbox is on this machine). Returns (keys, created)."""
    keys = read_keys(path)
    if keys is not None and any(m.id == keys["merchantId"] for m in service.list_all(db)):
        if webhook_url is not None:
            service.set_webhook_url(db, keys["merchantId"], webhook_url, allow_loopback=allow_loopback)
        return keys, False
    merchant, secret_key = service.create(
        db, name="Demo shop", livemode=False, webhook_url=webhook_url, now=now,
        allow_loopback=allow_loopback,
    )
    keys = service.credentials(merchant, secret_key)
    _write_keys(path, keys)
    return keys, True


# The demo's console login (`demo-merchant --console-login`): an owner of the demo merchant.
DEMO_STAFF_EMAIL = "staff@demo.example"


def ensure_staff(db, path, keys, *, now, hash_method):
    """The demo merchant's console owner: (email, password). The password is made at random when the
    user is created and kept in the keys file beside the merchant's keys (mode 0600, test mode only),
    so a later run prints it again; a user whose password the file does not hold gets a new one."""
    password = keys.get("consolePassword")
    user = accounts.user_by_email(db, DEMO_STAFF_EMAIL)
    if user is not None and user.merchant_id != keys["merchantId"]:
        raise service.MerchantError(f"The user {DEMO_STAFF_EMAIL} belongs to another merchant.")
    if user is None or not password:
        password = secrets.token_urlsafe(12)
        if user is None:
            accounts.create_user(db, email=DEMO_STAFF_EMAIL, merchant_id=keys["merchantId"], role="owner",
                                 password=password, now=now, hash_method=hash_method)
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
        if link is not None and links.why_unavailable(
                link, links.payments(db, [link]).get(link.id, 0), now) is None:
            return link, False
    link = links.create(db, merchant, amount=DEMO_LINK["amount"], currency=DEMO_LINK["currency"],
                        description=DEMO_LINK["description"], now=now, success_url=success_url,
                        metadata='{"demo":"coffee"}')
    _write_keys(path, dict(read_keys(path) or keys, paymentLinkId=link.id))
    return link, True
