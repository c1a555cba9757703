"""Deposit addresses: a merchant's account xpub checked, its child public keys derived, EIP-55.

The curve and hash work comes from kept libraries: `bip32` (BIP32 derivation and Base58Check, over
`coincurve`, the bindings of Bitcoin Core's libsecp256k1) and `pycryptodome`'s Keccak-256. What
is written here is only the checking of the serialised key and the EIP-55 letter casing.

An xpub is as sensitive as a customer list (whoever holds it can list every payment a merchant
received): it never goes into an exception message, a log line or an API response.
"""
import hashlib
import re
from functools import lru_cache

import coincurve
from bip32 import BIP32
from bip32.base58 import b58decode_check, b58encode_check
from Crypto.Hash import keccak

# BIP32 serialisation version bytes.
PUBLIC_VERSIONS = {bytes.fromhex("0488B21E"): "xpub", bytes.fromhex("043587CF"): "tpub"}
PRIVATE_VERSIONS = {bytes.fromhex("0488ADE4"): "xprv", bytes.fromhex("04358394"): "tprv"}
# SLIP-132 forms of Bitcoin SegWit wallets: right length, wrong kind of account.
OTHER_VERSIONS = {
    bytes.fromhex("049D7CB2"): "ypub", bytes.fromhex("04B24746"): "zpub",
    bytes.fromhex("0295B43F"): "Ypub", bytes.fromhex("02AA7ED3"): "Zpub",
    bytes.fromhex("044A5262"): "upub", bytes.fromhex("045F1CF6"): "vpub",
    bytes.fromhex("049D7878"): "yprv", bytes.fromhex("04B2430C"): "zprv",
    bytes.fromhex("044A4E28"): "uprv", bytes.fromhex("045F18BC"): "vprv",
}
ACCOUNT_DEPTH = 3  # m/44'/60'/0'
HARDENED = 0x8000_0000
MAX_INDEX = HARDENED - 1  # m/…/0/i with i unhardened
ACCOUNT_PATH = "m/44'/60'/0'"
ADDRESS_PATH = ACCOUNT_PATH + "/0/{index}"

NEVER_PRIVATE = (
    "This is an extended PRIVATE key: it controls the merchant's funds and this service must never"
    " be given one. Remove it from wherever it was pasted, and register the account's extended"
    " PUBLIC key (xpub…) instead."
)

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


class XpubError(ValueError):
    """The text is not a usable account xpub; str() says why (never repeating the key)."""


class PrivateKeyGiven(XpubError):
    """An extended private key was given where the public one belongs."""


def parse_xpub(text: str) -> str:
    """Check an account extended public key; return it (surrounding whitespace removed).

    Accepted: Base58Check, 78 bytes, version xpub (0488B21E) or tpub (043587CF), depth 3 (the
    account m/44'/60'/0'), a hardened child number (every BIP44 account level is), and a key that
    is a valid compressed secp256k1 point. An extended private key is refused with NEVER_PRIVATE,
    also when it is recognised only by its 0x00 key byte."""
    if not isinstance(text, str):
        raise XpubError("The xpub must be text.")
    text = text.strip()
    if text[:4] in ("xprv", "tprv", "yprv", "zprv", "uprv", "vprv"):
        raise PrivateKeyGiven(NEVER_PRIVATE)
    if not text or len(text) > 200:
        raise XpubError("This is not an extended public key (expected about 111 characters,"
                        " xpub…).")
    try:
        raw = b58decode_check(text)
    except Exception:  # the library raises ValueError or its own types for bad characters/checksum
        raise XpubError(
            "This is not a valid extended public key: its Base58Check encoding or checksum is wrong"
            " (was it copied whole?)."
        ) from None
    if len(raw) != 78:
        raise XpubError(f"This is not an extended key: it decodes to {len(raw)} bytes, not 78.")
    version, depth, child, key = raw[:4], raw[4], int.from_bytes(raw[9:13], "big"), raw[45:]
    if version in PRIVATE_VERSIONS or key[0] == 0:
        raise PrivateKeyGiven(NEVER_PRIVATE)
    if version not in PUBLIC_VERSIONS:
        kind = OTHER_VERSIONS.get(version)
        if kind:
            raise XpubError(
                f"This is a {kind}, a Bitcoin SegWit account key: register the Ethereum account's"
                f" xpub ({ACCOUNT_PATH})."
            )
        raise XpubError("This extended key has unknown version bytes: expected an xpub or tpub.")
    if depth != ACCOUNT_DEPTH:
        raise XpubError(
            f"This xpub is at depth {depth}; the account key {ACCOUNT_PATH} (depth 3) is needed."
        )
    if not child & HARDENED:
        raise XpubError(
            f"This xpub's last derivation step is not hardened; the account key {ACCOUNT_PATH} is"
            " needed."
        )
    if key[0] not in (2, 3):
        raise XpubError("This xpub's key is not a compressed public key.")
    try:
        coincurve.PublicKey(key)
    except ValueError:
        raise XpubError("This xpub's key is not a point of the secp256k1 curve.") from None
    return text


