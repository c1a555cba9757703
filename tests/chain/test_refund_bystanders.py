"""Bystanders' transfers settle no refund, named or not (API.md "Refunds"), on the real test chain:
the merchant names the customer's own self-transfer, a transfer from the wallet that paid the order,
or another merchant's payment to the customer, and the refund stays pending, its name cleared and
kept with the reason (the Refund object's `clearedTxHash` and `clearedReason`, the console's refund
page); a refund whose address is the merchant's payout address is not settled by that address paying
itself; "already named" is per merchant, so another merchant's name neither shows nor blocks. A
wallet the service does not know that is none of these (the merchant's exchange account) settles a
refund it names. The Refund object's `sender` and `namedBy` say who paid it and who named it."""
import logging
import re

from support.chain_shop import OTHER_XPUB, Shop, add_network, cli
from support.helpers import assert_error
from test_refunds_chain import name, refund, send_from

from app.evm.addresses import to_checksum_address

CONFIRMATIONS = 2
PAYOUT = 0  # the dev account holding the test token: the merchant's payout wallet
PASSWORD = "correct horse battery"
SELF_PAID = ("moves the refund's token to the refund's address only from that address itself (the"
             " customer paying itself): only your own payment settles your refund")
NOT_YOURS = ("was sent from an address that is not yours alone: only your own payment settles your"
             " refund")
PAID_IT = ("was sent from an address that paid this process (the customer's): only your own payment"
           " settles your refund")


def shown(shop, process_id, made):
    response = shop.client.get(f"/payment-button/process/{process_id}/refunds",
                               headers=shop.api.headers())
    assert response.status_code == 200
    return next(r for r in response.get_json()["data"] if r["refundId"] == made["refundId"])


def open_merchant(app, client, runner, chain, clock, merchant, *, payout=PAYOUT, xpub=None):
    """A merchant whose order (paid from the token's holder, the first dev account) is completed,
    then given `payout` as its payout address (None: none, xpub mode): (shop, process id, its
    deposit address)."""
    shop = Shop(app, client, runner, chain, clock, merchant, **({"xpub": xpub} if xpub else {}))
    shop.sync_clock()
    process_id, deposit = shop.order(19.99)
    chain.transfer(deposit, 19_990_000)
    chain.mine(CONFIRMATIONS - 1)
    shop.watch()
    assert shop.process(process_id)["status"] == "completed"
    if payout is not None:
        cli(runner, "merchants", "set-payout", merchant["merchantId"],
            to_checksum_address(chain.accounts[payout]))
    return shop, process_id, deposit


def settle(shop, chain, clock):
    chain.mine(CONFIRMATIONS)
    clock.advance(30)
    shop.watch()


def test_the_customer_s_self_transfer_named_settles_nothing(app, client, runner, chain, clock,
                                                             make_merchant, caplog):
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    customer = chain.accounts[9]
    chain.transfer(customer, 10_000_000)  # the customer holds the token
    shop, process_id, _ = open_merchant(app, client, runner, chain, clock, make_merchant())
    made = refund(shop, process_id, 10, customer)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    self_paid, _ = chain.transfer(customer, 10_000_000, sender=9)  # the customer to itself
    named = name(shop, process_id, made["refundId"], self_paid)
    assert named.status_code == 200
    with caplog.at_level(logging.WARNING, logger="app.chain.refunds"):
        settle(shop, chain, clock)
    after = shown(shop, process_id, made)
    assert after["status"] == "pending"
    assert named.get_json()["namedBy"] == "secret key"
    assert (after["txHash"], after["sender"], after["namedBy"]) == (None, None, None)
    assert (after["clearedTxHash"], after["clearedReason"]) == (
        self_paid, f"Transaction {self_paid} {SELF_PAID}.")
    assert f"transaction {self_paid} {SELF_PAID}: its name is cleared" in caplog.text
    assert "refund.completed" not in shop.event_types(process_id)

    # The merchant pays it from its payout address: found by itself, the cleared name still shown.
    paid, _ = chain.transfer(customer, 10_000_000, sender=PAYOUT)
    settle(shop, chain, clock)
    after = shown(shop, process_id, made)
    assert (after["status"], after["txHash"], after["sender"], after["namedBy"]) == (
        "completed", paid, to_checksum_address(chain.accounts[PAYOUT]), None)
    assert after["clearedTxHash"] == self_paid


