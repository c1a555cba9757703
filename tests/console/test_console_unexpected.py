"""The console's parts of money that arrives the wrong way, over HTTP (test client, real database,
no node: the watcher's rows are written as it writes them): a process's unexpected transfers with
the owner's "Accept as payment" (a POST form with its CSRF token; a viewer sees no form and is
refused), the processes list's filter "has unexpected transfers", and the CSV's chain proof per
counted transfer. On real nodes: tests/chain/test_wrong_way.py."""
import csv
import io
import json
import re

import pytest
from support import dbutil
from support.chain_shop import XPUB
from support.helpers import Api
from support.live_payments import USDC_LOCAL, add_transfer

PASSWORD = "correct horse battery"
OTHER = "0x" + "7e" * 20  # a token nobody registered
DAI = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"  # registered below, 18 decimals
TX_DAI, TX_OTHER = "0x" + "d1" * 32, "0x" + "0e" * 32


def cli(runner, *args, input=None):
    result = runner.invoke(args=list(args), input=input)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def shop(runner, merchant, client):
    cli(runner, "networks", "add", "local", "--name", "Local chain", "--chain-id", "31337",
        "--rpc-url", "http://127.0.0.1:1/rpc", "--confirmations", "3", "--start-block", "1")
    cli(runner, "assets", "add", "usdc", "--network", "local", "--symbol", "USDC", "--name",
        "USD Coin", "--contract", USDC_LOCAL, "--decimals", "6", "--skip-contract-check")
    cli(runner, "assets", "add", "dai", "--network", "local", "--symbol", "DAI", "--name", "Dai",
        "--contract", DAI, "--decimals", "18", "--skip-contract-check")
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    for email, role in (("owner@shop.example", "owner"), ("viewer@shop.example", "viewer")):
        cli(runner, "users", "create", email, "--merchant", merchant["merchantId"], "--role", role,
            input=PASSWORD + "\n")
    return Api(client, merchant["secretKey"])


def confirmed_process(shop, client, merchant, amount=10):
    process_id = shop.preorder({"amount": amount}).get_json()["processId"]
    confirmed = client.post(f"/payment-button/process/{process_id}/confirm",
                            json={"assetId": "usdc", "networkId": "local"},
                            headers={"x-public-key": merchant["publicKey"]})
    assert confirmed.status_code == 200, confirmed.get_data(as_text=True)
    return process_id


def unexpected(app, process_id, tx, token, amount, symbol, decimals, block=5):
    """An unexpected transfer as the watcher records one, confirmed and reported."""
    with dbutil.connect(app.config["DATABASE"]) as conn:
        conn.execute(
            "INSERT INTO unexpected_transfers (chain_id, tx_hash, log_index, network_id,"
            " process_id, token_contract, from_address, amount, block_number, block_hash,"
            " block_timestamp, status, seen_at, confirmed_at, symbol, decimals, reported_at)"
            " VALUES (31337, ?, 2, 'local', ?, ?, ?, ?, ?, ?, 1795000100, 'confirmed', 1795000100,"
            " 1795000100, ?, ?, 1795000100)",
            (tx, process_id, token.lower(), "0x" + "ab" * 20, str(amount), block, "0x" + "cd" * 32,
             symbol, decimals))


def log_in(client, email):
    page = client.get("/dashboard/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    response = client.post("/dashboard/login", data={"email": email, "password": PASSWORD,
                                                     "csrf_token": token})
    assert response.status_code == 303


def csrf(page):
    return re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)


def test_the_owner_accepts_an_unexpected_transfer_of_a_registered_asset(app, client, shop, merchant,
                                                                         clock):
    process_id = confirmed_process(shop, client, merchant)
    unexpected(app, process_id, TX_DAI, DAI, 10 * 10**18 + 123, "DAI", 18)  # 10.000…123 DAI
    unexpected(app, process_id, TX_OTHER, OTHER, 5, None, None, block=6)
    log_in(client, "owner@shop.example")
    page = client.get(f"/dashboard/processes/{process_id}")
    assert page.status_code == 200
    section = page.text[page.text.index('id="unexpected"'):]
    assert "Local chain (chain 31337)" in section and "10.000000000000000123" in section
    assert "5 base units" in section and "unknown token" in section
    assert "Not a registered asset: cannot be accepted" in section
    assert section.count(">Accept as payment</button>") == 1
    action = f"/dashboard/processes/{process_id}/unexpected/{TX_DAI}:2/accept"
    assert f'action="{action}"' in section

    refused = client.post(action, data={"csrf_token": "wrong"})
    assert refused.status_code == 400
    assert shop.get(process_id).get_json()["payment"]["amountPaid"] == "0"
    other = client.post(f"/dashboard/processes/{process_id}/unexpected/{TX_OTHER}:2/accept",
                        data={"csrf_token": csrf(page)})
    assert other.status_code == 409 and "no registered asset" in other.text
    posted = client.post(action, data={"csrf_token": csrf(page)})
    assert posted.status_code == 303
    assert posted.headers["Location"] == (
        f"/dashboard/processes/{process_id}?done=accepted#unexpected")
    accepted = client.get(posted.headers["Location"])
    assert accepted.status_code == 200 and "is accepted as payment" in accepted.text
    assert "Accepted " in accepted.text and "by console owner@shop.example" in accepted.text
    body = shop.get(process_id).get_json()
    # 18 decimals into the payment's 6: exact, what USDC cannot hold left out.
    assert (body["status"], body["payment"]["amountPaid"]) == ("completed", "10")
    assert body["payment"]["unexpectedTransfers"][0]["acceptedBy"] == "console owner@shop.example"
    again = client.post(action, data={"csrf_token": csrf(page)})
    assert again.status_code == 409 and "already accepted" in again.text
    assert client.post(f"/dashboard/processes/{process_id}/unexpected/{TX_DAI}:9/accept",
                       data={"csrf_token": csrf(page)}).status_code == 404
    with dbutil.connect(app.config["DATABASE"]) as conn:
        events = [r[0] for r in conn.execute("SELECT type FROM events WHERE process_id = ? ORDER BY"
                                             " created_at, seq", (process_id,))]
    assert events == ["payment.completed"]


