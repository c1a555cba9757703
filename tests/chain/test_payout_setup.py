"""The payout mode's setup and the Button API in it, without a node: `merchants set-payout` and its
checks (and the console's payout form, which asks to confirm an address without a checksum),
what `GET /payment-button/assets` offers a payout-mode merchant, confirm's CREATE2 address (made
for the payout stored with the payment, never the merchant's current one) and its 409s.
Factories are written as `networks set-factory` writes them after checking the code on the node
(tested against the real node in tests/chain/test_payout_collect.py)."""
import html
import re

import pytest
from support import dbutil
from support.chain_shop import XPUB, cli
from support.helpers import assert_error
from support.live_payments import preorder

from app.evm import forwarder
from app.evm.addresses import to_checksum_address

PAYOUT = "0x52908400098527886E0F7030069857D2E4169EE7"  # EIP-55's own test vector
OTHER = "0x8617E340B3D01FA5F11F306F4090FD50E238070D"
FACTORY = "0x5FC8d32690cc91D4c39d9d3abcBD16989F875707"


def set_factory(app, network_id, address=FACTORY, version=forwarder.VERSION):
    dbutil.execute(app.config["DATABASE"], "INSERT INTO network_factories (network_id, address,"
                   " tx_hash, created_at, version) VALUES (?, ?, NULL, 0, ?)", network_id, address,
                   version)


def rows(app, sql, *params):
    return dbutil.query(app.config["DATABASE"], sql, *params)


@pytest.mark.parametrize("address, message", [
    (PAYOUT.replace("E", "e", 1), "mixes upper and lower case but its EIP-55 checksum is wrong"),
    ("0x" + "0" * 40, "must not be the zero address"),
    (PAYOUT[:-1], "must be 0x followed by 40 hexadecimal digits."),
    ("52908400098527886E0F7030069857D2E4169EE7", "must be 0x followed by 40 hexadecimal digits."),
    ("0x52908400098527886E0F7030069857D2E4169EZ7", "must be 0x followed by 40 hexadecimal digits."),
])
def test_set_payout_refuses_what_is_not_a_checked_address(runner, merchant, app, address, message):
    result = runner.invoke(args=["merchants", "set-payout", merchant["merchantId"], address])
    assert result.exit_code == 1
    assert result.output.startswith("Error: The payout address") and message in result.output
    assert rows(app, "SELECT count(*) FROM merchant_payouts") == [(0,)]


MIXED = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # EIP-55's, mixed case
TYPO = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaee"  # MIXED in lower case, its last digit mistyped


@pytest.mark.parametrize("typed, case", [(TYPO, "lower"), (MIXED.lower(), "lower"),
                                         ("0x" + MIXED[2:].upper(), "upper")])
def test_set_payout_refuses_an_address_without_a_checksum_unless_unchecked(runner, merchant, app,
                                                                            typed, case):
    """All lower or all upper case carries no EIP-55 checksum: a typo in it (TYPO) cannot be told
    from the right address, so it is taken only with --unchecked, and the refusal says why and
    where the checksummed form comes from (never computed from what was typed: a typo's checksum is
    as valid as the right one's)."""
    refused = runner.invoke(args=["merchants", "set-payout", merchant["merchantId"], typed])
    assert (refused.exit_code, refused.output) == (1, (
        f"Error: The payout address {typed} has no EIP-55 checksum (it is all {case} case): a"
        " mistyped character in it cannot be caught, and what is sent to a mistyped address is"
        " lost. Copy the address from the wallet, which shows it with its checksum (in mixed"
        " case); or, after checking this one character by character, run again with"
        " --unchecked.\n"))
    assert to_checksum_address(typed) not in refused.output
    assert rows(app, "SELECT count(*) FROM merchant_payouts") == [(0,)]
    taken = cli(runner, "merchants", "set-payout", merchant["merchantId"], typed, "--unchecked")
    stored = to_checksum_address(typed)
    assert taken.output == (f"Payout address of {merchant['merchantId']} set to {stored}. New"
                            " payments' deposit addresses forward to it.\n")
    assert rows(app, "SELECT merchant_id, payout_address FROM merchant_payouts") == [
        (merchant["merchantId"], stored)]


