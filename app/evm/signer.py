"""Sending transactions from an operator's key file: the factory's deployment and `collect`.

The key is read from its file, kept in this object only for the command's run, and never printed,
logged or stored; error messages name the file, never its content. Signing is eth-account's
(`Account.sign_transaction` with EIP-1559 type-2 fields): nothing here builds or signs a
transaction by hand. Fees come from the node, bounded (`Sender.fees`): the latest block's base fee
and eth_maxPriorityFeePerGas (eth_feeHistory's median tip when a node lacks it), the tip at most
what recent blocks paid, and nothing above the operator's ceiling for the network (`networks
set-max-fee`): one node's answer never sets what a transaction costs. The nonce is the node's
pending count for the sender.
"""
import re
import sys
import time
from dataclasses import dataclass
from decimal import Decimal

from app.evm import canonical, rpc
from app.evm.addresses import to_checksum_address
from app.evm.canonical import Receipt

KEY_PATTERN = re.compile(r"(?:0x)?([0-9a-fA-F]{64})")
RECEIPT_TIMEOUT_SECONDS = 120
GAS_MARGIN = 1.2  # the gas limit sent: the node's estimate plus 20 % (state may change meanwhile)
FEE_HISTORY_BLOCKS = 10  # the recent blocks whose tips bound the one paid
DEFAULT_TIP = 10**9  # wei: the tip when the node answers neither tip method


class SignerError(Exception):
    """A key file that cannot be used; str() says why without quoting it."""


class ChainError(Exception):
    """The node refused, or a transaction failed; str() says what (never the key)."""


class FeesTooHigh(ChainError):
    """The network's fees are above the operator's ceiling for it: nothing is signed."""