def test_a_payout_address_paying_itself_settles_no_refund_to_it(app, client, runner, chain, clock,
                                                                 make_merchant):
    """A refund whose address is the merchant's own payout address (a mistake, or a customer that
    gave it): that address paying itself is no payment, found or named."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    shop, process_id, _ = open_merchant(app, client, runner, chain, clock, make_merchant())
    payout = to_checksum_address(chain.accounts[PAYOUT])
    made = refund(shop, process_id, 3, payout)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    itself, _ = chain.transfer(payout, 3_000_000, sender=PAYOUT)
    settle(shop, chain, clock)
    assert shown(shop, process_id, made)["status"] == "pending"  # not found
    assert name(shop, process_id, made["refundId"], itself).status_code == 200
    settle(shop, chain, clock)
    after = shown(shop, process_id, made)
    assert (after["status"], after["clearedTxHash"], after["clearedReason"]) == (
        "pending", itself, f"Transaction {itself} {SELF_PAID}.")


def _console(runner, client, merchant, email):
    created = runner.invoke(args=["users", "create", email, "--merchant", merchant["merchantId"],
                                  "--role", "owner"], input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    page = client.get("/dashboard/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)[1]
    response = client.post("/dashboard/login", data={"email": email, "password": PASSWORD,
                                                      "csrf_token": token})
    assert response.status_code == 303
    return client


def test_the_payers_transfer_named_in_the_console_settles_nothing(app, client, runner, chain,
                                                                   clock, make_merchant):
    """The customer paid the order from its wallet (the token's holder) and pays the refund's
    address from it: an address that paid the process is the customer's, whoever names it."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    customer = chain.accounts[10]
    merchant = make_merchant()
    shop, process_id, _ = open_merchant(app, client, runner, chain, clock, merchant, payout=None)
    made = refund(shop, process_id, 4, customer)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    theirs, _ = chain.transfer(customer, 4_000_000)  # from the wallet that paid the order
    console = _console(runner, app.test_client(), merchant, "owner@shop.example")
    path = f"/dashboard/processes/{process_id}/refunds/{made['refundId']}"
    page = console.get(path)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)[1]
    named = console.post(path + "/transaction", data={"csrf_token": token, "tx_hash": theirs},
                         follow_redirects=True)
    assert named.status_code == 200
    before = shown(shop, process_id, made)
    settle(shop, chain, clock)
    after = shown(shop, process_id, made)
    assert after["status"] == "pending"
    assert '<dd id="named-by">owner@shop.example</dd>' in named.text
    assert before["namedBy"] == "owner@shop.example"
    assert (after["txHash"], after["namedBy"], after["clearedTxHash"]) == (None, None, theirs)
    assert after["clearedReason"] == f"Transaction {theirs} {PAID_IT}."
    page = console.get(path).text
    assert f'<span class="mono wrap" id="cleared-tx">{theirs}</span>' in page
    assert "your own payment settles your refund.</span>" in page and 'id="named-by"' not in page
    assert 'name="tx_hash"' in page  # the field takes the right hash again