def test_a_viewer_sees_unexpected_transfers_but_cannot_accept_them(app, client, shop, merchant):
    process_id = confirmed_process(shop, client, merchant)
    unexpected(app, process_id, TX_DAI, DAI, 10**18, "DAI", 18)
    log_in(client, "viewer@shop.example")
    page = client.get(f"/dashboard/processes/{process_id}")
    assert 'id="unexpected"' in page.text and "Not accepted" in page.text
    assert "Accept as payment</button>" not in page.text
    refused = client.post(f"/dashboard/processes/{process_id}/unexpected/{TX_DAI}:2/accept",
                          data={"csrf_token": csrf(page)})
    assert refused.status_code == 403
    assert shop.get(process_id).get_json()["payment"]["amountPaid"] == "0"


def test_the_list_filters_processes_with_unexpected_transfers(app, client, shop, merchant):
    plain = confirmed_process(shop, client, merchant)
    odd = confirmed_process(shop, client, merchant)
    unexpected(app, odd, TX_OTHER, OTHER, 5, None, None)
    log_in(client, "owner@shop.example")
    listed = lambda html: re.findall(r'href="/dashboard/processes/([0-9a-f-]{36})"', html)  # noqa: E731
    assert listed(client.get("/dashboard/").text) == [odd, plain]
    page = client.get("/dashboard/?unexpected=1")
    assert listed(page.text) == [odd]
    assert 'name="unexpected" type="checkbox" value="1" checked' in page.text
    assert listed(client.get(f"/dashboard/?unexpected=1&q={plain}").text) == []
    assert listed(client.get(f"/dashboard/?unexpected=1&q={odd}").text) == [odd]
    rows = list(csv.DictReader(io.StringIO(
        client.get("/dashboard/processes.csv?unexpected=1").text)))
    assert [r["processId"] for r in rows] == [odd]


def test_the_csv_carries_the_chain_proof_of_each_counted_transfer(app, client, shop, merchant):
    process_id = confirmed_process(shop, client, merchant)
    add_transfer(app, process_id, "a1", 0, 4_000_000, 7, "confirmed")
    add_transfer(app, process_id, "a2", 3, 6_000_000, 9, "confirmed")
    add_transfer(app, process_id, "a3", 1, 1_000_000, 10, "seen")  # not counted yet
    log_in(client, "owner@shop.example")
    [row] = list(csv.DictReader(io.StringIO(client.get("/dashboard/processes.csv").text)))
    assert row["amountPaid"] == "10.00"
    assert (row["transferTxHashes"], row["transferLogIndexes"], row["transferBlockNumbers"],
            row["transferBlockHashes"]) == (
        f"0x{'a1' * 32} 0x{'a2' * 32}", "0 3", "7 9", f"0x{'cd' * 32} 0x{'cd' * 32}")
    assert json.loads(row["metadata"]) == {}


# A transfer's key in the address is read as ASCII: other scripts' digits, superscripts and circled
# ones are the 400 page (never a 500, never an alias of the ASCII key); an ASCII key that names no
# transfer is the 404 page, as before. The transfer below has log index 2: each of these would have
# read as 2 (or raised in int(), a 500).
OTHER_DIGITS = ["²", "②", "٢", "𝟐", "२", "２", "³", "①"]


@pytest.mark.parametrize("digit", OTHER_DIGITS)
def test_a_transfer_key_with_other_digits_is_the_400_page_never_an_alias(app, client, shop,
                                                                          merchant, digit):
    process_id = confirmed_process(shop, client, merchant)
    unexpected(app, process_id, TX_DAI, DAI, 10**18, "DAI", 18)  # log index 2
    log_in(client, "owner@shop.example")
    token = csrf(client.get(f"/dashboard/processes/{process_id}"))
    for key in (f"{TX_DAI}:{digit}", f"{TX_DAI}:1{digit}", f"{TX_DAI[:-1]}{digit}:2"):
        refused = client.post(f"/dashboard/processes/{process_id}/unexpected/{key}/accept",
                              data={"csrf_token": token})
        assert refused.status_code == 400, (key, refused.text)
        assert "transfer: Must be written in ASCII characters" in refused.text
        assert "Traceback" not in refused.text
    assert shop.get(process_id).get_json()["payment"]["amountPaid"] == "0"  # nothing accepted
    for ascii_key in (f"{TX_DAI}:2x", f"{TX_DAI}:+2", f"{TX_DAI}: 2", f"{TX_DAI}:9"):
        missing = client.post(f"/dashboard/processes/{process_id}/unexpected/{ascii_key}/accept",
                              data={"csrf_token": token})
        assert missing.status_code == 404, ascii_key
    accepted = client.post(f"/dashboard/processes/{process_id}/unexpected/{TX_DAI}:2/accept",
                           data={"csrf_token": token})
    assert accepted.status_code == 303  # the ASCII key still names it
