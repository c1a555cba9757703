"""The operator CLI (flask --app app ...), driven through Flask's CLI runner."""
import json
import os

import pytest
from support import dbutil
from support.helpers import Api, assert_error
from support.servers import flask, service_env


def invoke(runner, *args):
    return runner.invoke(args=list(args))


def test_init_db_twice_keeps_data(runner, app, merchant):
    assert invoke(runner, "init-db").exit_code == 0
    assert merchant["merchantId"] in invoke(runner, "merchants", "list").output


def test_init_db_reset_drops_data(runner, merchant):
    result = invoke(runner, "init-db", "--reset")
    assert result.exit_code == 0 and "Reset" in result.output
    assert merchant["merchantId"] not in invoke(runner, "merchants", "list").output


def test_create_json_prints_exactly_one_object(runner):
    result = invoke(runner, "merchants", "create", "--name", "Shop", "--json")
    assert result.exit_code == 0
    body = json.loads(result.output)
    assert set(body) == {"merchantId", "secretKey", "publicKey", "webhookSecret", "livemode"}
    assert body["livemode"] is False


def test_create_text_shows_the_keys_once(runner):
    result = invoke(runner, "merchants", "create", "--name", "Shop", "--live", "--webhook-url", "https://shop.example/hooks")
    assert result.exit_code == 0
    assert "sk_live_" in result.output and "pk_live_" in result.output and "whsec_" in result.output
    assert "shown once" in result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--name", " "], "needs a name"),
        (["--name", "S", "--webhook-url", "ftp://x"],
         "The webhook URL is refused: scheme 'ftp' is not allowed, use https."),
        (["--name", "S", "--webhook-url", "https:///h"],
         "The webhook URL is refused: URL has no host."),
        (["--name", "S", "--live", "--webhook-url", "http://shop.example/h"],
         "The webhook URL is refused: live-mode webhook URLs must use https."),
        (["--name", "S", "--webhook-url", "https://user:pw@shop.example/h"],
         "The webhook URL is refused: credentials in the URL are not allowed."),
        (["--name", "S", "--webhook-url", "https://shop.example/h ook"],
         "The webhook URL is refused: URL contains whitespace or control characters."),
    ],
)
def test_create_refuses_bad_input(runner, args, message):
    result = invoke(runner, "merchants", "create", *args)
    assert result.exit_code == 1 and message in result.output


def test_secret_key_is_stored_only_as_a_hash(app, merchant):
    dump = dbutil.dump(app.config["DATABASE"])
    assert merchant["secretKey"] not in dump
    import hashlib

    assert hashlib.sha256(merchant["secretKey"].encode()).hexdigest() in dump


def test_list_shows_merchants_without_secrets(runner, merchant):
    output = invoke(runner, "merchants", "list").output
    assert merchant["merchantId"] in output and "test" in output and "active" in output
    assert merchant["secretKey"] not in output and merchant["webhookSecret"] not in output


def test_set_webhook(runner, merchant):
    result = invoke(runner, "merchants", "set-webhook", merchant["merchantId"], "http://localhost:9999/hooks")
    assert result.exit_code == 0
    assert "http://localhost:9999/hooks" in invoke(runner, "merchants", "list").output


def test_unknown_merchant(runner):
    result = invoke(runner, "merchants", "disable", "mer_nope")
    assert result.exit_code == 1 and "No merchant mer_nope" in result.output


def test_disable_stops_its_keys_at_once(runner, client, merchant):
    api = Api(client, merchant["secretKey"])
    assert api.preorder().status_code == 200
    assert invoke(runner, "merchants", "disable", merchant["merchantId"]).exit_code == 0
    assert_error(api.preorder(), 403, "merchant_disabled")
    assert invoke(runner, "merchants", "disable", merchant["merchantId"]).exit_code == 1