def gwei(wei: int) -> str:
    """Wei as an exact decimal of gwei ("30", "0.05")."""
    text = format(Decimal(wei) / 10**9, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


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
        raise SignerError(f"The key file {path} must hold one hex private key (64 hex digits,"
                          " with or without 0x) and nothing else.")
    try:
        return _account_class().from_key(bytes.fromhex(match.group(1)))
    except Exception:  # out of the curve's range (0, or >= n): eth-keys raises ValidationError
        raise SignerError(f"The key file {path} does not hold a valid secp256k1 private"
                          " key.") from None


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


class Reader:
    """A network's node read as a Sender reads its transactions, with no key: nothing is signed
    or sent (the chain watcher settling collections: collection_records.settle_watched)."""

    address = None  # no key

    def __init__(self, client: rpc.Client):
        self.client = client

    def __repr__(self):
        return f"Reader({rpc.redacted(self.client.url)})"

    def receipt(self, tx_hash) -> Receipt | None:
        """The transaction's receipt (app/evm/canonical.py reads it strictly), None: not mined."""
        return canonical.receipt(self.client.call("eth_getTransactionReceipt", [tx_hash]), tx_hash)

    def known(self, tx_hash) -> bool:
        """Whether the node has the transaction (pending or mined)."""
        return self.client.call("eth_getTransactionByHash", [tx_hash]) is not None


class Sender(Reader):
    """One key's transactions on one network's node."""

    def __init__(self, client: rpc.Client, chain_id: int, account, *, max_fee_per_gas):
        """`max_fee_per_gas`: the network's ceiling (wei; None: none), `Network.max_fee_per_gas`:
        a keyword every caller must give, so no sender of the service forgets it."""
        self.client, self.chain_id, self._account = client, chain_id, account
        self.address = account.address
        self.ceiling = max_fee_per_gas

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

    def mined_nonce(self, block="latest") -> int:
        return rpc.quantity(self.client.call("eth_getTransactionCount", [self.address, block]),
                    "eth_getTransactionCount")

    def block_gas_limit(self) -> int:
        block = self.client.call("eth_getBlockByNumber", ["latest", False])
        return rpc.quantity(block.get("gasLimit") if isinstance(block, dict) else None, "gasLimit")

    def fees(self) -> Fees:
        """maxFeePerGas = 2 × the latest base fee + the tip: room for six full blocks of base fee
        rises (12.5 % each) before the transaction waits; only what is used is paid. The tip is the
        node's eth_maxPriorityFeePerGas, at most the base fee or the highest 90th-percentile tip of
        the last FEE_HISTORY_BLOCKS blocks, whichever is larger (a tip paid in full to the block's
        producer: one node's 1,000 gwei answer must not be). Under the operator's ceiling, the max
        fee is cut to it; FeesTooHigh when even the base fee and the tip are above it."""
        block = self.client.call("eth_getBlockByNumber", ["latest", False])
        base = rpc.quantity(block.get("baseFeePerGas") if isinstance(block, dict) else None,
                    "baseFeePerGas (an EIP-1559 network is needed)")
        medians, highs = self._recent_tips()
        try:
            tip = rpc.quantity(self.client.call("eth_maxPriorityFeePerGas"),
                               "eth_maxPriorityFeePerGas")
        except rpc.RpcError:
            tip = sorted(medians)[len(medians) // 2] if medians else DEFAULT_TIP
        tip = min(tip, max([base, *highs]))
        max_fee = 2 * base + tip
        if self.ceiling is not None:
            if base + tip > self.ceiling:
                raise FeesTooHigh(
                    f"The fees on chain id {self.chain_id} ({gwei(base)} gwei base fee +"
                    f" {gwei(tip)} gwei tip) are above the ceiling of {gwei(self.ceiling)} gwei set"
                    " for it (networks set-max-fee): nothing sent.")
            max_fee = min(max_fee, self.ceiling)
        return Fees(max_fee_per_gas=max_fee, max_priority_fee_per_gas=tip)

    def _recent_tips(self) -> tuple[list, list]:
        """(median tips, 90th-percentile tips) of the last FEE_HISTORY_BLOCKS blocks; empty when the
        node does not serve eth_feeHistory."""
        try:
            history = self.client.call("eth_feeHistory",
                                       [hex(FEE_HISTORY_BLOCKS), "latest", [50, 90]])
            rewards = [r for r in (history or {}).get("reward") or []
                       if isinstance(r, list) and len(r) == 2]
            return ([rpc.quantity(r[0], "eth_feeHistory") for r in rewards],
                    [rpc.quantity(r[1], "eth_feeHistory") for r in rewards])
        except (rpc.RpcError, AttributeError):
            return [], []

    def estimate(self, to, data, block=None) -> int:
        """eth_estimateGas of the call from this key; `block` "pending": on the state with the
        node's pending transactions (None: the node's default)."""
        tx = {"from": self.address, "data": "0x" + data.hex()}
        if to is not None:
            tx["to"] = to
        params = [tx] if block is None else [tx, block]
        return rpc.quantity(self.client.call("eth_estimateGas", params), "eth_estimateGas")

    def sign(self, *, to, data: bytes, gas_limit: int, fees: Fees, nonce: int) -> Signed:
        """The signed transaction; FeesTooHigh above the ceiling (a replacement's bump too)."""
        if self.ceiling is not None and fees.max_fee_per_gas > self.ceiling:
            raise FeesTooHigh(
                f"A transaction paying up to {gwei(fees.max_fee_per_gas)} gwei per gas on chain id"
                f" {self.chain_id} is above the ceiling of {gwei(self.ceiling)} gwei set for it"
                " (networks set-max-fee): nothing sent.")
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
        return self.sign(to=to_checksum_address("0x" + bytes(tx["to"]).hex()),
                         data=bytes(tx["data"]), gas_limit=tx["gas"], fees=fees, nonce=tx["nonce"])

    def broadcast(self, raw: str) -> str:
        """eth_sendRawTransaction; a node that already has it ("already known") is not an error."""
        try:
            return self.client.call("eth_sendRawTransaction", [raw])
        except rpc.RpcError as e:
            text = str(e).lower()
            if "already known" in text or "already imported" in text or "known transaction" in text:
                return None
            raise

    def wait(self, tx_hash, timeout=RECEIPT_TIMEOUT_SECONDS, poll=0.5) -> Receipt | None:
        """The receipt, or None when none came within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.receipt(tx_hash)
            if found is not None or time.monotonic() >= deadline:
                return found
            time.sleep(poll)
