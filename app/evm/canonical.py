"""Proof that a block is on the chain the watcher keeps, for what refunds and collections record.

An RPC provider is a pool of nodes, and one of them may answer from an abandoned fork or another
chain: a log or a receipt is recorded only when the header of its block, read in the same step, has
its block hash and is linked to the kept chain of hashes (chain_blocks, kept by the chain watcher,
whose every poll checks its newest kept block against the node and whose rows each extend the one
below; app/chain/proofs.py reads it and proves blocks against it, with `linked` here). Linked: the
headers from the block up to the lowest kept block at or above it are read, each one's parent hash
is the hash of the one below, and the top one's hash is the kept one. That kept block is the proof's
anchor: a block hash commits to every block below it, so while the anchor stays kept with its hash,
the block is still on the chain, and no node needs to be asked again.

The headers read are those between each block and its anchor: in steady state the watcher keeps a
block per poll, so one or two; after a long pause, up to one watcher step (MAX_RANGE blocks).
"""
from dataclasses import dataclass

from app.evm import rpc
from app.evm.logs import TRANSFER_TOPIC, get_logs, is_too_large, parse_transfer_log
from app.evm.pins import Pins
from app.evm.rpc import RpcError


class NotProven(RpcError):
    """The node's chain does not link to the kept one at these blocks (an abandoned fork, another
    chain, or a reorganisation the watcher has not read yet), or no kept block is at or above them:
    the step records nothing and is tried again."""


def linked(headers, number, anchor, anchor_hash):
    """NotProven unless the headers ({number: Header or None}) from `number` up to block `anchor`
    each name the one below as their parent and the top one's hash is `anchor_hash`: then block
    `number` is an ancestor of that anchor, on whatever node answered (a hash commits to the
    parent's)."""
    for n in range(number, anchor):
        below, above = headers.get(n), headers.get(n + 1)
        if below is None or above is None or above.parent_hash != below.hash:
            raise NotProven(f"block {n + 1} does not extend block {n} on the node: not the kept"
                            " chain")
    top = headers.get(anchor)
    if top is None or top.hash != anchor_hash:
        raise NotProven(f"the node's block {anchor} is not the kept one: another fork or chain, or"
                        " a reorganisation the watcher has not read yet")


KEEP_BLOCKS = 64  # block hashes the watcher keeps below the window that can still change


def kept_floor(head, confirmations, deep_enough) -> int:
    """The lowest block whose kept hash the watcher keeps for sure: KEEP_BLOCKS below the blocks
    that do not count yet (above `deep_enough`, by the finality tag, or within the confirmations),
    to find a fork point. Lower ones it prunes (app/data/transfers.py, prune_blocks)."""
    return min(head - confirmations, deep_enough - 1) - KEEP_BLOCKS


def deep_enough(network, head) -> int:
    """The highest block whose transfers count, for what is read apart from the watcher's poll (a
    collection's receipt): `confirmations` deep below `head`, or under a finality mode the tag's
    block the watcher last read in one batch with its kept block (-1 before its first poll)."""
    if network.finality == "confirmations":
        return head - network.confirmations + 1
    return network.tag_block if network.tag_block is not None else -1


def recheck_from(kept, floor) -> int:
    """The lowest anchor worth looking at again: an anchor at or above the watcher's kept floor or
    above the lowest kept block is gone only because a reorganisation made the watcher forget it;
    one below both may have been pruned, and nothing is known of it any more."""
    return min(min(kept), floor)


# --- Logs and receipts, read strictly --------------------------------------------------------

def check_log(raw, block_hash=None):
    """A raw log (of eth_getLogs or a receipt) that may be recorded: an object, not marked
    `removed` and, in a receipt, in the receipt's block; else NotProven (the step is a fault)."""
    if not isinstance(raw, dict):
        raise RpcError("a log is not an object")
    if raw.get("removed") is True:
        raise NotProven("a log marked removed: its block left the chain")
    if block_hash is not None and str(raw.get("blockHash")).lower() != block_hash:
        raise NotProven("a receipt's log in another block than the receipt")


def transfer_log(raw):
    """A checked raw log as a logs.Log when it is an ERC-20 Transfer, else None. Its amount must be
    one ABI word (rpc.word: a sign, a space or an underscore is a fault, never a number)."""
    topics = raw.get("topics")
    if (not isinstance(topics, list) or len(topics) != 3
            or str(topics[0]).lower() != TRANSFER_TOPIC):
        return None
    return parse_transfer_log(raw)


