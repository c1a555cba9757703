"""Prices in the merchant's currency, on a real node: a EUR shop paid in a dollar token at the rate
of a Chainlink-style feed (tests/chain/token/TestPriceFeed.sol) that the chain watcher reads on each
poll; the inverse pair; every way a feed's answer must not count; the peg guard; an L2's sequencer;
the lock of a quote; a manual rate; reconcile against the quote."""
import json
import logging
from decimal import Decimal
from fractions import Fraction

import pytest
from support.chain_shop import NETWORK, cli, open_shop

from app.domain.representation import iso
from app.evm.addresses import to_checksum_address

EUR_USD = 108_420_000  # 1.0842 with the feed's 8 decimals


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    shop = open_shop(app, client, runner, chain, clock, make_merchant(), confirmations=2)
    cli(runner, "merchants", "set-currency", shop.merchant["merchantId"], "EUR")
    return shop


@pytest.fixture
def feed(shop, chain, runner):
    """A EUR/USD feed at 1.0842, the pair's source, read once by the watcher."""
    address = chain.deploy_feed(8, "EUR / USD", EUR_USD)
    shop.sync_clock()
    cli(runner, "rates", "add", "EUR/USD", "--network", NETWORK, "--feed", address)
    return address


def preorder(shop, amount, **fields):
    response = shop.api.preorder({"amount": amount, **fields})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def confirm(shop, process_id, asset="tusd"):
    return shop.client.post(
        f"/payment-button/process/{process_id}/confirm",
        data=json.dumps({"assetId": asset, "networkId": NETWORK}), content_type="application/json",
        headers={"x-public-key": shop.merchant["publicKey"]})


def offered(shop, process_id):
    """{asset id: amountDue on the network} of GET /payment-button/assets?processId=."""
    response = shop.client.get(f"/payment-button/assets?processId={process_id}",
                               headers={"x-public-key": shop.merchant["publicKey"]})
    assert response.status_code == 200, response.get_data(as_text=True)
    return {a["id"]: a["networks"][0]["amountDue"] for a in response.get_json()["data"]}


def rates_list(runner):
    return {r["pair"]: r for r in json.loads(cli(runner, "rates", "list", "--json").output)}


def test_a_eur_shop_is_paid_in_a_dollar_token_at_the_feeds_rate(shop, feed, chain, clock):
    process = preorder(shop, 19.99)
    assert (process["amount"], process["currency"]) == (19.99, "EUR")
    assert offered(shop, process["processId"]) == {"tusd": "21.673158"}  # 19.99 × 1.0842, exactly

    confirmed = confirm(shop, process["processId"])
    assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
    body = confirmed.get_json()
    assert body["currency"] == "EUR"
    payment = body["payment"]
    assert payment["amountDue"] == "21.673158"
    assert payment["paymentUri"].endswith("uint256=21673158")
    assert payment["quote"] == {
        "currency": "EUR", "amount": "19.99", "rate": "1.0842", "pair": "EUR/USD",
        "inverse": False, "source": "feed", "networkId": NETWORK,
        "feed": to_checksum_address(feed), "roundId": "1",
        "rateUpdatedAt": iso(chain.read_feed(feed)[3]), "quotedAt": iso(clock.now)}

    chain.transfer(payment["address"], 21_673_157)  # a base unit short: partly paid
    chain.mine(2)
    shop.watch()
    assert shop.event_types(process["processId"]) == ["payment.partial"]
    chain.transfer(payment["address"], 1)
    chain.mine(2)
    shop.watch()
    assert shop.event_types(process["processId"]) == ["payment.partial", "payment.completed"]
    completed = shop.events(process["processId"])[-1][1]["data"]
    assert completed["currency"] == "EUR" and completed["payment"]["quote"]["rate"] == "1.0842"
    assert completed["payment"]["amountPaid"] == "21.673158"

    report = json.loads(shop.runner.invoke(args=["reconcile", NETWORK, "--json"]).output)
    assert report["unsupportedStates"] == []