@pytest.mark.parametrize("address", [MIXED, PAYOUT, "0x" + "12" * 20])
def test_set_payout_takes_an_address_written_with_its_checksum(runner, merchant, app, address):
    """Mixed case that is its valid checksum; all caps or digits only when that is the address's
    own EIP-55 form (PAYOUT is EIP-55's all-caps vector): no --unchecked needed."""
    result = cli(runner, "merchants", "set-payout", merchant["merchantId"], address)
    assert result.output == (f"Payout address of {merchant['merchantId']} set to {address}. New"
                             " payments' deposit addresses forward to it.\n")
    assert rows(app, "SELECT merchant_id, payout_address FROM merchant_payouts") == [
        (merchant["merchantId"], address)]


@pytest.mark.parametrize("address, message", [
    (MIXED[:-1] + "D", "mixes upper and lower case but its EIP-55 checksum is wrong"),
    ("0x" + "0" * 40, "must not be the zero address"),
    ("0x" + "ab" * 19 + "a", "must be 0x followed by 40 hexadecimal digits."),
])
def test_set_payout_unchecked_still_refuses_a_wrong_checksum_the_zero_address_and_malformed(
        runner, merchant, app, address, message):
    result = runner.invoke(args=["merchants", "set-payout", merchant["merchantId"], address,
                                 "--unchecked"])
    assert result.exit_code == 1 and message in result.output
    assert rows(app, "SELECT count(*) FROM merchant_payouts") == [(0,)]


def test_set_payout_of_an_unknown_merchant(runner, app):
    unknown = runner.invoke(args=["merchants", "set-payout", "mer_nope", PAYOUT])
    assert (unknown.exit_code, unknown.output) == (
        1, f"Error: No merchant mer_nope in {app.config['DATABASE']}.\n")


# --- The console's payout form (owners) -----------------------------------------------------------
PASSWORD = "correct horse battery"


