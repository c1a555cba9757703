"""ERC-3009 (`transferWithAuthorization`): what the service needs to let a payer without the
network's gas coin pay. The payer signs an EIP-712 `TransferWithAuthorization` under the token's
domain; the operator's relayer (app/chain/relayer.py) submits it and pays the gas.

- `read_domain`: the token's EIP-712 domain, read from the contract (`eip712Domain()`, EIP-5267,
  where it answers, else `name()` and `version()`, as USDC's FiatToken has them) and accepted only
  when it hashes to the contract's `DOMAIN_SEPARATOR()` and the contract answers
  `authorizationState`.
- `recover`: the address that signed an authorization under a domain (eth-account's EIP-712).
- `calldata`: the one call the relayer ever signs.
"""
from dataclasses import dataclass

from app.evm import rpc
from app.evm.addresses import keccak256, to_checksum_address

AUTHORIZATION_TYPE = [
    {"name": "from", "type": "address"},
    {"name": "to", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "validAfter", "type": "uint256"},
    {"name": "validBefore", "type": "uint256"},
    {"name": "nonce", "type": "bytes32"},
]
DOMAIN_TYPE = [
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
]
DOMAIN_TYPEHASH = keccak256(
    b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")
DOMAIN_FIELDS = 0x0F  # EIP-5267's bitmap of name, version, chainId and verifyingContract


def _selector(signature: str) -> str:
    return keccak256(signature.encode("ascii"))[:4].hex()


EIP712_DOMAIN = _selector("eip712Domain()")
NAME = _selector("name()")
VERSION = _selector("version()")
DOMAIN_SEPARATOR = _selector("DOMAIN_SEPARATOR()")
AUTHORIZATION_STATE = _selector("authorizationState(address,bytes32)")
BALANCE_OF = _selector("balanceOf(address)")
TRANSFER_WITH_AUTHORIZATION = _selector(
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)")


class Eip3009Error(ValueError):
    """The contract is not a usable ERC-3009 token, or an authorization cannot be read; str() says
    why."""


@dataclass(frozen=True)
class Domain:
    name: str
    version: str
    chain_id: int
    verifying_contract: str  # EIP-55

    def separator(self) -> bytes:
        from eth_abi import encode  # here: importing it takes about half a second
        return keccak256(encode(
            ["bytes32", "bytes32", "bytes32", "uint256", "address"],
            [DOMAIN_TYPEHASH, keccak256(self.name.encode("utf-8")),
             keccak256(self.version.encode("utf-8")), self.chain_id, self.verifying_contract]))

    def as_json(self) -> dict:
        return {"name": self.name, "version": self.version, "chainId": self.chain_id,
                "verifyingContract": self.verifying_contract}


@dataclass(frozen=True)
class Authorization:
    """A payer's signed TransferWithAuthorization: addresses EIP-55, value in base units, times in
    unix seconds, nonce and signature as 0x hex (32 and 65 bytes)."""
    from_address: str
    to: str
    value: int
    valid_after: int
    valid_before: int
    nonce: str
    signature: str

    def typed_data(self, domain: Domain) -> dict:
        """The EIP-712 message, as eth_signTypedData_v4 takes it."""
        return {
            "types": {"EIP712Domain": DOMAIN_TYPE, "TransferWithAuthorization": AUTHORIZATION_TYPE},
            "primaryType": "TransferWithAuthorization",
            "domain": domain.as_json(),
            "message": {"from": self.from_address, "to": self.to, "value": self.value,
                        "validAfter": self.valid_after, "validBefore": self.valid_before,
                        "nonce": bytes.fromhex(self.nonce[2:])},
        }

    def vrs(self) -> tuple[int, bytes, bytes]:
        raw = bytes.fromhex(self.signature[2:])
        v = raw[64] + 27 if raw[64] < 27 else raw[64]  # some wallets write v as 0/1
        return v, raw[:32], raw[32:64]


def recover(domain: Domain, authorization: Authorization) -> str | None:
    """The EIP-55 address whose key signed `authorization` under `domain`; None when the signature
    recovers no address (malformed, or s in the upper half of the curve order, which the token
    refuses as well)."""
    from app.evm.signer import _account_class
    # first: it puts back the recursion limit eth-account's import raises
    account = _account_class()
    from eth_account.messages import encode_typed_data
    v, r, s = authorization.vrs()
    if v not in (27, 28) or int.from_bytes(s, "big") > _HALF_ORDER:
        return None
    try:
        message = encode_typed_data(full_message=authorization.typed_data(domain))
        return account.recover_message(message, vrs=(v, r, s))
    except Exception:  # eth-keys' BadSignature, ValidationError: no address
        return None


_HALF_ORDER = 0x7FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF5D576E7357A4501DDFE92F46681B20A0


def calldata(authorization: Authorization) -> bytes:
    """transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s)."""
    from eth_abi import encode
    v, r, s = authorization.vrs()
    return bytes.fromhex(TRANSFER_WITH_AUTHORIZATION) + encode(
        ["address", "address", "uint256", "uint256", "uint256", "bytes32", "uint8", "bytes32",
         "bytes32"],
        [authorization.from_address, authorization.to, authorization.value,
         authorization.valid_after, authorization.valid_before,
         bytes.fromhex(authorization.nonce[2:]), v, r, s])


# --- Reading the token ---------------------------------------------------------------------------

def _call(client, contract, data: str, block="latest"):
    return client.call("eth_call", [{"to": contract, "data": "0x" + data}, block])


def _word(address: str) -> str:
    return address[2:].lower().rjust(64, "0")


def authorization_used(client, token, authorizer, nonce, block="latest") -> bool:
    """The token's authorizationState(authorizer, nonce) at `block`: True once used (or
    cancelled)."""
    answer = rpc.word(_call(client, token, AUTHORIZATION_STATE + _word(authorizer) + nonce[2:],
                            block), "authorizationState")
    if answer > 1:
        raise rpc.RpcError("authorizationState: not a bool")
    return answer == 1


def balance_of(client, token, owner, block="latest") -> int:
    return rpc.word(_call(client, token, BALANCE_OF + _word(owner), block), "balanceOf")


def read_domain(client, contract: str, chain_id: int) -> Domain:
    """The token's EIP-712 domain on `chain_id`, checked (see the module's docstring); Eip3009Error
    saying what is wrong, rpc.RpcError when the node cannot be asked."""
    contract = to_checksum_address(contract)
    domain = _eip5267_domain(client, contract, chain_id)
    if domain is None:
        name = _string_call(client, contract, NAME, "name()")
        version = _string_call(client, contract, VERSION, "version()")
        domain = Domain(name, version, chain_id, contract)
    answer = _answer(client, contract, DOMAIN_SEPARATOR)
    if not (isinstance(answer, str) and len(answer) == 66 and answer.startswith("0x")):
        raise Eip3009Error(f"The contract {contract} does not answer DOMAIN_SEPARATOR(): it is not"
                           " an ERC-3009 token.")
    separator = bytes.fromhex(answer[2:])
    if separator != domain.separator():
        raise Eip3009Error(
            f"The EIP-712 domain read from {contract} (name {domain.name!r}, version"
            f" {domain.version!r}, chain id {chain_id}) does not hash to its DOMAIN_SEPARATOR():"
            " its authorizations could not be checked.")
    try:
        authorization_used(client, contract, "0x" + "00" * 20, "0x" + "00" * 32)
    except rpc.RpcError:
        raise Eip3009Error(f"The contract {contract} does not answer authorizationState(address,"
                           "bytes32): it is not an ERC-3009 token.") from None
    return domain


def _eip5267_domain(client, contract, chain_id) -> Domain | None:
    """The domain eip712Domain() gives, or None when the contract does not answer it (then name()
    and version() are asked). A domain of other fields (a salt, no version) is refused."""
    from eth_abi import decode
    answer = _answer(client, contract, EIP712_DOMAIN)
    try:
        fields, name, version, domain_chain, verifying, _salt, extensions = decode(
            ["bytes1", "string", "string", "uint256", "address", "bytes32", "uint256[]"],
            bytes.fromhex(answer[2:]))
    except Exception:  # reverted (None), "0x" (no such function), garbage: no EIP-5267
        return None
    if fields[0] != DOMAIN_FIELDS or extensions:
        raise Eip3009Error(
            f"The EIP-712 domain of {contract} has the fields {fields[0]:#04x} (EIP-5267): only"
            " name, version, chainId and verifyingContract (0x0f) are supported.")
    if domain_chain != chain_id or to_checksum_address(verifying) != contract:
        raise Eip3009Error(
            f"The EIP-712 domain of {contract} names chain id {domain_chain} and contract"
            f" {to_checksum_address(verifying)}, not chain id {chain_id} and {contract}.")
    return Domain(name, version, chain_id, contract)


def _string_call(client, contract, selector, what) -> str:
    from eth_abi import decode
    answer = _answer(client, contract, selector)
    try:
        (text,) = decode(["string"], bytes.fromhex(answer[2:]))
        return text
    except Exception:  # reverted (None), "0x", garbage
        raise Eip3009Error(f"The contract {contract} answers neither eip712Domain() nor {what}: its"
                           " EIP-712 domain cannot be read.") from None


def _answer(client, contract, selector):
    """An eth_call's answer, None when the call reverted; rpc.RpcError when the node failed."""
    try:
        return _call(client, contract, selector)
    except rpc.RpcError as e:
        if e.code is None:  # unreachable, HTTP error, malformed: the node, not the contract
            raise
        return None
