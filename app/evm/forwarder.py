"""The payout mode's deposit addresses: CREATE2 addresses of the forwarder factory.

The contract is app/evm/contracts/ForwarderFactory.sol; its compiled form (ABI, creation and
runtime code, and the Forwarder's creation code that every deposit address is computed from) is
the committed app/evm/contracts/ForwarderFactory.json, which tests/chain/compile-forwarder.js
reproduces byte for byte. docs/payments.md says what the contract can and cannot do.

Two versions exist. Version 2 (deployed by `networks deploy-factory`) logs the gas coin each
deposit address sends; version 1, the first release's (ForwarderFactory-v1.*), does not. A network
keeps the factory it has, with its version (network_factories.version): a deposit address is
computed with its own factory's Forwarder code, so an address handed out never changes meaning.

A deposit address is keccak256(0xff ‖ factory ‖ salt ‖ keccak256(init code))[12:] (EIP-1014), the
init code being the Forwarder's creation code followed by abi.encode(payout): the payout address is
part of the address, the token does not take part, so one process has one address whatever the
customer pays with. Pure computation: no node is needed.
"""
import json
from functools import lru_cache
from pathlib import Path

from app.evm.addresses import keccak256, to_checksum_address

_CONTRACTS = Path(__file__).resolve().parent / "contracts"
BUILD = _CONTRACTS / "ForwarderFactory.json"  # the current version's
BUILDS = {1: _CONTRACTS / "ForwarderFactory-v1.json", 2: BUILD}
VERSION = 2  # what deploy-factory deploys
COLLECT_SIGNATURE = "collect(address[],(address,bytes32[])[])"
COLLECT_SELECTOR = keccak256(COLLECT_SIGNATURE.encode("ascii"))[:4]


@lru_cache(maxsize=2)
def _build(version: int = VERSION) -> dict:
    return json.loads(BUILDS[version].read_text())


@lru_cache(maxsize=16)
def _code(contract: str, kind: str, version: int = VERSION) -> bytes:
    return bytes.fromhex(_build(version)[contract][kind][2:])


def logs_gas_coin(version: int) -> bool:
    """Whether the factory's forwarders log the gas coin they send (version 2 on)."""
    return version >= 2


def _address_bytes(address: str) -> bytes:
    """20 bytes of a 0x address (any casing; the caller checks EIP-55 where it matters)."""
    return bytes.fromhex(to_checksum_address(address)[2:])


def salt(process_id: str) -> bytes:
    """The CREATE2 salt of a process: 16 zero bytes, then the first 16 bytes of keccak256 of the
    id's UTF-8 bytes. 128 bits keep two processes of one payout address apart (a collision is
    expected after about 2**64 of them); the zero half makes each salt cost 192 gas less in the
    `collect` call's data (a zero byte of calldata costs 4 gas, any other 16)."""
    if not isinstance(process_id, str) or not process_id:
        raise ValueError("A process id is a non-empty string.")
    return bytes(16) + keccak256(process_id.encode("utf-8"))[:16]


def _check_salt(value: bytes) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != 32:
        raise ValueError("A salt is 32 bytes.")
    return bytes(value)


def forwarder_init_code(payout: str, version: int = VERSION) -> bytes:
    """The init code of the forwarder of `payout`'s deposit addresses: creation code ‖
    abi.encode(payout)."""
    return _code("Forwarder", "bytecode", version) + _address_bytes(payout).rjust(32, b"\0")


def deposit_address(factory: str, payout: str, salt: bytes, version: int = VERSION) -> str:
    """The EIP-55 deposit address of (payout, salt) under `factory`, a factory of `version`
    (EIP-1014 CREATE2)."""
    digest = keccak256(b"\xff" + _address_bytes(factory) + _check_salt(salt)
                       + keccak256(forwarder_init_code(payout, version)))
    return to_checksum_address("0x" + digest[12:].hex())


def factory_creation_code(version: int = VERSION) -> bytes:
    """The transaction data that deploys the factory (no constructor arguments)."""
    return _code("ForwarderFactory", "bytecode", version)


def factory_version(runtime_code: bytes) -> int | None:
    """The version whose runtime code `runtime_code` (eth_getCode at an address) is exactly, or
    None."""
    return next((v for v in BUILDS if bytes(runtime_code) == _code("ForwarderFactory",
                                                                   "deployedBytecode", v)), None)


def collect_calldata(tokens: list[str], deposits: list[tuple[str, bytes]]) -> bytes:
    """The data of one factory call moving each listed token's balance, and the gas coin, out of
    every (payout, salt) deposit address to its payout address. Anyone may send it.

    The call groups the salts by payout address (in the order first listed), so a batch of one
    merchant's addresses carries its payout address once. A deposit or token listed twice is
    listed once (the factory refuses to create the same address twice in one call)."""
    token_list = list(dict.fromkeys(to_checksum_address(t) for t in tokens))
    groups: dict[str, dict[bytes, None]] = {}
    for payout, value in deposits:
        groups.setdefault(to_checksum_address(payout), {})[_check_salt(value)] = None
    payouts = [(payout, list(salts)) for payout, salts in groups.items()]
    from eth_abi import (
        encode,  # here, not at the top: its import is slow, and few commands need it
    )

    return COLLECT_SELECTOR + encode(["address[]", "(address,bytes32[])[]"], [token_list, payouts])


def collect_arguments(data: bytes) -> tuple[list[str], list[tuple[str, bytes]]] | None:
    """What `collect_calldata` wrote: (tokens, [(payout, salt)]) of a factory call's data, EIP-55
    addresses; None when the data is not such a call."""
    from eth_abi import decode
    from eth_abi.exceptions import DecodingError

    if data[:4] != COLLECT_SELECTOR:
        return None
    try:
        tokens, payouts = decode(["address[]", "(address,bytes32[])[]"], data[4:])
    except (DecodingError, ValueError, OverflowError):
        return None
    return ([to_checksum_address(t) for t in tokens],
            [(to_checksum_address(payout), bytes(s)) for payout, salts in payouts for s in salts])
