"""The demo shop routes (DEMO_SHOP on), through the Flask test client: the shop's server side and
the built-in webhook receiver. The same pages in Chromium, with the whole loop:
tests/demo/test_demo_e2e.py."""
import json
import re

import pytest
from markupsafe import escape
from support.helpers import Api, assert_error, events_of

from app.webhooks.signing import webhook_headers

AMOUNT_FORMAT = "Enter the amount as a number, e.g. 19.99."
NOT_SET_UP = "The demo merchant is not set up: run `flask --app app demo-merchant`"


@pytest.fixture
def app_config():
    return {"DEMO_SHOP": True}


@pytest.fixture
def demo(runner, app):
    result = runner.invoke(args=["demo-merchant", "--webhook-url", "http://127.0.0.1:5000/demo/webhooks"])
    assert result.exit_code == 0, result.output
    with open(app.config["DEMO_MERCHANT_FILE"]) as f:
        return json.load(f)


def checkout(client, amount, order_ref=""):
    return client.post("/", data={"amount": amount, "order_ref": order_ref})


def button_attrs(html):
    return re.findall(r'<payment-button process-id="([^"]*)" public-key="([^"]*)"', html)


@pytest.mark.parametrize("app_config", [{}])
@pytest.mark.parametrize("method, path", [("GET", "/"), ("POST", "/"), ("GET", "/demo/webhooks"),
                                          ("POST", "/demo/webhooks")])
def test_off_by_default_the_demo_routes_do_not_exist(client, method, path):
    assert_error(client.open(path, method=method), 404, "not_found")


def test_shop_page_has_the_form_and_no_button_yet(client, demo):
    response = client.get("/")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and response.mimetype == "text/html"
    assert ('<input id="amount" name="amount"' in html
            and '<input id="order_ref" name="order_ref"' in html)
    assert button_attrs(html) == []
    assert '<iframe src="/demo/webhooks"' in html


def test_shop_without_its_merchant_says_how_to_set_it_up(client):
    for response in (client.get("/"), checkout(client, "5")):
        assert response.status_code == 503
        assert escape(NOT_SET_UP) in response.get_data(as_text=True)


def test_checkout_creates_the_preorder_server_side_and_renders_the_button(client, runner, demo):
    response = checkout(client, " 19.90 ", "A-1001")
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    [(process_id, public_key)] = button_attrs(html)
    assert public_key == demo["publicKey"]
    assert demo["secretKey"] not in html and demo["webhookSecret"] not in html
    assert '<script src="/payment-button/button.js"></script>' in html
    process = Api(client, demo["secretKey"]).get(process_id)
    assert ('"amount":19.90,"currency":"USD","metadata":{"orderRef":"A-1001"},"livemode":false'
            in process.get_data(as_text=True))
    assert process.get_json()["status"] == "pending"
    assert events_of(runner, process_id) == []


def test_a_euro_order_is_priced_in_euros_and_its_places_are_the_currencys(client, demo):
    html = client.post("/", data={"amount": "12.50", "currency": "EUR"}).get_data(as_text=True)
    assert '<option value="EUR" selected>EUR: Euro</option>' in html
    [(process_id, _)] = button_attrs(html)
    body = Api(client, demo["secretKey"]).get(process_id).get_json()
    assert (body["amount"], body["currency"]) == (12.5, "EUR")
    refused = client.post("/", data={"amount": "1.005", "currency": "EUR"})
    assert refused.status_code == 400
    assert ('<p class="field-error" id="amount-error">Must have at most 2 decimal places (EUR).</p>'
            in refused.get_data(as_text=True))


def test_checkout_without_an_order_reference_sends_empty_metadata(client, demo):
    [(process_id, _)] = button_attrs(checkout(client, "1e2").get_data(as_text=True))
    body = Api(client, demo["secretKey"]).get(process_id).get_json()
    assert (body["amount"], body["metadata"]) == (100, {})