def console_of(runner, client, merchant, role="owner"):
    """`client` logged in to the console as a user of `merchant` with `role`."""
    email = f"{role}@shop.example"
    created = runner.invoke(args=["users", "create", email, "--merchant", merchant["merchantId"],
                                  "--role", role], input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    page = client.get("/dashboard/login")
    logged = client.post("/dashboard/login", data={"email": email, "password": PASSWORD,
                                                   "csrf_token": csrf_of(page.text)})
    assert logged.status_code == 303
    return client


def csrf_of(text):
    return re.search(r'name="csrf_token" value="([^"]+)"', text).group(1)


def hidden_fields(text):
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', text))


def payout_stored(app):
    return rows(app, "SELECT payout_address FROM merchant_payouts")


def test_the_owner_saves_a_checksummed_payout_address_in_the_console(runner, client, merchant, app):
    console = console_of(runner, client, merchant)
    page = console.get("/dashboard/settings")
    assert 'action="/dashboard/settings/payout"' in page.text and 'name="address"' in page.text
    saved = console.post("/dashboard/settings/payout", data={"csrf_token": csrf_of(page.text),
                                                             "address": f"  {MIXED} "})
    assert (saved.status_code, saved.headers["Location"]) == (
        303, "/dashboard/settings?done=payout#payout")
    assert payout_stored(app) == [(MIXED,)]
    shown = console.get(saved.headers["Location"])
    assert "Payout address saved" in shown.text and MIXED in shown.text


@pytest.mark.parametrize("typed, case", [(TYPO, "lower"), ("0x" + MIXED[2:].upper(), "upper")])
def test_the_console_asks_to_confirm_an_address_without_a_checksum(runner, client, merchant, app,
                                                                   typed, case):
    """All lower or all upper case: a confirmation page naming the risk (a typo cannot be caught)
    and where the checksummed form comes from; nothing saved until it is confirmed."""
    console = console_of(runner, client, merchant)
    token = csrf_of(console.get("/dashboard/settings").text)
    asked = console.post("/dashboard/settings/payout", data={"csrf_token": token, "address": typed})
    assert asked.status_code == 200
    text = html.unescape(asked.text)
    assert "Save a payout address without a checksum?" in text
    assert (f"The payout address {typed} has no EIP-55 checksum (it is all {case} case): a mistyped"
            " character in it cannot be caught, and what is sent to a mistyped address is"
            " lost.") in text
    assert ("Copy the address from your wallet, which shows it with its checksum (in mixed case)"
            in text)
    assert to_checksum_address(typed) not in text  # never offered: a typo's checksum is as valid
    assert 'action="/dashboard/settings/payout"' in asked.text
    assert ">Save without checksum</button>" in asked.text
    assert 'href="/dashboard/settings#payout">Go back</a>' in asked.text
    fields = hidden_fields(asked.text)
    assert (fields["address"], fields["unchecked"]) == (typed, "1")
    assert payout_stored(app) == []
    confirmed = console.post("/dashboard/settings/payout", data=fields)
    assert (confirmed.status_code, confirmed.headers["Location"]) == (
        303, "/dashboard/settings?done=payout#payout")
    assert payout_stored(app) == [(to_checksum_address(typed),)]


@pytest.mark.parametrize("address, message", [
    (MIXED[:-1] + "D", "mixes upper and lower case but its EIP-55 checksum is wrong"),
    ("0x" + "0" * 40, "must not be the zero address"),
    (MIXED[:-1], "must be 0x followed by 40 hexadecimal digits."),
    ("", "must be 0x followed by 40 hexadecimal digits."),
])
def test_the_console_refuses_a_wrong_checksum_the_zero_address_and_malformed_even_confirmed(
        runner, client, merchant, app, address, message):
    console = console_of(runner, client, merchant)
    token = csrf_of(console.get("/dashboard/settings").text)
    for confirmed in ({}, {"unchecked": "1"}):
        refused = console.post("/dashboard/settings/payout",
                               data={"csrf_token": token, "address": address, **confirmed})
        assert refused.status_code == 400 and message in html.unescape(refused.text)
        assert 'id="payout"' in refused.text  # the settings page, its form's panel saying why
    assert payout_stored(app) == []


def test_settings_page_forms_read_their_values_as_ascii(runner, client, merchant, app):
    """A form value with a character outside ASCII is the 400 page: "٣" is no tolerance of 3, a
    fullwidth "０x" no address."""
    console = console_of(runner, client, merchant)
    token = csrf_of(console.get("/dashboard/settings").text)
    tolerance = rows(app, "SELECT underpayment_tolerance FROM merchants")
    for path, field, value in (("/dashboard/settings/tolerance", "tolerance", "٣"),
                               ("/dashboard/settings/tolerance", "tolerance", "1.𝟓"),
                               ("/dashboard/settings/payout", "address", "０x" + MIXED[2:]),
                               ("/dashboard/settings/payout", "address", MIXED[:-1] + "ｄ")):
        refused = console.post(path, data={"csrf_token": token, field: value})
        assert refused.status_code == 400, (field, value)
        assert f"{field}: Must be written in ASCII characters" in refused.text
    assert payout_stored(app) == []
    assert rows(app, "SELECT underpayment_tolerance FROM merchants") == tolerance


def test_a_viewer_gets_no_payout_form_and_a_merchant_in_xpub_mode_none_either(runner, client,
                                                                               merchant, app,
                                                                               make_merchant):
    viewer = console_of(runner, client, merchant, role="viewer")
    page = viewer.get("/dashboard/settings")
    assert 'name="address"' not in page.text
    refused = viewer.post("/dashboard/settings/payout", data={"csrf_token": csrf_of(page.text),
                                                              "address": MIXED})
    assert refused.status_code == 403 and payout_stored(app) == []
    viewer.post("/dashboard/logout", data={"csrf_token": csrf_of(page.text)})
    xpub_shop = make_merchant(name="Xpub shop")
    cli(runner, "merchants", "set-xpub", xpub_shop["merchantId"], XPUB)
    owner = console_of(runner, client, xpub_shop)
    page = owner.get("/dashboard/settings")
    assert 'name="address"' not in page.text and "merchants set-payout" not in page.text
    refused = owner.post("/dashboard/settings/payout", data={"csrf_token": csrf_of(page.text),
                                                             "address": MIXED})
    assert refused.status_code == 409 and "done by the operator" in html.unescape(refused.text)
    assert payout_stored(app) == []


def test_set_payout_refuses_another_merchant_s_payout_or_forwarded_address(runner, merchant,
                                                                             make_merchant, button,
                                                                             api, app, chains):
    """A transfer from a payout address settles that merchant's refunds: a second merchant setting
    the same wallet (its current payout, or one its deposit addresses still forward to) would take
    the first one's refund payments. Refused; setting one's own again is fine."""
    cli(runner, "merchants", "set-payout", merchant["merchantId"], PAYOUT)
    other = make_merchant(name="Other shop")
    refused = runner.invoke(args=["merchants", "set-payout", other["merchantId"], PAYOUT.lower(),
                                  "--unchecked"])
    assert (refused.exit_code, refused.output) == (1, (
        f"Error: Another merchant already has {PAYOUT} as its payout address (or its deposit"
        " addresses forward to it): two merchants sharing one wallet could not tell their refunds"
        " and collections apart.\n"))
    set_factory(app, "local")
    assert button.confirm(preorder(api)["processId"]).status_code == 200  # forwards to PAYOUT
    cli(runner, "merchants", "set-payout", merchant["merchantId"], OTHER)
    cli(runner, "merchants", "set-payout", merchant["merchantId"], OTHER)  # its own, again
    still = runner.invoke(args=["merchants", "set-payout", other["merchantId"], PAYOUT])
    assert still.exit_code == 1 and "Another merchant already has" in still.output
    assert rows(app, "SELECT merchant_id, payout_address FROM merchant_payouts") == [
        (merchant["merchantId"], OTHER)]


def test_assets_offer_only_networks_with_a_factory(runner, merchant, button, app, chains):
    cli(runner, "merchants", "set-payout", merchant["merchantId"], PAYOUT)
    assert button.assets().get_json() == {"data": []}  # no factory anywhere yet
    set_factory(app, "testnet")
    assert button.assets().get_json() == {"data": [
        {"id": "usdc", "symbol": "USDC", "name": "USD Coin",
         "networks": [{"id": "testnet", "name": "Test net", "chainId": 11155111,
                       "confirmations": 12, "finality": "confirmations"}]}]}


def test_confirm_without_a_factory_is_payment_method_unavailable(runner, merchant, api, button,
                                                                 app, chains):
    cli(runner, "merchants", "set-payout", merchant["merchantId"], PAYOUT)
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)  # both: payout mode
    pid = preorder(api)["processId"]
    assert_error(button.confirm(pid), 409, "payment_method_unavailable",
                 "This merchant's payments are collected by a forwarder contract, which network"
                 " local does not offer yet: choose another network.")
    assert rows(app, "SELECT count(*) FROM payments") == [(0,)]
    assert_error(button.confirm(pid, network_id="nowhere"), 400, "validation_error")