def test_rotate_then_revoke(runner, client, merchant):
    old = Api(client, merchant["secretKey"])
    result = invoke(runner, "merchants", "rotate-key", merchant["merchantId"])
    assert result.exit_code == 0
    new_key = result.output.split("New secret key (shown once): ")[1].split()[0]
    new = Api(client, new_key)
    # Both keys work during the rotation, and see the same processes.
    created = old.preorder().get_json()["processId"]
    assert new.get(created).status_code == 200
    # Revoke the old one by a 12-character prefix... which both keys share ("sk_test_" + 4).
    result = invoke(runner, "merchants", "revoke-key", merchant["merchantId"],
                    merchant["secretKey"][:16])
    assert result.exit_code == 0, result.output
    assert_error(old.preorder(), 401, "invalid_secret_key")
    assert new.preorder().status_code == 200
    keys = invoke(runner, "merchants", "keys", merchant["merchantId"]).output
    assert keys.count("revoked") == 1 and keys.count("active") == 1


def test_revoke_by_whole_key(runner, client, merchant):
    invoke(runner, "merchants", "rotate-key", merchant["merchantId"])
    assert invoke(runner, "merchants", "revoke-key", merchant["merchantId"],
                  merchant["secretKey"]).exit_code == 0
    assert_error(Api(client, merchant["secretKey"]).preorder(), 401, "invalid_secret_key")


def test_revoke_refuses_short_ambiguous_unknown_and_repeated(runner, merchant):
    mid = merchant["merchantId"]
    invoke(runner, "merchants", "rotate-key", mid)
    short = invoke(runner, "merchants", "revoke-key", mid, merchant["secretKey"][:11])
    assert short.exit_code == 1 and "at least 12" in short.output
    assert invoke(runner, "merchants", "revoke-key", mid, "sk_test_").exit_code == 1
    unknown = invoke(runner, "merchants", "revoke-key", mid, "sk_test_zzzzzzzzzzzz")
    assert unknown.exit_code == 1 and "No key" in unknown.output
    assert invoke(runner, "merchants", "revoke-key", mid, merchant["secretKey"][:20]).exit_code == 0
    again = invoke(runner, "merchants", "revoke-key", mid, merchant["secretKey"][:20])
    assert again.exit_code == 1 and "already revoked" in again.output


def test_revoke_refuses_a_prefix_matching_two_keys(runner, app, merchant):
    # Two keys sharing their first 12 characters are rare (4 random base62 characters), so the
    # second one is written straight into the database, as a colliding rotation would leave it.
    dbutil.execute(
        app.config["DATABASE"],
        "INSERT INTO secret_keys (merchant_id, key_hash, key_prefix, created_at)"
        " VALUES (?, ?, ?, 0)",
        merchant["merchantId"], "0" * 64, merchant["secretKey"][:12] + "--------",
    )
    result = invoke(runner, "merchants", "revoke-key", merchant["merchantId"],
                    merchant["secretKey"][:12])
    assert result.exit_code == 1 and "matches 2 keys" in result.output
    assert invoke(runner, "merchants", "revoke-key", merchant["merchantId"],
                  merchant["secretKey"][:13]).exit_code == 0


def test_another_merchants_key_cannot_be_revoked(runner, make_merchant):
    a, b = make_merchant(name="A"), make_merchant(name="B")
    result = invoke(runner, "merchants", "revoke-key", a["merchantId"], b["secretKey"])
    assert result.exit_code == 1


def test_processes_list_and_show(runner, api, merchant, clock):
    created = api.preorder({"amount": 12.34, "metadata": {"orderRef": "A-9"}}).get_json()
    listing = invoke(runner, "processes", "list", "--merchant", merchant["merchantId"])
    assert created["processId"] in listing.output and "12.34" in listing.output
    assert created["processId"] not in invoke(runner, "processes", "list", "--status",
                                              "cancelled").output
    shown = invoke(runner, "processes", "show", created["processId"])
    assert shown.exit_code == 0 and '"orderRef": "A-9"' in shown.output
    missing = invoke(runner, "processes", "show", "00000000-0000-4000-8000-000000000000")
    assert missing.exit_code == 1
    assert invoke(runner, "processes", "show", "nope").exit_code == 2


