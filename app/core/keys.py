"""Merchant credentials: generation and hashing. Only hashes of secret keys are ever stored."""
import hashlib
import secrets
import string

BASE62 = string.digits + string.ascii_letters
KEY_RANDOM_CHARS = 40  # docs/contract.md asks for at least 32
KEY_PREFIX_LENGTH = 20  # "sk_test_" + 12 random characters: enough to tell keys apart


def _random_base62(n=KEY_RANDOM_CHARS):
    return "".join(secrets.choice(BASE62) for _ in range(n))


def new_secret_key(livemode: bool) -> str:
    return ("sk_live_" if livemode else "sk_test_") + _random_base62()


def new_public_key(livemode: bool) -> str:
    return ("pk_live_" if livemode else "pk_test_") + _random_base62()


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def key_prefix(key: str) -> str:
    return key[:KEY_PREFIX_LENGTH]


def looks_like_public_key(value: str) -> bool:
    return value.startswith(("pk_test_", "pk_live_"))
