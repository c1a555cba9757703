"""Deposit addresses: the xpub's checks, BIP32 public derivation against BIP32's published test
vectors, addresses cross-checked with eth-account's HD wallet, EIP-55 against EIP-55's vectors, and
the hand-written ERC-20 transfer call data against eth-abi (docs/api.md says why both stay by
hand)."""
import sys

import pytest
from bip32 import BIP32
from bip32.base58 import b58decode_check, b58encode_check

from app.evm import addresses
from app.evm.addresses import NEVER_PRIVATE, PrivateKeyGiven, XpubError
from app.evm.logs import transfer_calldata

# eth-account imports py_ecc, which raises the interpreter's recursion limit to 100,000 for good:
# past the C stack, so the deep-JSON guard (tests/api/test_hostile_input.py) would crash the whole
# test process instead of raising RecursionError. Put the limit back.
_recursion_limit = sys.getrecursionlimit()
from eth_account import Account  # noqa: E402

sys.setrecursionlimit(_recursion_limit)

MNEMONIC = ("abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon"
            " abandon about")
# m/44'/60'/0' of MNEMONIC (BIP39 test mnemonic, empty passphrase).
XPUB = ("xpub6DCoCpSuQZB2jawqnGMEPS63ePKWkwWPH4TU45Q7LPXWuNd8TMtVxRrgjtEshuqpK3mdhaWHPFsBngh5GF"
        "ZaM6si3yZdUsT8ddYM3PwnATt")
XPRV_MASTER = ("xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5k"
               "ejMRNNU3TGtRBeJgk33yuGBxrMPHi")

# BIP32 test vector 1: m/0H/1/2H, and its public descendants m/0H/1/2H/2 and m/0H/1/2H/2/1000000000.
V1_M_0H_1_2H = ("xpub6D4BDPcP2GT577Vvch3R8wDkScZWzQzMMUm3PWbmWvVJrZwQY4VUNgqFJPMM3No2dFDFGTsxxpG5"
                "uJh7n7epu4trkrX7x7DogT5Uv6fcLW5")
V1_M_0H_1_2H_2 = ("xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1Z"
                  "ACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV")
V1_M_0H_1_2H_2_1000000000 = ("xpub6H1LXWLaKsWFhvm6RVpEL9P4KfRZSW7abD2ttkWP3SSQvnyA8FSVqNTEcYFgJS2"
                             "UaFcxupHiYkro49S8yGasTvXEYBVPamhGW6cFJodrTHy")
# BIP32 test vector 2: m/0 and its public child m/0/... is hardened next; m/0/2147483647H/1 from
# m/0/2147483647H is public.
V2_M_0_2147483647H = ("xpub6ASAVgeehLbnwdqV6UKMHVzgqAG8Gr6riv3Fxxpj8ksbH9ebxaEyBLZ85ySDhKiLDBrQS"
                      "ARLq1uNRts8RuJiHjaDMBU4Zn9h8LZNnBC5y4a")
V2_M_0_2147483647H_1 = ("xpub6DF8uhdarytz3FWdA8TvFSvvAh8dP3283MY7p2V4SeE2wyWmG5mg5EwVvmdMVCQcoNJx"
                        "GoWaU9DCWh89LojfZ537wTfunKau47EL2dhHKon")


@pytest.mark.parametrize("parent, path, child", [
    (V1_M_0H_1_2H, "m/2", V1_M_0H_1_2H_2),
    (V1_M_0H_1_2H, "m/2/1000000000", V1_M_0H_1_2H_2_1000000000),
    (V1_M_0H_1_2H_2, "m/1000000000", V1_M_0H_1_2H_2_1000000000),
    (V2_M_0_2147483647H, "m/1", V2_M_0_2147483647H_1),
])
def test_public_derivation_matches_bip32_test_vectors(parent, path, child):
    """The derivation deposit_address uses (public only, from an xpub) gives the published keys."""
    wallet = BIP32.from_xpub(parent)
    assert wallet.privkey is None
    assert wallet.get_xpub_from_path(path) == child
    child_key = b58decode_check(child)[45:]
    assert wallet.get_pubkey_from_path(path) == child_key


def test_vector_1_account_key_is_accepted():
    """m/0H/1/2H is depth 3 with a hardened last step: a valid account key."""
    assert addresses.parse_xpub(V1_M_0H_1_2H) == V1_M_0H_1_2H


def test_the_test_mnemonic_first_address_is_the_well_known_one():
    assert addresses.deposit_address(XPUB, 0) == "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"


def test_addresses_match_eth_account_hd_wallet_for_many_indexes():
    Account.enable_unaudited_hdwallet_features()
    indexes = list(range(40)) + [99, 1000, 65_535, 1_000_000, 2**31 - 1]
    for i in indexes:
        expected = Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}").address
        assert addresses.deposit_address(XPUB, i) == expected, i
    assert len({addresses.deposit_address(XPUB, i) for i in indexes}) == len(indexes)


def test_index_out_of_range_is_refused():
    for bad in (-1, 2**31, "1"):
        with pytest.raises(ValueError):
            addresses.deposit_address(XPUB, bad)