def test_processes_complete(runner, api):
    created = api.preorder().get_json()
    result = invoke(runner, "processes", "complete", created["processId"])
    assert result.exit_code == 0 and "payment.completed" in result.output
    assert api.get(created["processId"]).get_json()["status"] == "completed"
    again = invoke(runner, "processes", "complete", created["processId"])
    assert again.exit_code == 1 and "completed" in again.output
    assert "events: 1" in invoke(runner, "processes", "show", created["processId"]).output


def test_demo_shop_merchant_is_created_once_and_its_keys_saved(runner, app):
    path = app.config["DEMO_MERCHANT_FILE"]
    first = invoke(runner, "demo-merchant")
    assert first.exit_code == 0
    assert f"Created the demo merchant; its keys are saved in {path}" in first.output
    with open(path) as f:
        keys = json.load(f)
    assert set(keys) == {"merchantId", "secretKey", "publicKey", "webhookSecret", "livemode",
                         "paymentLinkId", "database"}  # the database it was written for
    assert keys["livemode"] is False and keys["secretKey"].startswith("sk_test_")
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    again = invoke(runner, "demo-merchant")
    assert again.exit_code == 0 and f"Demo merchant from {path}:" in again.output
    assert keys["secretKey"] in again.output
    assert invoke(runner, "merchants", "list").output.count("Demo shop") == 1


def test_demo_shop_merchant_webhook_url_is_set_on_an_existing_one_too(runner, app):
    assert invoke(runner, "demo-merchant").exit_code == 0
    url = "http://127.0.0.1:5000/demo/webhooks"
    result = invoke(runner, "demo-merchant", "--webhook-url", url)
    assert result.exit_code == 0 and f"webhook URL:     {url}" in result.output
    [row] = [line for line in invoke(runner, "merchants", "list").output.splitlines()
             if "Demo shop" in line]
    assert url in row
    assert invoke(runner, "demo-merchant", "--webhook-url", "ftp://x").exit_code == 1


def test_demo_shop_merchant_is_made_again_after_a_database_reset(runner, app):
    assert invoke(runner, "demo-merchant").exit_code == 0
    with open(app.config["DEMO_MERCHANT_FILE"]) as f:
        before = json.load(f)["merchantId"]
    assert invoke(runner, "init-db", "--reset").exit_code == 0
    result = invoke(runner, "demo-merchant", "--webhook-url", "http://127.0.0.1:5000/demo/webhooks")
    assert result.exit_code == 0 and "Created the demo merchant" in result.output
    with open(app.config["DEMO_MERCHANT_FILE"]) as f:
        assert json.load(f)["merchantId"] not in (before, None)


@pytest.mark.parametrize("live, url, reason", [
    (True, "https://127.0.0.1/hook", "127.0.0.1 (loopback)"),
    (True, "https://169.254.169.254/latest", "169.254.169.254 (link-local)"),
    (False, "http://169.254.169.254/latest", "169.254.169.254 (link-local)"),
    (False, "http://10.0.0.1:8080/hook", "10.0.0.1 (private)"),
    (False, "http://[fd00::1]/hook", "fd00::1 (private)"),
])
def test_set_webhook_refuses_what_deliveries_refuse(runner, make_merchant, live, url, reason):
    merchant = make_merchant(name="M", live=live)
    result = invoke(runner, "merchants", "set-webhook", merchant["merchantId"], url)
    assert result.exit_code == 1
    assert (f"The webhook URL is refused: {reason}, only public addresses are allowed."
            in result.output)
    assert invoke(runner, "merchants", "list").output.count(url) == 0


@pytest.mark.parametrize("output", [[], ["--json"]])
def test_create_refuses_what_deliveries_refuse(tmp_path, output):
    env = service_env(tmp_path / "refuse.sqlite3")
    flask(env, "init-db")
    result = flask(env, "merchants", "create", "--name", "Live", "--live",
                   "--webhook-url", "https://127.0.0.1/hook", *output, check=False)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == ("Error: The webhook URL is refused: 127.0.0.1 (loopback), only public"
                             " addresses are allowed.\n")


