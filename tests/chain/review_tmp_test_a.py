"""Review (Change A): a browser wallet's collection whose transaction the node drops (never mined,
its sender's nonce never used again) keeps its claim items forever: `collect` and the payouts
page leave the merchant's deposit address out for good."""
import html
import re

from support import dbutil
from test_collect_concurrent import _record  # noqa: F401
from test_payout_collect import (  # noqa: F401  (fixtures)
    _console,
    keys,
    new_address,
    payout_shop,
)


def test_review_a_dropped_wallet_collection_holds_forever(shop, chain, app, clock):
    database = app.config["DATABASE"]
    merchant = shop.merchant(new_address("payout-review-dropped"))
    _, address = shop.order(merchant, 6)
    chain.transfer(address, 6_000_000)
    shop.confirm()
    console = _console(shop, merchant)
    page = console.get("/dashboard/payouts").text
    call = html.unescape(re.search(r'data-data="([^"]+)"', page).group(1))
    factory = re.search(r'data-to="([^"]+)"', page).group(1)
    chain.rpc("evm_setAutomine", False)
    try:
        tx_hash = chain.rpc("eth_sendTransaction", {"from": chain.accounts[3], "to": factory,
                                                    "data": call})
        assert _record(console, tx_hash).status_code == 303
        # the node forgets it (evicted: fee too low, node restart, txpool lifetime...)
        assert chain.rpc("hardhat_dropTransaction", tx_hash) is True
    finally:
        chain.rpc("evm_setAutomine", True)
    for _ in range(3):
        clock.advance(86_400)
        chain.mine(10)
        shop.confirm()                     # the watcher settles collections (read-only)
        console.get("/dashboard/payouts")  # the page settles the merchant's wallet collections
        run = shop.collect_json()          # a collect run
        print("collect run:", run["transactions"], run["leftOut"])
        assert run["leftOut"] == [address] and run["transactions"] == []
    assert dbutil.query(database, "SELECT status FROM collections") == [("pending",)]
    assert shop.token_balance(address) == 6_000_000   # the money stays in the deposit address
