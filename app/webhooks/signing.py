"""Standard Webhooks signing (https://www.standardwebhooks.com/).

A merchant verifies our deliveries with any Standard Webhooks library, e.g.
``standardwebhooks.webhooks.Webhook(secret).verify(body, headers)``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import importlib.metadata
import secrets

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
DIST_NAME = "preorder-service"


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _key(secret: str) -> bytes:
    encoded = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    # Accept unpadded base64 as the reference libraries do.
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("webhook secret is not valid base64") from None
    if not key:
        raise ValueError("webhook secret is empty")
    return key


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">``."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise TypeError("timestamp must be int unix seconds")
    if not isinstance(body, bytes):
        raise TypeError("body must be the exact bytes sent")
    to_sign = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), to_sign, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


@functools.lru_cache(maxsize=1)
def user_agent() -> str:
    try:
        version = importlib.metadata.version(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return f"preorder-service-webhooks/{version}"


def webhook_headers(secret: str, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """All headers of one delivery attempt (timestamp = time of this attempt)."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
        "Content-Type": "application/json",
        "User-Agent": user_agent(),
    }
