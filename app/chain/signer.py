"""Sending transactions from an operator's key file: the factory's deployment and `collect`.

The key is read from its file, kept in this object only for the command's run, and never printed,
logged or stored; error messages name the file, never its content. Signing is eth-account's
(`Account.sign_transaction` with EIP-1559 type-2 fields): nothing here builds or signs a
transaction by hand. Fees come from the node: the latest block's base fee and
eth_maxPriorityFeePerGas (eth_feeHistory's median tip when a node lacks it); the nonce is the
node's pending count for the sender.
"""
import re
import sys
import time
from dataclasses import dataclass

from app.chain import canonical, rpc
from app.chain.addresses import to_checksum_address
from app.chain.canonical import Receipt

KEY_PATTERN = re.compile(r"(?:0x)?([0-9a-fA-F]{64})")
RECEIPT_TIMEOUT_SECONDS = 120
GAS_MARGIN = 1.2  # the gas limit sent: the node's estimate plus 20 % (state may change meanwhile)


class SignerError(Exception):
    """A key file that cannot be used; str() says why without quoting it."""


class ChainError(Exception):
    """The node refused, or a transaction failed; str() says what (never the key)."""


def _account_class():
    """eth_account.Account, imported when a command needs it: eth-account imports py_ecc, which
    raises the interpreter's recursion limit to 100,000 (past the C stack); it is put back."""
    limit = sys.getrecursionlimit()
    from eth_account import Account
    sys.setrecursionlimit(limit)
    return Account


def read_key_file(path):
    """The account of the hex private key in `path` (64 hex digits, with or without 0x)."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read(200).strip()
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or "not text"
        raise SignerError(f"Cannot read the key file {path}: {reason}.") from None
    match = KEY_PATTERN.fullmatch(text)
    if match is None:
        raise SignerError(f"The key file {path} must hold one hex private key (64 hex digits, with or"
                          " without 0x) and nothing else.")
    try:
        return _account_class().from_key(bytes.fromhex(match.group(1)))
    except Exception:  # out of the curve's range (0, or >= n): eth-keys raises ValidationError
        raise SignerError(f"The key file {path} does not hold a valid secp256k1 private key.") from None


@dataclass(frozen=True)
class Fees:
    max_fee_per_gas: int
    max_priority_fee_per_gas: int


@dataclass(frozen=True)
class Signed:
    tx_hash: str
    raw: str  # 0x-hex of the signed transaction: public once broadcast, kept to broadcast again
    nonce: int
    gas_limit: int
    max_fee_per_gas: int


class Sender:
    """One key's transactions on one network's node."""

    def __init__(self, client: rpc.Client, chain_id: int, account):
        self.client, self.chain_id, self._account = client, chain_id, account
        self.address = account.address

    def __repr__(self):
        return f"Sender({self.address})"

    def check_chain(self):
        node_chain = self.client.chain_id()
        if node_chain != self.chain_id:
            raise ChainError(f"The node at {rpc.redacted(self.client.url)} serves chain id"
                             f" {node_chain}, not {self.chain_id}: nothing sent.")

    def balance(self, address=None, block="latest") -> int:
        return rpc.quantity(self.client.call("eth_getBalance", [address or self.address, block]),
                    "eth_getBalance")

    def nonce(self) -> int:
        return rpc.quantity(self.client.call("eth_getTransactionCount", [self.address, "pending"]),
                    "eth_getTransactionCount")

    def mined_nonce(self) -> int:
        return rpc.quantity(self.client.call("eth_getTransactionCount", [self.address, "latest"]),
                    "eth_getTransactionCount")

    def block_gas_limit(self) -> int:
        block = self.client.call("eth_getBlockByNumber", ["latest", False])
        return rpc.quantity(block.get("gasLimit") if isinstance(block, dict) else None, "gasLimit")

    def fees(self) -> Fees:
        """maxFeePerGas = 2 × the latest base fee + the tip: room for six full blocks of base fee
        rises (12.5 % each) before the transaction waits; only what is used is paid."""
        block = self.client.call("eth_getBlockByNumber", ["latest", False])
        base = rpc.quantity(block.get("baseFeePerGas") if isinstance(block, dict) else None,
                    "baseFeePerGas (an EIP-1559 network is needed)")
        try:
            tip = rpc.quantity(self.client.call("eth_maxPriorityFeePerGas"), "eth_maxPriorityFeePerGas")
        except rpc.RpcError:
            history = self.client.call("eth_feeHistory", [hex(5), "latest", [50]])
            rewards = [rpc.quantity(r[0], "eth_feeHistory") for r in (history or {}).get("reward") or [] if r]
            tip = sorted(rewards)[len(rewards) // 2] if rewards else 10**9
        return Fees(max_fee_per_gas=2 * base + tip, max_priority_fee_per_gas=tip)

    def estimate(self, to, data) -> int:
        tx = {"from": self.address, "data": "0x" + data.hex()}
        if to is not None:
            tx["to"] = to
        return rpc.quantity(self.client.call("eth_estimateGas", [tx]), "eth_estimateGas")

    def sign(self, *, to, data: bytes, gas_limit: int, fees: Fees, nonce: int) -> Signed:
        tx = {"type": 2, "chainId": self.chain_id, "nonce": nonce, "value": 0, "data": data,
              "gas": gas_limit, "maxFeePerGas": fees.max_fee_per_gas,
              "maxPriorityFeePerGas": fees.max_priority_fee_per_gas}
        if to is not None:
            tx["to"] = to
        signed = self._account.sign_transaction(tx)
        return Signed(tx_hash="0x" + bytes(signed.hash).hex(),
                      raw="0x" + bytes(signed.raw_transaction).hex(), nonce=nonce,
                      gas_limit=gas_limit, max_fee_per_gas=fees.max_fee_per_gas)

    def resign(self, raw: str, fees: Fees) -> Signed:
        """The transaction `raw` (signed by this key) signed again with `fees`: the same nonce,
        recipient, data and gas limit (a replacement, which nodes take only with higher fees)."""
        from eth_account.typed_transactions import TypedTransaction
        from hexbytes import HexBytes

        tx = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
        return self.sign(to=to_checksum_address("0x" + bytes(tx["to"]).hex()), data=bytes(tx["data"]),
                         gas_limit=tx["gas"], fees=fees, nonce=tx["nonce"])

    def broadcast(self, raw: str) -> str:
        """eth_sendRawTransaction; a node that already has it ("already known") is not an error."""
        try:
            return self.client.call("eth_sendRawTransaction", [raw])
        except rpc.RpcError as e:
            text = str(e).lower()
            if "already known" in text or "already imported" in text or "known transaction" in text:
                return None
            raise

    def receipt(self, tx_hash) -> Receipt | None:
        """The transaction's receipt (app/chain/canonical.py reads it strictly), None: not mined."""
        return canonical.receipt(self.client.call("eth_getTransactionReceipt", [tx_hash]), tx_hash)

    def known(self, tx_hash) -> bool:
        """Whether the node has the transaction (pending or mined)."""
        return self.client.call("eth_getTransactionByHash", [tx_hash]) is not None

    def wait(self, tx_hash, timeout=RECEIPT_TIMEOUT_SECONDS, poll=0.5) -> Receipt | None:
        """The receipt, or None when none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.receipt(tx_hash)
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(poll)
