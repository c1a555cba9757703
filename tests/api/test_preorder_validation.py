"""Preorder validation beyond status and code: exact messages and configured limits (the contract,
Preorder request). The table of bodies, case by case, is tests/api/test_hostile_input.py."""
import json

from support.helpers import assert_error


def test_greater_than_zero_message_is_exactly_the_contract_example(api):
    error = assert_error(api.preorder_raw(b'{"amount": 0}'), 400, "validation_error")
    assert error == {
        "code": "validation_error",
        "message": "amount: Must be greater than 0.",
        "errors": {"amount": ["Must be greater than 0."]},
    }


def test_unknown_field_is_named(api):
    error = assert_error(api.preorder_raw(b'{"ammount": 5}'), 400, "validation_error")
    assert error["errors"] == {
        "amount": ["Missing data for required field."],
        "ammount": ["Unknown field."],
    }


def test_metadata_size_counts_bytes_not_characters(api):
    # 3,500 three-byte characters: 3,500 characters, 10,500 bytes.
    metadata = {"k": "€" * 3500}
    error = assert_error(api.preorder_raw(json.dumps({"amount": 5, "metadata": metadata},
                                                     ensure_ascii=False)), 400, "validation_error")
    assert error["errors"]["metadata"] == [
        "Must be at most 10240 bytes as compact UTF-8 JSON (got 10508)."
    ]


def test_body_over_64_kib(api):
    body = json.dumps({"amount": 5, "metadata": {"k": "x" * 70_000}})
    error = assert_error(api.preorder_raw(body), 413, "payload_too_large")
    assert error["message"] == "Request body is larger than 65536 bytes."


def test_configured_limits_apply(tmp_path, clock):
    from app import create_app
    from app.db import init_db

    app = create_app(
        {
            "TESTING": True,
            "DATABASE": str(tmp_path / "limits.sqlite3"),
            "CLOCK": clock,
            "MAX_AMOUNT": "50.5",
            "AMOUNT_DECIMALS": 3,
            "METADATA_MAX_BYTES": 20,
        }
    )
    with app.app_context():
        init_db()
    from support.helpers import Api

    runner = app.test_cli_runner()
    key = json.loads(runner.invoke(args=["merchants", "create", "--name", "L",
                                         "--json"]).output)["secretKey"]
    api = Api(app.test_client(), key)
    assert api.preorder_raw(b'{"amount": 50.5}').status_code == 200
    assert api.preorder_raw(b'{"amount": 1.005, "currency": "KWD"}').status_code == 200
    assert_error(api.preorder_raw(b'{"amount": 1.005}'), 400, "validation_error",
                 "amount: Must have at most 2 decimal places (USD).")  # the currency's, below 3
    assert_error(api.preorder_raw(b'{"amount": 1.0005, "currency": "KWD"}'), 400,
                 "validation_error",
                 "amount: Must have at most 3 decimal places.")  # AMOUNT_DECIMALS and KWD alike
    assert_error(api.preorder_raw(b'{"amount": 50.51}'), 400, "validation_error",
                 "amount: Must be less than or equal to 50.5.")
    assert_error(api.preorder_raw(b'{"amount": 5, "metadata": {"k": "0123456789abc"}}'), 400,
                 "validation_error")
    app.extensions["db"].close_all()