def test_the_inverse_pair_divides_and_rounds_up(shop, feed, chain, runner):
    euro = chain.deploy_named_token("Test Euro", "TEUR", 6)
    cli(runner, "assets", "add", "teur", "--network", NETWORK, "--symbol", "TEUR", "--name",
        "Test Euro", "--contract", euro, "--decimals", "6", "--peg", "EUR")
    shop.sync_clock()
    process = preorder(shop, 21.68, currency="USD")  # a dollar price, paid in euro tokens
    exact = Fraction("21.68") / Fraction("1.0842") * 10**6
    due = -(-exact.numerator // exact.denominator)
    assert due == 19_996_311  # 19.99631064… rounded up, never down
    assert offered(shop, process["processId"]) == {"tusd": "21.68", "teur": "19.996311"}
    payment = confirm(shop, process["processId"], "teur").get_json()["payment"]
    assert payment["amountDue"] == "19.996311"
    assert (payment["quote"]["pair"], payment["quote"]["inverse"],
            payment["quote"]["currency"]) == ("EUR/USD", True, "USD")
    # at par in its own peg: a EUR process paid in euro tokens needs no rate
    at_par = preorder(shop, 10)
    assert confirm(shop, at_par["processId"], "teur").get_json()["payment"]["quote"] == {
        "currency": "EUR", "amount": "10", "rate": "1", "pair": None, "inverse": False,
        "source": "par", "networkId": None, "feed": None, "roundId": None, "rateUpdatedAt": None,
        "quotedAt": iso(shop.clock.now)}


def _unavailable(shop, process_id):
    assert offered(shop, process_id) == {}
    response = confirm(shop, process_id)
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.headers["Retry-After"] == "60"
    assert response.get_json()["code"] == "rate_unavailable"
    return response.get_json()["message"]


@pytest.mark.parametrize("spoil, state, why", [
    (dict(answer=0), "invalid", "its answer 0 is not above 0"),
    (dict(answer=-108_420_000), "invalid", "its answer -108420000 is not above 0"),
    (dict(answer=EUR_USD, round_id=7, answered_in_round=6), "invalid",
     "round 7 was answered in the earlier round 6 (answeredInRound < roundId)"),
    (dict(answer=EUR_USD, updated_at="future"), "invalid",
     "its round's updatedAt is in the future"),
    (dict(answer=EUR_USD, updated_at="stale"), "stale", "above its max age of 90000 s"),
])
def test_an_answer_that_does_not_count_quotes_nothing(shop, feed, chain, runner, caplog, spoil,
                                                      state, why):
    process = preorder(shop, 19.99)
    spoil = dict(spoil)
    if spoil.get("updated_at") == "future":
        spoil["updated_at"] = shop.clock.now + 3600
    elif spoil.get("updated_at") == "stale":
        spoil["updated_at"] = shop.clock.now - 90_001
    chain.set_feed(feed, **spoil)
    chain.mine(1)
    shop.sync_clock()
    with caplog.at_level(logging.INFO, logger="app.rates"):
        shop.watch()
        shop.watch()
    warned = [r.getMessage() for r in caplog.records if r.name == "app.rates"]
    assert len(warned) == 1 and why in warned[0]  # once, not on every poll
    assert "EUR/USD" in _unavailable(shop, process["processId"])
    listed = rates_list(runner)["EUR/USD"]
    assert listed["state"] == state and why in listed["why"]
    # the latest round decides: the earlier, good round 1 is not fallen back on; a good round is
    chain.set_feed(feed, 108_500_000)
    shop.sync_clock()
    shop.watch()
    assert offered(shop, process["processId"]) == {"tusd": "21.68915"}  # 19.99 × 1.085


def test_a_feed_that_is_not_there_is_refused_and_one_that_reverts_makes_the_pair_invalid(
        shop, chain, runner):
    token_not_feed = chain.deploy_named_token("Not a feed", "NAF", 6)
    refused = runner.invoke(args=["rates", "add", "EUR/USD", "--network", NETWORK, "--feed",
                                  token_not_feed])
    assert refused.exit_code == 1 and "Could not read the feed" in refused.output
    gbp = chain.deploy_feed(8, "GBP / USD", 127_000_000)
    shop.sync_clock()
    wrong_pair = runner.invoke(args=["rates", "add", "EUR/USD", "--network", NETWORK,
                                     "--feed", gbp])
    assert wrong_pair.exit_code == 1 and "'GBP / USD', not EUR / USD" in wrong_pair.output
    assert rates_list(runner) == {}


def test_the_peg_guard_takes_a_token_off_its_peg_out_even_at_par(shop, chain, runner):
    guard = chain.deploy_feed(8, "TUSD / USD", 97_000_000)  # 0.97: 3 % off
    shop.sync_clock()
    refused_pair = preorder(shop, 5, currency="USD")
    cli(runner, "rates", "add", "TUSD/USD", "--network", NETWORK, "--feed", guard)
    message = _unavailable(shop, refused_pair["processId"])
    assert "TUSD/USD is 0.97, more than 2 % from 1" in message
    chain.set_feed(guard, 99_000_000)  # 1 % off: within the default 2 %
    shop.sync_clock()
    shop.watch()
    assert offered(shop, refused_pair["processId"]) == {"tusd": "5"}
    cli(runner, "rates", "add", "TUSD/USD", "--network", NETWORK, "--feed", guard, "--max-depeg",
        "0.5")
    _unavailable(shop, refused_pair["processId"])


def test_an_l2_rate_counts_only_an_hour_after_its_sequencer_came_up(shop, chain, runner, clock):
    sequencer = chain.deploy_feed(0, "L2 Sequencer Uptime Status Feed", 0)
    chain.set_feed(sequencer, 1, started_at=chain.timestamp())  # down
    rate = chain.deploy_feed(8, "EUR / USD", EUR_USD)
    shop.sync_clock()
    args = ["rates", "add", "EUR/USD", "--network", NETWORK, "--feed", rate, "--sequencer-feed",
            sequencer]
    down = runner.invoke(args=args)
    assert down.exit_code == 1 and "the network's sequencer is down" in down.output
    chain.set_feed(sequencer, 0, started_at=chain.timestamp() - 3_000)  # up for 50 minutes
    chain.set_feed(rate, EUR_USD)
    shop.sync_clock()
    early = runner.invoke(args=args)
    assert early.exit_code == 1 and "the sequencer has been up for" in early.output
    chain.set_feed(sequencer, 0, started_at=chain.timestamp() - 3_601)
    chain.set_feed(rate, EUR_USD)
    shop.sync_clock()
    cli(runner, *args)
    process = preorder(shop, 19.99)
    assert offered(shop, process["processId"]) == {"tusd": "21.673158"}
    chain.set_feed(sequencer, 1, started_at=chain.timestamp())  # down again
    shop.sync_clock()
    shop.watch()
    assert "sequencer is down" in _unavailable(shop, process["processId"])


def test_a_quote_is_locked_until_expiry_and_a_new_choice_quotes_again(shop, feed, chain, runner):
    process = preorder(shop, 19.99)
    first = confirm(shop, process["processId"]).get_json()["payment"]
    chain.set_feed(feed, 120_000_000)  # 1.2
    shop.sync_clock()
    shop.watch()
    again = confirm(shop, process["processId"]).get_json()["payment"]
    assert again["amountDue"] == first["amountDue"] == "21.673158"
    assert again["quote"] == first["quote"]
    assert offered(shop, process["processId"]) == {"tusd": "21.673158"}  # the locked one
    euro = chain.deploy_named_token("Test Euro", "TEUR", 6)
    cli(runner, "assets", "add", "teur", "--network", NETWORK, "--symbol", "TEUR", "--name",
        "Test Euro", "--contract", euro, "--decimals", "6", "--peg", "EUR")
    shop.sync_clock()
    assert confirm(shop, process["processId"], "teur").get_json()["payment"]["amountDue"] == "19.99"
    back = confirm(shop, process["processId"]).get_json()["payment"]
    assert back["amountDue"] == "23.988" and back["quote"]["roundId"] == "2"  # quoted again: 1.2
    # the rate falling after the quote changes nothing of what completes it
    chain.set_feed(feed, 100_000_000)
    chain.transfer(back["address"], 23_988_000)
    chain.mine(2)
    shop.sync_clock()
    shop.watch()
    assert shop.event_types(process["processId"]) == ["payment.completed"]


def test_a_transfer_of_an_earlier_choice_counts_for_its_share_of_that_quote(
        shop, feed, chain, runner):
    """A customer who paid in one token, then changed to another before the watcher saw it, is
    credited what the first payment was worth of its own quote, not its number of tokens 1:1."""
    cheap = chain.deploy_named_token("Test Yen", "TJPY", 6)
    cli(runner, "assets", "add", "tjpy", "--network", NETWORK, "--symbol", "TJPY", "--name",
        "Test Yen", "--contract", cheap, "--decimals", "6", "--peg", "JPY")
    cli(runner, "rates", "set", "EUR/JPY", "160")
    process = preorder(shop, 19.99)
    yen = confirm(shop, process["processId"], "tjpy").get_json()["payment"]
    assert yen["amountDue"] == "3198.4"
    chain.transfer(yen["address"], 19_990_000, token=cheap)  # 19.99 yen, worth 0.12 EUR
    dollars = confirm(shop, process["processId"]).get_json()["payment"]  # before the watcher saw it
    assert dollars["amountDue"] == "21.673158"
    chain.mine(2)
    shop.sync_clock()
    shop.watch()
    shown = shop.process(process["processId"])
    assert shown["status"] == "pending"
    # 19.99 / 3198.4 of 21.673158 dollars, rounded down
    assert shown["payment"]["amountPaid"] == str(Decimal(19_990_000 * 21_673_158 // 3_198_400_000)
                                                 / 10**6)


def test_a_manual_rate_counts_for_its_max_age(shop, runner, clock):
    cli(runner, "rates", "set", "EUR/USD", "1.10", "--max-age", "600")
    process = preorder(shop, 19.99)
    assert offered(shop, process["processId"]) == {"tusd": "21.989"}
    listed = rates_list(runner)["EUR/USD"]
    assert (listed["source"], listed["value"], listed["state"]) == ("manual", "1.1", "ok")
    clock.now += 601
    assert rates_list(runner)["EUR/USD"]["state"] == "stale"
    _unavailable(shop, process["processId"])
    cli(runner, "rates", "remove", "EUR/USD")
    assert "no rate for EUR/USD" in _unavailable(shop, process["processId"])


def test_reconcile_finds_a_completed_process_its_quote_does_not_support(shop, feed, chain, app):
    process = preorder(shop, 19.99)
    payment = confirm(shop, process["processId"]).get_json()["payment"]
    db = app.extensions["db"]
    with db.transaction() as conn:  # as a bug or a hand-edited database would leave it
        conn.execute("UPDATE payments SET amount_due = '19990000' WHERE process_id = ?",
                     (process["processId"],))
    chain.transfer(payment["address"], 19_990_000)
    chain.mine(2)
    shop.sync_clock()
    shop.watch()
    assert shop.event_types(process["processId"]) == ["payment.completed"]
    result = shop.runner.invoke(args=["reconcile", NETWORK, "--json"])
    assert result.exit_code == 1
    [finding] = json.loads(result.output)["unsupportedStates"]
    assert "19.99 EUR at 1.0842 is 21673158 base units" in finding["reason"]


def test_reading_the_feeds_adds_no_round_trip_to_a_poll(app, client, runner, chain, clock, proxy,
                                                        make_merchant):
    """The feeds of a network are read in the poll's first batch: a poll with feeds sends as many
    HTTP requests to the node as one without."""
    shop = open_shop(app, client, runner, chain, clock, make_merchant(), rpc_url=proxy.url)
    shop.watch()
    before = proxy.requests
    shop.watch()
    without = proxy.requests - before
    address = chain.deploy_feed(8, "EUR / USD", EUR_USD)
    shop.sync_clock()
    cli(runner, "rates", "add", "EUR/USD", "--network", NETWORK, "--feed", address)
    shop.watch()
    calls, before = proxy.calls["eth_call"], proxy.requests
    shop.watch()
    assert proxy.requests - before == without
    assert proxy.calls["eth_call"] == calls + 1  # in the same batch


def test_a_lagging_nodes_older_round_never_replaces_a_newer_one(shop, feed, chain, runner, caplog):
    chain.set_feed(feed, 110_000_000)  # round 2: 1.1
    shop.sync_clock()
    shop.watch()
    assert rates_list(runner)["EUR/USD"]["round"] == "2"
    # as a node behind would answer
    chain.set_feed(feed, 100_000_000, round_id=1, answered_in_round=1)
    shop.sync_clock()
    with caplog.at_level(logging.INFO, logger="app.rates"):
        shop.watch()
    listed = rates_list(runner)["EUR/USD"]
    assert (listed["round"], listed["value"], listed["state"]) == ("2", "1.1", "ok")
    assert "round 1 is older than round 2 already read (a lagging node): kept the newer" \
        in caplog.text
    assert offered(shop, preorder(shop, 10)["processId"]) == {"tusd": "11"}


def test_an_answer_from_beyond_any_clock_is_invalid_and_listed(shop, feed, chain, runner):
    chain.set_feed(feed, EUR_USD, updated_at=10**15)
    shop.sync_clock()
    shop.watch()
    listed = rates_list(runner)["EUR/USD"]
    assert (listed["state"], listed["why"], listed["updatedAt"]) == (
        "invalid", "its round's updatedAt is in the future", None)
    assert "EUR/USD" in cli(runner, "rates", "list").output


def test_a_peg_guard_matches_a_symbol_whatever_its_case(shop, chain, runner):
    ethena = chain.deploy_named_token("Ethena USD", "USDe", 6)
    cli(runner, "assets", "add", "usde", "--network", NETWORK, "--symbol", "USDe", "--name",
        "Ethena USD", "--contract", ethena, "--decimals", "6")
    shop.sync_clock()
    cli(runner, "rates", "set", "usde/USD", "0.8")  # stored as USDE/USD
    assert list(rates_list(runner)) == ["USDE/USD"]
    process = preorder(shop, 5, currency="USD")
    assert offered(shop, process["processId"]) == {"tusd": "5"}  # USDe at 0.8: out, even at par
    cli(runner, "rates", "remove", "USDe/USD")
    assert offered(shop, process["processId"]) == {"tusd": "5", "usde": "5"}


def test_a_feed_on_a_network_of_the_other_mode_prices_nothing(shop, app, runner, clock):
    """A test network's feed (anyone may set a test feed's answer) never prices a live sale, nor a
    live network's a test one: here a test shop's EUR process and a feed read on a live network."""
    from app.core.records import Rate
    from app.data import rates as rate_rows
    cli(runner, "networks", "add", "polygon", "--name", "Polygon PoS", "--chain-id", "137",
        "--rpc-url", "http://127.0.0.1:1/", "--start-block", "1")
    with app.extensions["db"].transaction() as conn:
        rate_rows.put(conn, Rate(
            pair="EUR/USD", source="feed", network_id="polygon", feed="0x" + "ab" * 20,
            feed_decimals=8, sequencer_feed=None, max_age=90_000, max_depeg="2", value="1.0842",
            round_id="9", answered_in_round="9", updated_at=clock.now, sequencer_answer=None,
            sequencer_since=None, problem=None, read_at=clock.now, reported="ok",
            created_at=clock.now))
    assert rates_list(runner)["EUR/USD"]["state"] == "ok"
    process = preorder(shop, 19.99)
    assert offered(shop, process["processId"]) == {}
    assert "no rate for EUR/USD" in _unavailable(shop, process["processId"])


def test_a_transfer_of_a_token_of_another_peg_is_not_accepted_one_for_one(shop, chain, runner):
    euro = chain.deploy_named_token("Test Euro", "TEUR", 6)
    cli(runner, "assets", "add", "teur", "--network", NETWORK, "--symbol", "TEUR", "--name",
        "Test Euro", "--contract", euro, "--decimals", "6", "--peg", "EUR")
    process = preorder(shop, 10, currency="USD")
    address = confirm(shop, process["processId"]).get_json()["payment"]["address"]
    tx_hash, _ = chain.transfer(address, 10_000_000, token=euro)  # 10 euro tokens, not 10 dollars
    chain.mine(2)
    shop.sync_clock()
    shop.watch()
    [unexpected] = shop.process(process["processId"])["payment"]["unexpectedTransfers"]
    accepted = shop.client.post(
        f"/payment-button/process/{process['processId']}/unexpected-transfers/"
        f"{unexpected['txHash']}:{unexpected['logIndex']}/accept", headers=shop.api.headers())
    assert accepted.status_code == 409, accepted.get_data(as_text=True)
    assert "worth a EUR" in accepted.get_json()["message"]
    assert shop.process(process["processId"])["status"] == "pending"