class _Checking:
    """The node as logs.get_logs calls it, every eth_getLogs answer checked before it is parsed."""

    def __init__(self, client):
        self.client = client

    def call(self, method, params=()):
        return self._checked(method, self.client.call(method, params))

    def pinned(self, calls, pins, what=None):
        calls = list(calls)
        results = self.client.pinned(calls, pins, what)
        return [self._checked(method, result) for (method, _), result
                in zip(calls, results, strict=True)]

    @staticmethod
    def _checked(method, result):
        if method == "eth_getLogs" and isinstance(result, list):
            for raw in result:
                check_log(raw)
                transfer_log(raw)
        return result


def transfer_logs(client, first, last, tokens, recipients, pins) -> list:
    """The Transfer logs of `tokens` to `recipients` in [first, last] (logs.get_logs), every raw log
    checked; a range the node refuses as too large is split in halves, down to single blocks. Each
    eth_getLogs is sent in one batch with `pins` (Pins: a kept block at or above `last`, under
    its kept hash), so the node that answers holds every block of the range on the kept chain: a
    node lagging below it, whose empty answer would skip a transfer for good, fails the step."""
    try:
        return get_logs(_Checking(client), first, last, tokens, recipients, pins)
    except RpcError as e:
        if first == last or isinstance(e, NotProven) or not is_too_large(e):
            raise
    middle = (first + last) // 2
    return (transfer_logs(client, first, middle, tokens, recipients, pins)
            + transfer_logs(client, middle + 1, last, tokens, recipients, pins))


def pins_for(kept, last) -> Pins:
    """The pins of a read up to block `last`: the lowest kept block at or above it, under its kept
    hash (`kept`: {number: hash}); NotProven when the watcher has kept none that high."""
    anchor = min((n for n in kept if n >= last), default=None)
    if anchor is None:
        raise NotProven(f"block {last} is above the kept chain: the watcher has not read it yet")
    return Pins(None, {anchor: kept[anchor]})


@dataclass(frozen=True)
class Receipt:
    """A transaction's receipt: its logs (raw) checked by check_log against its block."""
    tx_hash: str
    status: int
    block_number: int
    block_hash: str
    index: int  # its position in the block
    gas_used: int
    gas_price: int
    contract_address: str | None
    logs: list


def receipt(value, tx_hash) -> Receipt | None:
    """eth_getTransactionReceipt's answer for `tx_hash` parsed strictly (None: not mined)."""
    what = "eth_getTransactionReceipt"
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RpcError(f"{what}: not an object")
    if str(value.get("transactionHash")).lower() != tx_hash.lower():
        raise RpcError(f"{what}: the receipt of another transaction")
    rpc.word(value.get("blockHash"), f"{what}.blockHash")
    block_hash = value["blockHash"].lower()
    logs = value.get("logs")
    if not isinstance(logs, list):
        raise RpcError(f"{what}: no list of logs")
    for raw in logs:
        check_log(raw, block_hash)
    return Receipt(
        tx_hash=tx_hash.lower(),
        status=rpc.quantity(value.get("status"), f"{what}.status"),
        block_number=rpc.quantity(value.get("blockNumber"), f"{what}.blockNumber"),
        block_hash=block_hash,
        index=rpc.quantity(value.get("transactionIndex"), f"{what}.transactionIndex"),
        gas_used=rpc.quantity(value.get("gasUsed"), f"{what}.gasUsed"),
        gas_price=rpc.quantity(value.get("effectiveGasPrice"), f"{what}.effectiveGasPrice"),
        contract_address=value.get("contractAddress"),
        logs=logs,
    )


def receipts(client, tx_hashes) -> dict:
    """{tx hash: Receipt or None} in one JSON-RPC batch."""
    hashes = list(dict.fromkeys(tx_hashes))
    answers = client.batch(("eth_getTransactionReceipt", [h]) for h in hashes)
    return {h: receipt(value, h) for h, value in zip(hashes, answers, strict=True)}


def prove_receipt(proven, r: Receipt):
    """The (header, anchor) proving the receipt's block (`proven`: prove's answer), or NotProven."""
    header, anchor = proven[r.block_number]
    if header.hash != r.block_hash:
        raise NotProven(f"transaction {r.tx_hash}: its receipt's block {r.block_number} is not the"
                        " kept chain's")
    return header, anchor