def test_confirm_gives_the_create2_address_of_the_payout_it_was_made_for(runner, merchant, api,
                                                                         button, app, chains):
    cli(runner, "merchants", "set-payout", merchant["merchantId"], PAYOUT)
    set_factory(app, "local")
    set_factory(app, "testnet", OTHER)  # another factory address on the other network
    first = preorder(api)["processId"]
    confirmed = button.confirm(first)
    assert confirmed.status_code == 200
    address = confirmed.get_json()["payment"]["address"]
    assert address == forwarder.deposit_address(FACTORY, PAYOUT, forwarder.salt(first))
    # The same address whatever the choice, on networks with the same factory.
    dai = button.confirm(first, asset_id="dai")
    assert dai.status_code == 200 and dai.get_json()["payment"]["address"] == address
    assert_error(button.confirm(first, network_id="testnet"), 409, "payment_method_unavailable",
                 "This payment's address was made with another network's forwarder factory, which"
                 " is not at the same address on network testnet: choose another network.")

    cli(runner, "merchants", "set-payout", merchant["merchantId"], OTHER)
    second = preorder(api)["processId"]
    other = button.confirm(second).get_json()["payment"]["address"]
    assert other == forwarder.deposit_address(FACTORY, OTHER, forwarder.salt(second))
    again = button.confirm(first, asset_id="usdc")  # confirmed before the change: unchanged
    assert again.get_json()["payment"]["address"] == address
    assert set(rows(app, "SELECT process_id, mode, address_index, payout_address, factory"
                         " FROM payments")) == {(first, "payout", None, PAYOUT, FACTORY),
                                                (second, "payout", None, OTHER, FACTORY)}

    refused = runner.invoke(args=["merchants", "set-payout", merchant["merchantId"], address])
    assert refused.exit_code == 1 and "is a deposit address of this service" in refused.output


def test_xpub_payments_stay_xpub_when_a_payout_address_comes(runner, merchant, api, button, app,
                                                             chains):
    cli(runner, "merchants", "set-xpub", merchant["merchantId"], XPUB)
    pid = preorder(api)["processId"]
    address = button.confirm(pid).get_json()["payment"]["address"]
    cli(runner, "merchants", "set-payout", merchant["merchantId"], PAYOUT)
    changed = button.confirm(pid, asset_id="dai")  # no factory needed: an xpub address
    assert changed.status_code == 200 and changed.get_json()["payment"]["address"] == address
    assert rows(app, "SELECT mode, address_index, payout_address FROM payments") == [
        ("xpub", 0, None)]


