"""Pins: the blocks (and the chain id, and the finality tag's block) that every batch of one step
of the chain watcher carries ahead of its calls, so that one node answers them all on the same
chain (rpc.Client.pinned sends them, `check` holds the answers against them).
"""
from app.evm.rpc import (
    ChainMoved,
    Malformed,
    RpcError,
    parse_header,
    quantity,
    redacted,
    wrong_chain,
)


class Pins:
    """What every batch of one step must agree on: the block at each pinned number (under its hash
    when known, else the step's first answer's; it must exist) and, when no block is pinned under a
    hash kept from earlier steps (which names the chain), the network's chain id. Sent ahead of the
    step's calls in each of its batches (`Client.pinned`): a node that answers a batch proves it
    holds these very blocks, so the logs and headers it gives in the same batch are of the chain
    through them (a block's hash commits to every block below it). `headers`: {number: Header}.
    Under a finality mode each batch also asks the node's block of the tag, so that no batch's
    depth rests on another node's word: `lowest_tag` keeps the lowest answer."""

    def __init__(self, chain_id, blocks, tag=None):
        self.chain_id = chain_id  # None: not asked
        self.blocks = dict(blocks)  # number -> the hash it must have, or None: the first answer's
        self.headers = {}
        self.tag = tag  # "safe"/"finalized": asked in every batch too (None: not asked)
        self.lowest_tag = None  # the lowest Header any batch answered for it

    def calls(self):
        asked = [] if self.chain_id is None else [("eth_chainId", [])]
        tag = [] if self.tag is None else [("eth_getBlockByNumber", [self.tag, False])]
        return asked + [("eth_getBlockByNumber", [hex(n), False]) for n in self.blocks] + tag

    def check(self, url, results):
        """WrongChain or ChainMoved unless `results` (of `calls()`) agree with the pins."""
        if self.chain_id is not None:
            reported = quantity(results[0], "eth_chainId")
            if reported != self.chain_id:
                raise wrong_chain(url, reported, self.chain_id)
            results = results[1:]
        if self.tag is not None:
            self._tagged(url, results[-1])
            results = results[:-1]
        for (number, expected), value in zip(self.blocks.items(), results, strict=True):
            header = parse_header(value, "eth_getBlockByNumber")
            if header is None:
                raise ChainMoved(f"block {number}: not on the node that answered")
            if header.number != number:
                raise Malformed("eth_getBlockByNumber: a block of another number")
            if expected is None and number in self.headers:
                expected = self.headers[number].hash
            if expected is not None and header.hash != expected:
                raise ChainMoved(f"block {number} is {header.hash}, not {expected}: the chain moved"
                                 " or the node is on another fork")
            self.headers.setdefault(number, header)

    def _tagged(self, url, value):
        """A batch's answer for the tag: kept when the lowest yet (a node without it: a fault)."""
        header = parse_header(value, f'eth_getBlockByNumber("{self.tag}")')
        if header is None:
            raise RpcError(f'{redacted(url)} has no "{self.tag}" block')
        if self.lowest_tag is None or header.number < self.lowest_tag.number:
            self.lowest_tag = header

    def read(self, client):
        """The pinned blocks alone, in one batch, unless a batch already read them."""
        if len(self.headers) < len(self.blocks):
            client.pinned([], self, what="eth_getBlockByNumber")
