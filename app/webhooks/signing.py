"""Standard Webhooks signing (https://www.standardwebhooks.com/).

A merchant verifies our deliveries with any Standard Webhooks library, e.g.
``standardwebhooks.webhooks.Webhook(secret).verify(body, headers)``; `verify` below is the same
check, used by the demo shop's built-in receiver.
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
TOLERANCE_SECONDS = 5 * 60  # a delivery timestamped further from now is refused (replay guard)
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


class VerificationError(ValueError):
    """A delivery that does not verify; str() says why (never the expected signature)."""


def verify(secret: str, headers, body: bytes, *, now: int,
           tolerance: int = TOLERANCE_SECONDS) -> None:
    """Check one received delivery against the merchant's ``whsec_`` secret, as a receiver does.

    ``headers``: a mapping with ``get`` (a case-insensitive one such as Flask's ``request.headers``,
    or one with lower-case keys); ``body``: the raw bytes received. Raises `VerificationError` when
    a header is missing, the timestamp is not within ``tolerance`` seconds of ``now`` (either way),
    or no ``v1`` signature in ``webhook-signature`` (space-separated list) matches; the comparison
    is constant-time.
    """
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not (msg_id and timestamp and signatures):
        raise VerificationError("missing webhook-id, webhook-timestamp or webhook-signature header")
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise VerificationError("webhook-timestamp is not unix seconds")
    if abs(int(now) - int(timestamp)) > tolerance:
        raise VerificationError(f"webhook-timestamp is more than {tolerance} s from now")
    expected = base64.b64decode(sign(secret, msg_id, int(timestamp), body)[len("v1,"):])
    matched = False
    for candidate in signatures.split(" "):
        version, _, encoded = candidate.partition(",")
        if version != "v1":
            continue  # other schemes (e.g. v1a, asymmetric) are not ours to check
        try:
            given = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        # Every v1 candidate is compared, no early exit: the time taken tells nothing.
        matched |= hmac.compare_digest(expected, given)
    if not matched:
        raise VerificationError("no matching v1 signature")


@functools.lru_cache(maxsize=1)
def user_agent() -> str:
    try:
        version = importlib.metadata.version(DIST_NAME)
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return f"preorder-service-webhooks/{version}"


def webhook_headers(secrets, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """All headers of one delivery attempt (timestamp = time of this attempt). `secrets`: one
    secret, or several (a rolled secret during its overlap): one space-separated `v1,` signature
    each, in that order; a Standard Webhooks verifier accepts the delivery when any one matches."""
    if isinstance(secrets, str):
        secrets = [secrets]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(s, msg_id, timestamp, body) for s in secrets),
        "Content-Type": "application/json",
        "User-Agent": user_agent(),
    }
