"""Chainlink-style price feeds (`AggregatorV3Interface`): the calls that read one, and their answers
parsed strictly. A feed is the operator's choice (`rates add`), but its node is a pool that may lie
like any other: an answer is taken only when it is exactly of the ABI's form, and whether it counts
(positive, fresh, of a complete round) is app/domain/rates.py's to say.
"""
from dataclasses import dataclass

from app.evm import rpc, tokens

DECIMALS = "0x313ce567"  # decimals()
DESCRIPTION = "0x7284e416"  # description()
LATEST_ROUND_DATA = "0xfeaf968c"  # latestRoundData()
CALL_GAS = 200_000
_UINT80 = 2**80


@dataclass(frozen=True)
class Round:
    """latestRoundData()'s answer: the round, its answer (a signed integer of the feed's decimals),
    when it started and was updated (unix seconds), and the round that answered it."""
    round_id: int
    answer: int
    started_at: int
    updated_at: int
    answered_in_round: int


def latest_call(feed) -> tuple:
    """The JSON-RPC call of a feed's latestRoundData() at the latest block, for a batch."""
    return ("eth_call", [{"to": feed, "data": LATEST_ROUND_DATA, "gas": hex(CALL_GAS)}, "latest"])


def parse_round(value, what="latestRoundData()") -> Round:
    """Five ABI words (uint80, int256, uint256, uint256, uint80), nothing more or less; Malformed
    otherwise (a uint80 word above 80 bits too)."""
    if not isinstance(value, str) or len(value) != 2 + 5 * 64:
        raise rpc.Malformed(f"{what}: not five 32-byte ABI words")
    words = [rpc.word("0x" + value[2 + 64 * i: 2 + 64 * (i + 1)], what) for i in range(5)]
    round_id, answer, started_at, updated_at, answered_in_round = words
    if round_id >= _UINT80 or answered_in_round >= _UINT80:
        raise rpc.Malformed(f"{what}: a round id above 80 bits")
    if answer >= 2**255:  # int256, two's complement
        answer -= 2**256
    return Round(round_id, answer, started_at, updated_at, answered_in_round)


def read_feed(client, feed, chain_id) -> tuple[int | None, str | None, Round]:
    """(decimals, description, latest round) of `feed`, with the node's chain id in the same batch
    (one node answers for all): rpc.WrongChain for a node of another chain; RpcError when it cannot
    be asked or a call fails (not a feed); decimals or description None when not of the ABI's
    form."""
    calls = [("eth_chainId", [])] + [
        ("eth_call", [{"to": feed, "data": selector, "gas": hex(CALL_GAS)}, "latest"])
        for selector in (DECIMALS, DESCRIPTION, LATEST_ROUND_DATA)]
    reported, decimals, description, latest = client.batch(calls, what="eth_call(feed)")
    reported = rpc.quantity(reported, "eth_chainId")
    if reported != chain_id:
        raise rpc.wrong_chain(client.url, reported, chain_id)
    return tokens.parse_decimals(decimals), tokens.parse_symbol(description), parse_round(latest)