def test_another_wallet_of_the_merchants_named_settles_the_refund(app, client, runner, chain, clock,
                                                                  make_merchant):
    """A wallet the service does not know (an exchange's, the merchant's second one) that is no
    bystander's: the merchant names its transfer, and it settles the refund."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    customer, exchange = chain.accounts[10], chain.accounts[12]
    chain.transfer(exchange, 10_000_000)
    shop, process_id, _ = open_merchant(app, client, runner, chain, clock, make_merchant())
    made = refund(shop, process_id, 4, customer)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    paid, _ = chain.transfer(customer, 4_000_000, sender=12)
    assert name(shop, process_id, made["refundId"], paid).status_code == 200
    settle(shop, chain, clock)
    after = shown(shop, process_id, made)
    assert (after["status"], after["sender"], after["namedBy"]) == (
        "completed", to_checksum_address(exchange), "secret key")


def test_another_merchant_s_payment_named_settles_nothing_and_its_names_block_nobody(
        app, client, runner, chain, clock, make_merchant, caplog):
    """B refunds the customer from its deposit address (xpub mode, no payout address) and names it;
    A names B's transaction too, before and after B: every naming is accepted (A learns nothing of
    B's name, and cannot hold B's back), B's refund completes with its sender, A's is cleared with
    a reason that says nothing of B, and completes once A pays."""
    add_network(runner, chain, confirmations=CONFIRMATIONS)
    a, a_process, _ = open_merchant(app, client, runner, chain, clock, make_merchant(name="A"))
    b, b_process, b_deposit = open_merchant(app, client, runner, chain, clock,
                                            make_merchant(name="B"), payout=None, xpub=OTHER_XPUB)
    customer = chain.accounts[12]
    a_refund, b_refund = refund(a, a_process, 5, customer), refund(b, b_process, 5, customer)
    chain.next_timestamp(max(clock.now, chain.timestamp()) + 5)
    b_first, _ = send_from(chain, b_deposit, customer, 5_000_000)
    assert name(a, a_process, a_refund["refundId"], b_first).status_code == 200  # A first
    by_b = name(b, b_process, b_refund["refundId"], b_first)  # B is not blocked by A's name
    assert by_b.status_code == 200, by_b.get_data(as_text=True)
    b_next = refund(b, b_process, 5, customer)
    b_second, _ = send_from(chain, b_deposit, customer, 5_000_000)
    # B names its next payment first: A naming it is not refused, and its answer is A's own refund.
    assert name(b, b_process, b_next["refundId"], b_second).status_code == 200
    by_a = name(a, a_process, a_refund["refundId"], b_second)
    assert by_a.status_code == 200, by_a.get_data(as_text=True)
    assert by_a.get_json() == {**shown(a, a_process, a_refund), "txHash": b_second}
    assert by_a.get_json()["namedBy"] == "secret key"
    # Within one merchant a hash names one refund.
    b_other = refund(b, b_process, 1, customer)
    assert_error(name(b, b_process, b_other["refundId"], b_second), 409, "invalid_state")

    with caplog.at_level(logging.WARNING, logger="app.chain.refunds"):
        settle(a, chain, clock)
    for made, paid in ((b_refund, b_first), (b_next, b_second)):
        theirs = shown(b, b_process, made)
        assert (theirs["status"], theirs["txHash"], theirs["sender"], theirs["namedBy"]) == (
            "completed", paid, b_deposit, "secret key")
    mine = shown(a, a_process, a_refund)
    assert (mine["status"], mine["txHash"], mine["clearedTxHash"]) == ("pending", None, b_second)
    assert mine["clearedReason"] == f"Transaction {b_second} {NOT_YOURS}."
    assert "merchant" not in mine["clearedReason"]
    assert f"transaction {b_second} {NOT_YOURS}: its name is cleared" in caplog.text

    paid, _ = chain.transfer(customer, 5_000_000, sender=PAYOUT)  # A pays its own
    settle(a, chain, clock)
    mine = shown(a, a_process, a_refund)
    assert (mine["status"], mine["txHash"], mine["sender"]) == (
        "completed", paid, to_checksum_address(chain.accounts[PAYOUT]))
    assert a.event_types(a_process).count("refund.completed") == 1
    assert b.event_types(b_process).count("refund.completed") == 2