def spellings(xpub: str) -> set[str]:
    """The texts of one checked account key under each public version (xpub and tpub): the same
    key, so the same deposit addresses, whichever prefix it was registered with."""
    body = b58decode_check(xpub)[4:]
    return {b58encode_check(version + body).decode("ascii") for version in PUBLIC_VERSIONS}


def keccak256(data: bytes) -> bytes:
    return keccak.new(digest_bits=256, data=data).digest()


def to_checksum_address(address: str) -> str:
    """EIP-55 casing of a 0x + 40 hex address (any casing in)."""
    if not _ADDRESS.fullmatch(address):
        raise ValueError("An address is 0x followed by 40 hexadecimal digits.")
    lower = address[2:].lower()
    digest = keccak256(lower.encode("ascii")).hex()
    return "0x" + "".join(c.upper() if int(d, 16) >= 8 else c
                          for c, d in zip(lower, digest, strict=False))


def is_checksum_valid(address: str) -> bool:
    """True when the address is all-lowercase, all-uppercase, or correctly EIP-55 cased."""
    if not _ADDRESS.fullmatch(address):
        return False
    body = address[2:]
    if body == body.lower() or body == body.upper():
        return True
    return to_checksum_address(address) == address


def public_key_address(compressed_public_key: bytes) -> str:
    """The EIP-55 address of a public key: the last 20 bytes of Keccak-256 of its 64-byte X‖Y."""
    point = coincurve.PublicKey(compressed_public_key).format(compressed=False)[1:]
    return to_checksum_address("0x" + keccak256(point)[-20:].hex())


def deposit_address(xpub: str, index: int) -> str:
    """The address of m/44'/60'/0'/0/index from the account xpub (public derivation only)."""
    if not isinstance(index, int) or not 0 <= index <= MAX_INDEX:
        raise ValueError(f"address index out of range: {index}")
    return public_key_address(_external_chain(xpub).get_pubkey_from_path([index]))


@lru_cache(maxsize=64)
def _external_chain(xpub: str) -> BIP32:
    """The node m/44'/60'/0'/0 of an account xpub: derived once per xpub and process, so that an
    address costs one public derivation step (confirm derives inside the write transaction)."""
    account = BIP32.from_xpub(xpub)
    chaincode, pubkey = account.get_extended_pubkey_from_path([0])
    return BIP32(chaincode, pubkey=pubkey, depth=account.depth + 1, index=0,
                 fingerprint=account.get_fingerprint(), network=account.network)


def fingerprint(xpub: str) -> str:
    """A short, non-reversible tag telling xpubs apart in operator output."""
    return hashlib.sha256(xpub.encode("ascii")).hexdigest()[:12]
