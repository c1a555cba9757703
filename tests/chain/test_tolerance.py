"""The underpayment tolerance (`merchants set-tolerance`), on a real node: a payment completes at
the amount due less the merchant's percent, rounded up to a whole base unit (never more forgone than
the percent), and below it stays partly paid; each payment keeps the tolerance it was confirmed
under."""
import csv
import io
import re

import pytest
from support.chain_shop import open_shop

CONFIRMATIONS = 2


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant):
    return open_shop(app, client, runner, chain, clock, make_merchant(),
                     confirmations=CONFIRMATIONS)


def console_csv(shop):
    password = "correct horse battery"
    created = shop.runner.invoke(args=["users", "create", "owner@shop.example", "--merchant",
                                       shop.merchant["merchantId"]], input=password + "\n")
    assert created.exit_code == 0, created.output
    page = shop.client.get("/dashboard/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    shop.client.post("/dashboard/login", data={"email": "owner@shop.example", "password": password,
                                               "csrf_token": token})
    export = shop.client.get("/dashboard/processes.csv")
    assert export.status_code == 200
    return list(csv.DictReader(io.StringIO(export.get_data(as_text=True))))


def set_tolerance(shop, percent):
    return shop.runner.invoke(args=["merchants", "set-tolerance", "--",
                                    shop.merchant["merchantId"], percent])


def test_within_the_tolerance_completes_and_shows_paid_against_due(shop, chain):
    before_id, before_address = shop.order(19.99)  # confirmed before the tolerance was set
    result = set_tolerance(shop, "0.50")
    assert result.exit_code == 0, result.output
    assert "0.5 %" in result.output
    exact_id, exact_address = shop.order(19.99)
    short_id, short_address = shop.order(19.99)
    # 19.99 less 0.5 % is 19.89005: 19.890050 in base units, the least that completes.
    chain.transfer(exact_address, 19_890_050)
    chain.transfer(short_address, 19_890_049)
    chain.transfer(before_address, 19_890_050)
    chain.mine(CONFIRMATIONS)
    shop.watch()

    assert shop.event_types(exact_id) == ["payment.completed"]
    _, completed = shop.events(exact_id)[0]
    payment = completed["data"]["payment"]
    assert (completed["data"]["status"], payment["amountDue"], payment["amountPaid"]) == (
        "completed", "19.99", "19.89005")
    assert shop.process(exact_id)["payment"]["amountPaid"] == "19.89005"
    assert shop.event_types(short_id) == ["payment.partial"]
    assert shop.process(short_id)["status"] == "pending"
    assert shop.event_types(before_id) == ["payment.partial"]  # confirmed under 0 %

    chain.transfer(short_address, 1)  # one base unit more reaches the threshold
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(short_id) == ["payment.partial", "payment.completed"]

    # The console's export: what was paid against what was due.
    rows = {r["processId"]: r for r in console_csv(shop)}
    assert {k: rows[exact_id][k]
            for k in ("status", "assetId", "networkId", "amountDue", "amountPaid")} == {
        "status": "completed", "assetId": "tusd", "networkId": "hardhat", "amountDue": "19.99",
        "amountPaid": "19.89005"}


def test_rounding_never_forgoes_more_than_the_percent(shop, chain):
    assert set_tolerance(shop, "5").exit_code == 0
    process_id, address = shop.order(0.01)  # 10000 base units, 5 % of which is 500
    chain.transfer(address, 9_499)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.partial"]
    chain.transfer(address, 1)
    chain.mine(CONFIRMATIONS)
    shop.watch()
    assert shop.event_types(process_id) == ["payment.partial", "payment.completed"]


@pytest.mark.parametrize("percent", ["5.01", "-1", "0.001", "abc", "NaN", "Infinity", "1e9", " "])
def test_set_tolerance_refuses_what_is_not_a_percent_from_0_to_5(shop, percent):
    result = set_tolerance(shop, percent)
    assert result.exit_code != 0
    assert "from 0 to 5" in result.output


def test_set_tolerance_of_an_unknown_merchant(runner):
    result = runner.invoke(args=["merchants", "set-tolerance", "mer_nobody", "1"])
    assert result.exit_code != 0 and "mer_nobody" in result.output