def test_loopback_for_test_merchants_only_where_the_operator_allows_it(tmp_path):
    env = service_env(tmp_path / "loopback.sqlite3")
    flask(env, "init-db")
    flask(env, "merchants", "create", "--name", "Dev", "--webhook-url", "http://localhost:5000/hook")
    production = dict(env, FLASK_WEBHOOK_ALLOW_LOOPBACK="0")  # as deploy/preorder.env sets it
    result = flask(production, "merchants", "create", "--name", "Prod", "--webhook-url",
                   "http://127.0.0.1:5000/hook", check=False)
    assert result.returncode == 1
    assert "127.0.0.1 (loopback), only public addresses are allowed" in result.stderr


def test_set_webhook_does_not_warn_for_a_test_merchants_localhost(runner, merchant):
    result = invoke(runner, "merchants", "set-webhook", merchant["merchantId"], "http://127.0.0.1:9/hook")
    assert result.exit_code == 0 and "Warning" not in result.output


def test_rotate_public_key_replaces_it_at_once(runner, client, merchant, api):
    process_id = api.preorder().get_json()["processId"]

    def public(key):
        return client.get(f"/payment-button/process/{process_id}/public",
                          headers={"x-public-key": key})

    result = invoke(runner, "merchants", "rotate-public-key", merchant["merchantId"])
    assert result.exit_code == 0
    new_key = result.output.split("New public key: ")[1].split()[0]
    assert new_key.startswith("pk_test_") and new_key != merchant["publicKey"]
    assert_error(public(merchant["publicKey"]), 401, "invalid_public_key")
    assert public(new_key).status_code == 200


def test_rotate_webhook_secret_prints_a_new_one(runner, merchant):
    result = invoke(runner, "merchants", "rotate-webhook-secret", merchant["merchantId"])
    assert result.exit_code == 0
    secret = result.output.split("(shown once): ")[1].split()[0]
    assert secret.startswith("whsec_") and secret != merchant["webhookSecret"]
    assert secret not in invoke(runner, "merchants", "list").output
    assert invoke(runner, "merchants", "rotate-webhook-secret", "mer_nope").exit_code == 1


def test_a_lookup_that_finds_nothing_says_where_it_looked(runner, app):
    """Every command's "No …" names the database it read (docs/contract.md, "Operating it")."""
    where = app.config["DATABASE"]
    cases = [(["merchants", "disable", "mer_nope"], f"Error: No merchant mer_nope in {where}.\n"),
             (["users", "disable", "nobody@example.com"],
              f"Error: No user nobody@example.com in {where}.\n"),
             (["processes", "show", "7d7c5a8e-3f0b-4c8e-9a59-4f3f7c1b2d10"],
              f"Error: No process 7d7c5a8e-3f0b-4c8e-9a59-4f3f7c1b2d10 in {where}.\n"),
             (["watch-payments", "--once", "--network", "a", "--network", "b"],
              f"Error: No network a, b (see: networks list); looked in {where}.\n")]
    for args, message in cases:
        result = runner.invoke(args=args)
        assert (result.exit_code, result.output) == (1, message)
    created = runner.invoke(args=["users", "create", "staff@example.com", "--merchant", "mer_nope"],
                            input="correct horse battery\n")
    assert (created.exit_code, created.output) == (1, f"Error: No merchant mer_nope in {where}.\n")


@pytest.mark.parametrize("url, shown", [
    ("postgresql://shop:s3cret@db.example:5433/preorder", "postgresql://shop@db.example:5433/preorder"),
    ("postgresql://:s3cret@db.example/preorder?sslmode=require&password=s3cret",
     "postgresql://db.example/preorder?sslmode=require"),
    ("postgres://db.example/preorder", "postgres://db.example/preorder"),
    ("instance/demo-live/preorder.sqlite3", "instance/demo-live/preorder.sqlite3"),
])
def test_the_database_location_never_shows_a_password(url, shown):
    from app.db import location
    assert location(url) == shown