def test_deploy_factory_and_collect_refuse_a_bad_key_file_without_quoting_it(runner, tmp_path,
                                                                             chains):
    path = tmp_path / "key"
    path.write_text("0x" + "ab" * 31 + "zz\n")
    for args in (["networks", "deploy-factory", "local"], ["collect", "local"]):
        result = runner.invoke(args=[*args, "--key-file", str(path)])
        assert result.exit_code == 1
        assert result.output == (f"Error: The key file {path} must hold one hex private key (64"
                                 " hex digits, with or without 0x) and nothing else.\n")
    missing = runner.invoke(args=["collect", "local", "--key-file", str(tmp_path / "none")])
    assert missing.exit_code == 1
    assert missing.output == (f"Error: Cannot read the key file {tmp_path / 'none'}: No such file"
                              " or directory.\n")
    path.write_text("0x" + "00" * 32)
    zero = runner.invoke(args=["collect", "local", "--key-file", str(path)])
    assert zero.output == (f"Error: The key file {path} does not hold a valid secp256k1 private"
                           " key.\n")


@pytest.mark.parametrize("later", [False, True])
def test_version_4_keeps_every_payment_and_earlier_choice_and_their_constraints(make_database,
                                                                                clock, later):
    """A database at version 2 holding an xpub-mode payment with an earlier choice and a transfer:
    init-db applies version 4 (on SQLite by rebuilding `payments` and `payment_choices`); every row
    is kept, the payment is in the xpub mode, and the foreign keys and the mode's CHECK hold.
    `later`: the database also has a version numbered after 4 (merged before it): 4 is applied."""
    from app import create_app
    from app.data import schema as schema_rows
    from app.db import init_db, is_postgres_url

    database = make_database("v2")
    kind = "postgresql" if is_postgres_url(database) else "sqlite"
    conn = dbutil.open_connection(database)
    try:
        dbutil.schema_up_to(conn, database, 2)
        if later:
            conn.execute("INSERT INTO schema_version VALUES (99, '0099_later.sql', 0)")
        conn.execute("INSERT INTO merchants (id, name, livemode, public_key, webhook_secret,"
                     " created_at) VALUES ('mer_1', 'Shop', 0, 'pk_test_1', 'whsec_x', 0)")
        conn.execute("INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode,"
                     " created_at, updated_at, expires_at) VALUES ('p-1', 'mer_1', 'pending', '5',"
                     " '{}', 0, 0, 0, 1800)")
        conn.execute("INSERT INTO networks (id, name, chain_id, rpc_url, confirmations,"
                     " start_block, scanned_block, head_block, created_at) VALUES ('local', 'L',"
                     " 31337, 'http://127.0.0.1:1', 1, 1, 0, 0, 0)")
        conn.execute("INSERT INTO payments (process_id, merchant_id, address_index, address,"
                     " asset_id, network_id, chain_id, token_contract, decimals, amount_due,"
                     " created_at, updated_at) VALUES ('p-1', 'mer_1', 7, ?, 'usdc', 'local',"
                     " 31337, ?, 6, '5000000', 0, 1)", (PAYOUT, FACTORY))
        conn.execute("INSERT INTO payment_choices VALUES ('p-1', 'local', ?, 18, 1)", (OTHER,))
        conn.execute("INSERT INTO transfers VALUES (31337, '0xaa', 0, 'local', 'p-1', ?, '0xbb',"
                     " '5000000', 5, '0xcc', 10, 'confirmed', 10, 10)", (FACTORY,))
    finally:
        conn.close()
    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    with app.app_context():
        before, after = init_db()
    app.extensions["db"].close_all()
    assert (before, after) == (99, 99) if later else (2, schema_rows.latest_version(kind))
    assert (4, "0004_payouts.sql") in dbutil.query(database,
                                                   "SELECT version, name FROM schema_version")
    assert dbutil.query(database, "SELECT process_id, address_index, address, amount_due,"
                                  " updated_at, mode, payout_address, factory FROM payments") == [
        ("p-1", 7, PAYOUT, "5000000", 1, "xpub", None, None)]
    assert dbutil.query(database, "SELECT process_id, network_id, token_contract, decimals,"
                        " created_at FROM payment_choices") == [("p-1", "local", OTHER, 18, 1)]
    assert dbutil.query(database, "SELECT count(*) FROM transfers") == [(1,)]
    for bad in ("INSERT INTO payment_choices (process_id, network_id, token_contract, decimals,"
                " created_at) VALUES ('nope', 'local', '0x1', 6, 1)",  # foreign key
                "UPDATE payments SET mode = 'payout'",  # a payout-mode payment needs its payout
                "UPDATE payments SET address_index = NULL"):  # an xpub-mode one its index
        with dbutil.connect(database) as conn:
            if kind == "sqlite":
                conn.execute("PRAGMA foreign_keys = ON")  # as the service's connections have it
                assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
            with pytest.raises(Exception) as refused:
                conn.execute(bad)
        assert "constraint" in str(refused.value).lower()