@pytest.mark.parametrize("amount, order_ref, field, message", [
    ("", "A-1", "amount", AMOUNT_FORMAT),
    ("abc", "A-1", "amount", AMOUNT_FORMAT),
    ("19,99", "A-1", "amount", AMOUNT_FORMAT),
    ('"5"', "A-1", "amount", AMOUNT_FORMAT),
    ("true", "A-1", "amount", AMOUNT_FORMAT),
    ("NaN", "A-1", "amount", AMOUNT_FORMAT),
    ("5 5", "A-1", "amount", AMOUNT_FORMAT),
    ("0", "A-1", "amount", "Must be greater than 0."),
    ("-1", "A-1", "amount", "Must be greater than 0."),
    ("1.999", "A-1", "amount", "Must have at most 2 decimal places (USD)."),
    ("0.30000000000000004", "A-1", "amount", "Must have at most 2 decimal places (USD)."),
    ("1000000.01", "A-1", "amount", "Must be less than or equal to 1000000."),
    ("5", "x" * 10_240, "order_ref",
     "Must be at most 10240 bytes as compact UTF-8 JSON (got 10255)."),
])
def test_checkout_shows_validation_errors_next_to_their_field(client, demo, amount, order_ref,
                                                              field, message):
    response = checkout(client, amount, order_ref)
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    error_id = {"amount": "amount-error", "order_ref": "order-ref-error"}[field]
    assert f'<p class="field-error" id="{error_id}">{escape(message)}</p>' in html
    field_name = {"amount": "amount", "order_ref": "order reference"}[field]
    assert (f'<p class="error" role="alert">The preorder was not created:'
            f' check the {field_name}.</p>' in html)
    assert f'value="{escape(amount.strip())}"' in html  # what was typed, shown again
    assert button_attrs(html) == []
    assert Api(client, demo["secretKey"]).list().get_json() == {"data": [], "hasMore": False}


def test_checkout_after_the_database_was_reset_says_how_to_recover(client, runner, demo):
    assert runner.invoke(args=["init-db", "--reset"]).exit_code == 0
    response = checkout(client, "5")
    assert response.status_code == 503
    assert f"Invalid secret key. {escape(NOT_SET_UP)}" in response.get_data(as_text=True)


# --- the built-in webhook receiver ----------------------------------------------------------------

BODY = (b'{"type":"payment.completed","timestamp":"2026-11-18T11:06:40Z","data":{"processId":"p-1",'
        b'"status":"completed","amount":1234.50,"metadata":{"orderRef":"A-1001"}}}')


def deliver(client, secret, msg_id, now, body=BODY, **header_changes):
    headers = webhook_headers(secret, msg_id, now, body)
    headers.update(header_changes)
    return client.post("/demo/webhooks", data=body, headers=headers)


def listed(client):
    html = client.get("/demo/webhooks").get_data(as_text=True)
    return re.findall(r'<li class="delivery (verified|unverified)" data-webhook-id="([^"]*)">',
                      html), html


def test_receiver_verifies_and_lists_a_delivery_with_its_exact_body(client, demo, clock):
    response = deliver(client, demo["webhookSecret"], "evt_1", clock())
    assert response.status_code == 204 and response.data == b""
    deliveries, html = listed(client)
    assert deliveries == [("verified", "evt_1")]
    assert '<code class="type">payment.completed</code>' in html
    assert "Signature verified" in html
    assert '<time class="when" datetime="2026-11-18T11:06:40Z">' in html
    assert escape('"amount": 1234.50,\n    "metadata": {\n'
                  '      "orderRef": "A-1001"\n    }') in html
    assert '<span id="count">1</span>' in html


@pytest.mark.parametrize("change, reason", [
    ({"webhook-signature": "v1,AAAA"}, "no matching v1 signature"),
    ({"webhook-id": "evt_2"}, "no matching v1 signature"),
    ({"webhook-timestamp": "1795000001"}, "no matching v1 signature"),
    ({"webhook-signature": ""},
     "missing webhook-id, webhook-timestamp or webhook-signature header"),
])
def test_receiver_refuses_and_flags_what_does_not_verify(client, demo, clock, change, reason):
    response = deliver(client, demo["webhookSecret"], "evt_1", clock(), **change)
    body = assert_error(response, 400, "invalid_signature")
    assert body["message"] == f"The webhook signature did not verify: {reason}."
    deliveries, html = listed(client)
    assert len(deliveries) == 1 and deliveries[0][0] == "unverified"
    assert "Signature INVALID" in html and f'<span class="reason">{escape(reason)}</span>' in html


def test_receiver_refuses_another_secret_and_stale_timestamps(client, demo, make_merchant, clock):
    other = make_merchant()
    assert deliver(client, other["webhookSecret"], "evt_1", clock()).status_code == 400
    signed_at = clock()
    clock.advance(301)
    response = deliver(client, demo["webhookSecret"], "evt_2", signed_at)
    assert response.get_json()["message"] == (
        "The webhook signature did not verify: webhook-timestamp is more than 300 s from now.")
    assert [d[0] for d in listed(client)[0]] == ["unverified", "unverified"]