@pytest.mark.parametrize("address", [
    # EIP-55's own test vectors.
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
])
def test_eip55(address):
    assert addresses.to_checksum_address(address.lower()) == address
    assert addresses.to_checksum_address("0x" + address[2:].upper()) == address
    assert addresses.is_checksum_valid(address)
    assert addresses.is_checksum_valid(address.lower())
    wrong = address[:-1] + (address[-1].swapcase() if address[-1].isalpha() else "0")
    if wrong != address and wrong[2:] not in (wrong[2:].lower(), wrong[2:].upper()):
        assert not addresses.is_checksum_valid(wrong)


def _reencode(xpub, *, version=None, depth=None, child=None, key=None):
    raw = bytearray(b58decode_check(xpub))
    if version is not None:
        raw[0:4] = bytes.fromhex(version)
    if depth is not None:
        raw[4] = depth
    if child is not None:
        raw[9:13] = child.to_bytes(4, "big")
    if key is not None:
        raw[45:] = key
    return b58encode_check(bytes(raw)).decode()


def test_account_xpub_and_tpub_accepted():
    assert addresses.parse_xpub("  " + XPUB + "\n") == XPUB
    tpub = _reencode(XPUB, version="043587CF")
    assert tpub.startswith("tpub")
    assert addresses.parse_xpub(tpub) == tpub


@pytest.mark.parametrize("text", [
    XPRV_MASTER,
    BIP32.from_xpriv(XPRV_MASTER).get_xpriv_from_path("m/44'/60'/0'"),
    # tprv, and a private key behind public version bytes (its key byte is 0x00).
    _reencode(BIP32.from_xpriv(XPRV_MASTER).get_xpriv_from_path("m/44'/60'/0'"),
              version="04358394"),
    _reencode(BIP32.from_xpriv(XPRV_MASTER).get_xpriv_from_path("m/44'/60'/0'"),
              version="0488B21E"),
])
def test_extended_private_keys_are_refused_with_the_never_message(text):
    with pytest.raises(PrivateKeyGiven) as info:
        addresses.parse_xpub(text)
    assert str(info.value) == NEVER_PRIVATE
    assert "must never be given one" in str(info.value)
    assert text not in str(info.value)


@pytest.mark.parametrize("text, message", [
    ("", "This is not an extended public key (expected about 111 characters, xpub…)."),
    ("x" * 201, "This is not an extended public key (expected about 111 characters, xpub…)."),
    (XPUB[:-1] + ("u" if XPUB[-1] != "u" else "v"),
     "This is not a valid extended public key: its Base58Check encoding or checksum is wrong (was"
     " it copied whole?)."),
    ("xpub0OIl", "This is not a valid extended public key: its Base58Check encoding or checksum is"
     " wrong (was it copied whole?)."),
    (b58encode_check(b"\x04\x88\xb2\x1e" + bytes(70)).decode(),
     "This is not an extended key: it decodes to 74 bytes, not 78."),
    (BIP32.from_xpriv(XPRV_MASTER).get_xpub_from_path("m"),
     "This xpub is at depth 0; the account key m/44'/60'/0' (depth 3) is needed."),
    (BIP32.from_xpriv(XPRV_MASTER).get_xpub_from_path("m/44'/60'/0'/0"),
     "This xpub is at depth 4; the account key m/44'/60'/0' (depth 3) is needed."),
    (_reencode(XPUB, child=0),
     "This xpub's last derivation step is not hardened; the account key m/44'/60'/0' is needed."),
    (_reencode(XPUB, version="04B24746"),
     "This is a zpub, a Bitcoin SegWit account key: register the Ethereum account's xpub"
     " (m/44'/60'/0')."),
    (_reencode(XPUB, version="01020304"),
     "This extended key has unknown version bytes: expected an xpub or tpub."),
    (_reencode(XPUB, key=b"\x04" + bytes(32)), "This xpub's key is not a compressed public key."),
    (_reencode(XPUB, key=b"\x02" + b"\xff" * 32),
     "This xpub's key is not a point of the secp256k1 curve."),
])
def test_unusable_xpubs_are_refused_with_a_reason(text, message):
    with pytest.raises(XpubError) as info:
        addresses.parse_xpub(text)
    assert not isinstance(info.value, PrivateKeyGiven)
    assert str(info.value) == message


def test_the_merchant_recipe_in_docs_gives_the_account_xpub():
    """docs/payments.md's offline recipe (BIP39 seed with the standard library, then bip32)."""
    import hashlib
    import unicodedata

    words = unicodedata.normalize("NFKD", " ".join(MNEMONIC.split()))
    seed = hashlib.pbkdf2_hmac("sha512", words.encode(), b"mnemonic", 2048)
    assert BIP32.from_seed(seed).get_xpub_from_path("m/44'/60'/0'") == XPUB


def test_a_tpub_derives_the_same_addresses_as_its_xpub():
    tpub = _reencode(XPUB, version="043587CF")
    assert [addresses.deposit_address(tpub, i) for i in range(3)] == [
        addresses.deposit_address(XPUB, i) for i in range(3)]


@pytest.mark.parametrize("amount", [0, 1, 19_990_000, 2**256 - 1])
def test_transfer_calldata_is_what_eth_abi_encodes(amount):
    from eth_abi import encode
    to = "0x9858EfFD232B4033E47d90003D41EC34EcaEda94"
    selector = addresses.keccak256(b"transfer(address,uint256)")[:4]
    assert transfer_calldata(to, amount) == "0x" + (
        selector + encode(["address", "uint256"], [to, amount])).hex()