def test_version_9_keeps_collections_and_factories_in_their_new_states(make_database, clock):
    """A database of the release before version 9, with a factory and collections in every old
    state: the factory is of version 1 (the only one then), `sent` is `pending`, `succeeded`
    `confirmed` and `failed` `reverted`, every item is kept, and a nonce may now be used twice (a
    replacement)."""
    from app import create_app
    from app.data import schema as schema_rows
    from app.db import init_db, is_postgres_url

    database = make_database("v8")
    kind = "postgresql" if is_postgres_url(database) else "sqlite"
    conn = dbutil.open_connection(database)
    try:
        dbutil.schema_up_to(conn, database, 8)
        conn.execute("INSERT INTO merchants (id, name, livemode, public_key, webhook_secret,"
                     " created_at) VALUES ('mer_1', 'Shop', 0, 'pk_test_1', 'whsec_x', 0)")
        conn.execute("INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode,"
                     " created_at, updated_at, expires_at) VALUES ('p-1', 'mer_1', 'completed',"
                     " '5', '{}', 0, 0, 0, 1800)")
        conn.execute("INSERT INTO networks (id, name, chain_id, rpc_url, confirmations,"
                     " start_block, scanned_block, head_block, created_at) VALUES ('local', 'L',"
                     " 31337, 'http://127.0.0.1:1', 1, 1, 0, 0, 0)")
        conn.execute("INSERT INTO network_factories VALUES ('local', ?, NULL, 0)", (FACTORY,))
        conn.execute("INSERT INTO payments (process_id, merchant_id, address_index, address,"
                     " asset_id, network_id, chain_id, token_contract, decimals, amount_due,"
                     " created_at, updated_at, mode, payout_address, factory) VALUES ('p-1',"
                     " 'mer_1', NULL, ?, 'usdc', 'local', 31337, ?, 6, '5000000', 0, 1, 'payout',"
                     " ?, ?)", (OTHER, FACTORY, PAYOUT, FACTORY))
        for n, status in enumerate(("sent", "succeeded", "failed")):
            conn.execute("INSERT INTO collections (id, network_id, chain_id, factory, sender,"
                         " nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, status,"
                         " created_at) VALUES (?, 'local', 31337, ?, ?, ?, ?, '0x02', 100000,"
                         " '10', ?, 5)",
                         (n + 1, FACTORY, PAYOUT, n, "0x" + f"{n}" * 64, status))
            conn.execute("INSERT INTO collection_items VALUES (?, ?, ?, 'p-1', 'mer_1', ?, ?)",
                         (n + 1, OTHER, FACTORY, PAYOUT, str(1000 + n)))
    finally:
        conn.close()
    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    with app.app_context():
        assert init_db()[1] == schema_rows.latest_version(kind)
    app.extensions["db"].close_all()
    assert dbutil.query(database, "SELECT address, version FROM network_factories") \
        == [(FACTORY, 1)]
    assert dbutil.query(database, "SELECT id, status, nonce FROM collections ORDER BY id") == [
        (1, "pending", 0), (2, "confirmed", 1), (3, "reverted", 2)]
    assert dbutil.query(database, "SELECT collection_id, amount FROM collection_items ORDER BY"
                                  " collection_id") == [(1, "1000"), (2, "1001"), (3, "1002")]
    dbutil.execute(database, "INSERT INTO collections (id, network_id, chain_id, factory, sender,"
                   " nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, status, created_at) VALUES"
                   " (4, 'local', 31337, ?, ?, 0, ?, '0x02', 100000, '20', 'pending', 6)",
                   FACTORY, PAYOUT, "0x" + "9" * 64)  # a replacement of nonce 0
    with pytest.raises(Exception) as refused:
        dbutil.execute(database, "UPDATE collections SET status = 'succeeded' WHERE id = 1")
    assert "constraint" in str(refused.value).lower()
