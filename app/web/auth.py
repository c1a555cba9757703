"""Who is calling: the merchant behind x-secret-key (server side) or x-public-key (browser)."""
from functools import wraps

from flask import g, request

from app.clock import now
from app.core.keys import looks_like_public_key
from app.db import get_db
from app.domain import merchants
from app.web.errors import ApiError


def _admitted(merchant, invalid_code, invalid_message):
    """The merchant, unless the key was unknown or it is disabled."""
    if merchant is None:
        raise ApiError(401, invalid_code, invalid_message)
    if merchant.disabled:
        raise ApiError(403, "merchant_disabled", "This merchant account is disabled.")
    return merchant


def refuse_browsers():
    """Before every merchant-API request, CORS preflights included: a request with an Origin
    header comes from a browser, where a secret key must never be. No CORS headers are sent."""
    if "Origin" in request.headers:
        raise ApiError(
            403,
            "browser_request_forbidden",
            "Secret-key endpoints cannot be called from a browser; call them from your server"
            " and keep the secret key out of frontend code.",
        )


def require_secret_key(view):
    """Merchant API guard. Runs before the body is read; sets g.merchant."""

    @wraps(view)
    def guarded(*args, **kwargs):
        g.merchant = merchant_for_secret_key(request.headers.get("x-secret-key", ""))
        return view(*args, **kwargs)

    return guarded


def merchant_for_secret_key(key):
    """The active merchant holding this secret key, else the ApiError the merchant API answers.
    Also used by the demo shop's server side, which holds the demo merchant's key."""
    if not key:
        raise ApiError(401, "missing_secret_key",
                       "Send your secret key in the x-secret-key header.")
    if looks_like_public_key(key):
        raise ApiError(
            401,
            "invalid_secret_key",
            "x-secret-key holds a public key (pk_...); the merchant API needs your secret key"
            " (sk_...), sent from your server.",
        )
    merchant = merchants.by_secret_key(get_db(), key, now())
    return _admitted(merchant, "invalid_secret_key", "Invalid secret key.")


def require_public_key(view):
    """Button API guard: browsers may call it. Sets g.merchant from x-public-key."""

    @wraps(view)
    def guarded(*args, **kwargs):
        key = request.headers.get("x-public-key", "")
        if not key:
            raise ApiError(401, "missing_public_key",
                           "Send the public key in the x-public-key header.")
        if key.startswith(("sk_test_", "sk_live_")):
            raise ApiError(
                401,
                "invalid_public_key",
                "x-public-key holds a secret key: a secret key must never be in frontend code."
                " Use the public key (pk_...), and rotate the exposed secret key now.",
            )
        g.merchant = _admitted(
            merchants.by_public_key(get_db(), key), "invalid_public_key", "Invalid public key."
        )
        return view(*args, **kwargs)

    return guarded
