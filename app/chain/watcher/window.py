"""What the watcher reads from the node: the poll's first batch, and each scan step's window (its
Transfer logs and the headers that prove them). All RPC, no database: plain data back, which
app/chain/watcher/record.py then records in one transaction.

Every batch of a step carries the step's pins (app/evm/pins.py): the step's last block, the previous
step's last block under its kept hash (or the chain id), the head's block and the tag's block when
the step may reach it. A node that answers a batch proves it holds those blocks, so the logs and
headers it gives in the same batch are of the chain through them. docs/payments.md, "RPC pools",
says what each check defends against.
"""
import logging
from dataclasses import dataclass

from app.evm import canonical
from app.evm import logs as evm_logs
from app.evm.logs import is_too_large
from app.evm.pins import Pins
from app.evm.rpc import (
    TAGS,
    ChainMoved,
    Header,
    Malformed,
    RpcError,
    parse_header,
    quantity,
    redacted,
    wrong_chain,
)

log = logging.getLogger("app.chain.watcher")

LOCAL_FILTER_MAX = 10_000  # a range's token logs filtered here; more: ask by address chunks


class Reads:
    """What a poll read first, in one batch (`first_reads`), and the blocks its steps proved."""

    def __init__(self, head, kept):
        self.head = head  # the head's Header
        self.kept = kept  # the newest kept block (ChainBlock) at or below the scan position
        self.kept_header = None  # the node's header at the kept block's number
        self.tag = None  # the node's Header of the finality tag (None: counting, or not usable)
        self.tag_asked_again = False  # a pinned batch of the poll answered the tag too
        self.proven = {}  # number -> hash of the blocks this poll's steps proved
        self.feeds = {}  # price feed contract -> its latestRoundData() answer, or its RpcError

    def lower_tag(self, answer):
        """A pinned batch's answer for the tag (Pins.lowest_tag), folded in: the poll counts by
        the lowest answer of its batches, each from the node that held its pins, never above the
        head (the first batch's answer is at most the head; a node ahead of it lowers nothing)."""
        if self.tag is None or answer is None:
            return
        self.tag_asked_again = True
        if answer.number < self.tag.number:
            self.tag = answer

    def tag_name(self, network):
        """The tag every pinned batch asks (None: counting, or nothing counts by it this poll)."""
        return network.finality if self.tag is not None else None


def first_reads(client, network, kept, feed_calls=()) -> Reads:
    """One batch, so one node: the chain id, the head's block, the newest kept block `kept` (its
    hash is compared with the kept one), under a finality mode the node's block of that tag
    (which must exist: a node that stops serving it fails the poll, never a fallback), and the
    price feeds read through the network (`feed_calls`: (contract, call) pairs; a feed's failing
    call is its own problem, never the poll's)."""
    calls = [("eth_chainId", []), ("eth_getBlockByNumber", ["latest", False])]
    if kept is not None:
        calls.append(("eth_getBlockByNumber", [hex(kept.number), False]))
    if network.finality in TAGS:
        calls.append(("eth_getBlockByNumber", [network.finality, False]))
    results = client.batch(calls + [call for _, call in feed_calls],
                           what='eth_getBlockByNumber("latest")', tolerate=bool(feed_calls))
    feed_answers = results[len(calls):]
    results = results[:len(calls)]
    for result in results:
        if isinstance(result, RpcError):
            raise result
    reported = quantity(results[0], "eth_chainId")
    if reported != network.chain_id:
        raise wrong_chain(network.rpc_url, reported, network.chain_id)
    head = parse_header(results[1], "eth_getBlockByNumber")
    if head is None:
        raise RpcError(f"{redacted(network.rpc_url)} has no latest block")
    reads = Reads(head, kept)
    reads.feeds = {contract: answer
                   for (contract, _), answer in zip(feed_calls, feed_answers, strict=True)}
    if kept is not None:
        reads.kept_header = parse_header(results[2], "eth_getBlockByNumber")
    if network.finality in TAGS:
        tag = parse_header(results[-1], f"eth_getBlockByNumber(\"{network.finality}\")")
        if tag is None:
            raise RpcError(f"{redacted(network.rpc_url)} has no \"{network.finality}\" block:"
                           f" network {network.id} settles by it")
        if tag.number > head.number:
            raise Malformed(f"the \"{network.finality}\" block is above the head")
        reads.tag = tag
    return reads


def deep_enough(network, head, reads) -> int:
    """The highest block whose transfers count: the head less the confirmations, or the finality
    tag's block (none after a reorganisation in this poll: the tag was read from the chain before
    it)."""
    if network.finality not in TAGS:
        return head - network.confirmations + 1
    return reads.tag.number if reads.tag is not None else -1


