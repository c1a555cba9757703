"""The test price feed (tests/chain/token/TestPriceFeed.sol, Chainlink's AggregatorV3Interface) on a
real node, driven through the Chain helpers (support/chain_node.py: deploy_feed, set_feed,
read_feed): its first round, a round set now, an arbitrary round made the latest, earlier rounds
still answered and an unknown round refused."""
import pytest
from eth_abi import decode
from support.chain_node import selector


def call(chain, feed, signature, types):
    result = chain.rpc("eth_call", {"to": feed, "data": selector(signature)}, "latest")
    return decode(types, bytes.fromhex(result[2:]))


def block_time(chain, receipt):
    return chain.timestamp(int(receipt["blockNumber"], 16))


def test_a_feed_answers_its_rounds_as_set(chain):
    feed = chain.deploy_feed(8, "EUR / USD", 108420000)
    deployed_at = chain.timestamp()  # the deployment was the latest block's transaction
    assert call(chain, feed, "decimals()", ["uint8"]) == (8,)
    assert call(chain, feed, "description()", ["string"]) == ("EUR / USD",)
    assert call(chain, feed, "version()", ["uint256"]) == (4,)
    assert chain.read_feed(feed) == (1, 108420000, deployed_at, deployed_at, 1)

    receipt = chain.set_feed(feed, 108500000)  # setAnswer: the next round, now
    now = block_time(chain, receipt)
    assert now >= deployed_at
    assert chain.read_feed(feed) == (2, 108500000, now, now, 2)

    # setRound: any round made the latest, e.g. a negative answer carried over from round 5
    chain.set_feed(feed, -1, round_id=7, started_at=100, updated_at=200, answered_in_round=5)
    assert chain.read_feed(feed) == (7, -1, 100, 200, 5)
    # the missing values filled in: the next round, updated at the latest block, answered in itself
    latest_block_time = chain.timestamp()
    chain.set_feed(feed, 0, started_at=50)
    assert chain.read_feed(feed) == (8, 0, 50, latest_block_time, 8)

    assert chain.read_feed(feed, 1) == (1, 108420000, deployed_at, deployed_at, 1)
    assert chain.read_feed(feed, 2) == (2, 108500000, now, now, 2)
    with pytest.raises(RuntimeError, match="No data present"):
        chain.read_feed(feed, 3)  # never written (rounds 3 to 6 were skipped)


def test_a_feed_serves_as_a_sequencer_uptime_feed(chain):
    """Chainlink's L2 sequencer uptime convention: answer 0 = up, 1 = down, startedAt = when the
    status last changed."""
    feed = chain.deploy_feed(0, "L2 Sequencer Uptime Status Feed", 0)
    since = chain.timestamp()
    assert chain.read_feed(feed)[1:3] == (0, since)
    chain.set_feed(feed, 1, started_at=since + 10, updated_at=since + 10)
    assert chain.read_feed(feed) == (2, 1, since + 10, since + 10, 2)