def test_receiver_deduplicates_verified_redeliveries_on_webhook_id(client, demo, clock):
    assert deliver(client, demo["webhookSecret"], "evt_1", clock()).status_code == 204
    clock.advance(5)  # a retry: same id and body, new timestamp and signature
    assert deliver(client, demo["webhookSecret"], "evt_1", clock()).status_code == 204
    deliveries, html = listed(client)
    assert deliveries == [("verified", "evt_1")]
    assert "delivered 2 times (deduplicated on webhook-id)" in html


def test_receiver_keeps_the_last_100_newest_first(client, demo, clock):
    for n in range(101):
        clock.advance(1)
        assert deliver(client, demo["webhookSecret"], f"evt_{n}", clock()).status_code == 204
    deliveries, html = listed(client)
    assert [d[1] for d in deliveries] == [f"evt_{n}" for n in range(100, 0, -1)]
    assert '<span id="count">100</span>' in html


def test_receiver_shows_a_body_that_is_not_json_as_text(client, demo, clock):
    body = b"<b>not json</b>"
    assert deliver(client, demo["webhookSecret"], "evt_x", clock(), body=body).status_code == 204
    _, html = listed(client)
    assert '<code class="type">(no type)</code>' in html and escape("<b>not json</b>") in html


def test_demo_merchant_console_login_is_created_once_and_printed_again(runner, app, client):
    first = runner.invoke(args=["demo-merchant", "--console-login"])
    again = runner.invoke(args=["demo-merchant", "--console-login"])
    assert first.exit_code == again.exit_code == 0, first.output + again.output
    login = re.search(r"console login:   staff@demo\.example  password (\S+)  \(/dashboard/\)",
                      first.output)
    assert login and login[0] in again.output  # the same password: it is kept in the keys file
    page = client.get("/dashboard/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.get_data(as_text=True))[1]
    answer = client.post("/dashboard/login", data={"csrf_token": token,
                                                   "email": "staff@demo.example",
                                                   "password": login[1]})
    assert answer.status_code == 303


# --- each database its own demo merchant; a key revoked in the console ----------------------------

def _demo_app(folder, clock):
    """An app of its own SQLite database in `folder` and the default keys file, as `make run` (the
    instance folder) and `make demo-onchain` (FLASK_DATABASE in DEMO_DIR) make theirs."""
    from app import create_app
    from app.db import init_db

    app = create_app({"TESTING": True, "DATABASE": str(folder / "preorder.sqlite3"), "CLOCK": clock,
                      "DEMO_SHOP": True})
    with app.app_context():
        init_db()
    return app


@pytest.mark.sqlite_only
def test_a_second_database_keeps_its_own_demo_merchant_and_make_run_goes_on(tmp_path, clock):
    run, live = _demo_app(tmp_path / "instance", clock), _demo_app(tmp_path / "demo-onchain", clock)
    try:
        args = ["demo-merchant", "--console-login"]
        first = run.test_cli_runner().invoke(args=args)
        other = live.test_cli_runner().invoke(args=args)  # FLASK_DATABASE=… as the demo's hint says
        again = run.test_cli_runner().invoke(args=args)  # the next make run
        assert first.exit_code == other.exit_code == again.exit_code == 0, (
            first.output + other.output + again.output)
        kept = json.loads((tmp_path / "instance" / "demo-merchant.json").read_text())
        theirs = json.loads((tmp_path / "demo-onchain" / "demo-merchant.json").read_text())
        assert kept["merchantId"] != theirs["merchantId"]
        assert kept["database"] == str(tmp_path / "instance" / "preorder.sqlite3")
        assert again.output.startswith(
            f"Demo merchant from {tmp_path / 'instance' / 'demo-merchant.json'}:\n"
            f"  merchant id:     {kept['merchantId']}\n")
        assert re.search(r"console login:   staff@demo\.example  password (\S+)",
                         first.output)[0] in again.output
        assert run.test_client().get("/").status_code == 200
    finally:
        run.extensions["db"].close_all()
        live.extensions["db"].close_all()


@pytest.mark.sqlite_only
def test_a_keys_file_of_another_database_is_refused_or_recovered_with_what_to_do(tmp_path, clock):
    run, live = _demo_app(tmp_path / "instance", clock), _demo_app(tmp_path / "demo-onchain", clock)
    try:
        run_file = tmp_path / "instance" / "demo-merchant.json"
        assert run.test_cli_runner().invoke(
            args=["demo-merchant", "--console-login"]).exit_code == 0
        before = json.loads(run_file.read_text())
        # Given make run's file by name, the other database's command refuses it and says what to
        # do.
        refused = live.test_cli_runner().invoke(args=["demo-merchant", "--file", str(run_file)])
        assert refused.exit_code == 1
        assert refused.output == (
            f"Error: {run_file} holds the demo merchant of another database"
            f" ({tmp_path / 'instance' / 'preorder.sqlite3'}),"
            f" not of {tmp_path / 'demo-onchain' / 'preorder.sqlite3'}."
            " Give the command that database"
            f" (FLASK_DATABASE={tmp_path / 'instance' / 'preorder.sqlite3'}),"
            " or this database a keys file of its own (--file PATH, or FLASK_DEMO_MERCHANT_FILE);"
            " by default each database's file sits beside it, so make run and make demo-onchain"
            " never share one.\n")
        assert json.loads(run_file.read_text()) == before  # left as it was
        # A file overwritten before files named their database: make run finds its demo merchant
        # again by its console owner, with a new secret key, instead of failing.
        other = tmp_path / "demo-onchain" / "demo-merchant.json"
        assert live.test_cli_runner().invoke(args=["demo-merchant"]).exit_code == 0
        stale = json.loads(other.read_text())
        del stale["database"]
        run_file.write_text(json.dumps(stale))
        healed = run.test_cli_runner().invoke(args=["demo-merchant", "--console-login"])
        assert healed.exit_code == 0, healed.output
        assert healed.output.startswith(
            f"{run_file} held another database's demo merchant: this database's"
            f" ({before['merchantId']}, whose console owner is staff@demo.example) got a new secret"
            " key, saved there.\n")
        now_kept = json.loads(run_file.read_text())
        assert (now_kept["merchantId"] == before["merchantId"]
                and now_kept["secretKey"] != before["secretKey"])
        assert run.test_client().post("/", data={"amount": "5"}).status_code == 200
    finally:
        run.extensions["db"].close_all()
        live.extensions["db"].close_all()


def test_a_key_revoked_in_the_console_the_shop_says_so_and_takes_the_new_one(client, runner, demo,
                                                                             app):
    from app.db import get_db
    from app.domain import merchants

    with app.app_context():
        # old one ends now
        new_key = merchants.roll_key(get_db(), demo["merchantId"], app.config["CLOCK"](), 0)
    page = client.get("/")
    assert page.status_code == 503
    revoked = escape(
        f"The demo merchant's secret key in {app.config['DEMO_MERCHANT_FILE']} no longer works:"
        " it was revoked (or rolled, and its overlap is over) in the console. Give the shop the new"
        " one: run `flask --app app demo-merchant --secret-key sk_test_…` with the key the"
        " console's Keys page showed when you rolled it (lost it? roll again there), then reload"
        " this page.")
    assert f'<p class="error" role="alert">{revoked}</p>' in page.get_data(as_text=True)
    response = checkout(client, "5")
    assert response.status_code == 503 and str(revoked) in response.get_data(as_text=True)
    printed = runner.invoke(args=["demo-merchant"])
    assert printed.exit_code == 0
    assert (f"  secret key:      {demo['secretKey']}  REVOKED: it no longer works (revoked or"
            " rolled in the console), so the demo shop cannot create preorders. Give it the new"
            " key: flask --app app demo-merchant --secret-key sk_test_…\n") in printed.output
    wrong = runner.invoke(args=["demo-merchant", "--secret-key", demo["secretKey"]])
    assert wrong.exit_code == 1
    assert wrong.output == ("Error: That is not a working secret key of the demo merchant"
                            f" {demo['merchantId']}: copy the one the console's Keys page showed"
                            " when you rolled it (or roll again there).\n")
    given = runner.invoke(args=["demo-merchant", "--secret-key", new_key])
    assert given.exit_code == 0 and f"  secret key:      {new_key}\n" in given.output
    assert client.get("/").status_code == 200
    assert len(button_attrs(checkout(client, "5").get_data(as_text=True))) == 1


def test_a_console_login_taken_by_another_merchant_says_what_to_do(runner, app, make_merchant):
    other = make_merchant(name="Someone else")
    created = runner.invoke(args=["users", "create", "staff@demo.example",
                                  "--merchant", other["merchantId"]],
                            input="correct horse battery\n")
    assert created.exit_code == 0, created.output
    result = runner.invoke(args=["demo-merchant", "--console-login"])
    assert result.exit_code == 1
    keys = json.load(open(app.config["DEMO_MERCHANT_FILE"]))  # the demo merchant: made, not theirs
    assert keys["merchantId"] != other["merchantId"]
    assert result.output == (
        f"Error: The user staff@demo.example belongs to another merchant ({other['merchantId']})"
        f" than the demo merchant of {app.config['DEMO_MERCHANT_FILE']} ({keys['merchantId']})."
        " Run the command without --console-login, or give it the keys file of that merchant's"
        " database (--file PATH).\n")
    assert runner.invoke(args=["demo-merchant"]).exit_code == 0