@dataclass
class Window:
    """One scan step's read: blocks `first`-`last`, `tip` the header of `last` (pinned), `paying`
    (log, WatchedAddress) and `strays` (log, process id) as NetworkView.match sorts them, and
    `headers` {number: Header} of the blocks holding them, each log's block hash its header's;
    `tag` the lowest answer of its batches for the finality tag (None: not asked)."""
    first: int
    last: int
    tip: Header
    paying: list
    strays: list
    headers: dict
    tag: Header | None = None


def step_pins(network, head, first, last, reads, previous) -> Pins:
    """What every batch of the step [first, last] must agree on: the step's last block (under the
    hash of the poll's first read when it is the head, else of the step's first answer), the
    previous step's last block `previous` (a ChainBlock or Header, or None) under its hash when it
    is block `first - 1` (the new blocks extend the kept chain; without it, the chain id names the
    chain), the head's block (the chain that answers is as long as the head the depths are counted
    from), and under a finality mode the tag's block when the step may hold blocks at or below it
    (what counts by it is of its chain); each batch asks the tag again (Reads.lower_tag)."""
    blocks = {last: reads.head.hash if last == head else None}
    kept = previous is not None and previous.number == first - 1
    if kept:
        blocks[previous.number] = previous.hash
    blocks.setdefault(head, None)
    tag = reads.tag
    if tag is not None and tag.number >= first:
        if blocks.get(tag.number, tag.hash) not in (None, tag.hash):
            raise ChainMoved(f"block {tag.number} is both {blocks[tag.number]} and the tag's"
                             f" {tag.hash}")
        blocks[tag.number] = tag.hash
    return Pins(None if kept else network.chain_id, blocks, tag=reads.tag_name(network))


def read_window(client, network, first, last, watched, pins, *, max_addresses, busy) -> Window:
    """The step's window, every batch with `pins`: the Transfer logs to watched addresses, then
    the headers of the blocks holding the ones that matter (ChainMoved when a log is not of the
    step's chain). `busy`: the networks read by address chunks (transfer_logs)."""
    entries = transfer_logs(client, network, first, last, watched, pins,
                            max_addresses=max_addresses, busy=busy)
    paying, strays = watched.match(entries)
    pins.read(client)  # when no eth_getLogs call carried them (nothing watched)
    headers = proven(client, pins, [entry for entry, _ in paying + strays], last)
    return Window(first, last, pins.headers[last], paying, strays, headers, pins.lowest_tag)


def proven(client, pins, entries, last) -> dict:
    """{block number: header} of the blocks holding the logs `entries`, each an ancestor of the
    step's pinned last block: the headers from the lowest of them up to `last` are read (in
    batches carrying the pins) and must link by parent hashes to the pinned one
    (canonical.linked, as refunds and collections are proven), and each log's block hash must be
    its block's. Else NotProven or ChainMoved (a log or header from a node on another fork or
    chain, even one a balancer gave a call of the same batch to, or the chain moved): nothing of
    the step recorded."""
    if not entries:
        return {}
    lowest = min(entry.block_number for entry in entries)
    headers = client.headers(range(lowest, last + 1), pins=pins)
    canonical.linked(headers, lowest, last, pins.headers[last].hash)
    for entry in entries:
        if headers[entry.block_number].hash != entry.block_hash:
            raise ChainMoved(f"a log's block {entry.block_number} {entry.block_hash} is not"
                             " that of the step's chain")
    return {entry.block_number: headers[entry.block_number] for entry in entries}


def transfer_logs(client, network, first, last, watched, pins, *, max_addresses, busy):
    """The Transfer logs of any contract in the range to a watched address, each eth_getLogs call
    in a batch with the step's pins (so the node that gives the logs holds the step's blocks: its
    logs are all of them). When the addresses take more than one call, one call for every Transfer
    in the range, filtered here, is tried first; a chain busy enough that the node refuses it, or
    that returns more than LOCAL_FILTER_MAX logs, is asked by address chunks from then on (several
    calls to a batch; `busy` keeps the network's id). A malformed log is a fault when its contract
    is a registered asset of the network, and left out otherwise (anyone can deploy a contract
    that emits garbage to a deposit address)."""
    if not watched.deposits:
        return []
    strict = watched.registered
    if len(watched.deposits) > max_addresses and network.id not in busy:
        try:
            logs = evm_logs.transfer_logs(client, first, last, None, None, split=False, pins=pins,
                                          strict=strict)
        except RpcError as e:
            if not is_too_large(e):
                raise
            logs = None
        if logs is None or len(logs) > LOCAL_FILTER_MAX:
            log.info("watch %s: busy chain: reading by deposit address", network.id)
            busy.add(network.id)
        if logs is not None:
            return logs
    recipients = watched.recipients
    chunks = [recipients[i:i + max_addresses] for i in range(0, len(recipients), max_addresses)]
    return evm_logs.transfer_logs_by_chunks(client, first, last, chunks, pins=pins, strict=strict)
