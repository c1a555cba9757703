"""The preorder body, case by case: exact status, code and field for each input (API.md, Preorder
request). Bodies are raw bytes so that literals such as 19.99, 1e400 or NaN reach the service as
written."""
import json

import pytest

from conftest import assert_error

OK = (200, None, None)


def invalid(field):
    return (400, "validation_error", field)


INVALID_JSON = (400, "invalid_json", None)

CASES = [
    # (id, body, (status, code, field named in errors))
    ("integer amount", '{"amount": 20}', OK),
    ("two decimals", '{"amount": 19.99}', OK),
    ("one decimal", '{"amount": 0.5}', OK),
    ("smallest amount", '{"amount": 0.01}', OK),
    ("maximum amount", '{"amount": 1000000}', OK),
    ("maximum with zero decimals", '{"amount": 1000000.00}', OK),
    ("trailing zeros beyond places", '{"amount": 1.500}', OK),
    ("exponent form", '{"amount": 1.5e2}', OK),
    ("amount only, metadata omitted", '{"amount": 5}', OK),
    ("empty metadata", '{"amount": 5, "metadata": {}}', OK),
    ("nested metadata", '{"amount": 5, "metadata": {"a": {"b": [1, {"c": null}]}}}', OK),
    ("unicode metadata", '{"amount": 5, "metadata": {"name": "Zoë 東京 🎉"}}', OK),
    ("zero", '{"amount": 0}', invalid("amount")),
    ("negative zero", '{"amount": -0}', invalid("amount")),
    ("negative", '{"amount": -5}', invalid("amount")),
    ("over maximum", '{"amount": 1000000.01}', invalid("amount")),
    ("huge exponent", '{"amount": 1e400}', invalid("amount")),
    ("tiny exponent", '{"amount": 1e-7}', invalid("amount")),
    ("three decimals", '{"amount": 1.005}', invalid("amount")),
    ("binary float artefact", '{"amount": 0.30000000000000004}', invalid("amount")),
    ("34 significant digits", '{"amount": 1.000000000000000000000000000000001}', invalid("amount")),
    ("5000-digit integer", '{"amount": ' + "9" * 5000 + "}", invalid("amount")),
    ("string amount", '{"amount": "12.50"}', invalid("amount")),
    ("boolean amount", '{"amount": true}', invalid("amount")),
    ("null amount", '{"amount": null}', invalid("amount")),
    ("array amount", '{"amount": [12]}', invalid("amount")),
    ("object amount", '{"amount": {"value": 12}}', invalid("amount")),
    ("missing amount", '{"metadata": {"orderRef": "A-1"}}', invalid("amount")),
    ("NaN literal", '{"amount": NaN}', INVALID_JSON),
    ("Infinity literal", '{"amount": Infinity}', INVALID_JSON),
    ("-Infinity literal", '{"amount": -Infinity}', INVALID_JSON),
    ("metadata array", '{"amount": 5, "metadata": [1, 2]}', invalid("metadata")),
    ("metadata string", '{"amount": 5, "metadata": "A-1"}', invalid("metadata")),
    ("metadata null", '{"amount": 5, "metadata": null}', invalid("metadata")),
    ("metadata number", '{"amount": 5, "metadata": 7}', invalid("metadata")),
    ("metadata 32 deep", '{"amount": 5, "metadata": ' + '{"a":' * 31 + "{}" + "}" * 31 + "}", OK),
    ("metadata 33 deep", '{"amount": 5, "metadata": ' + '{"a":' * 32 + "{}" + "}" * 32 + "}", invalid("metadata")),
    ("metadata 33 deep via arrays", '{"amount": 5, "metadata": {"a": ' + "[" * 32 + "]" * 32 + "}}", invalid("metadata")),
    ("metadata lone surrogate", '{"amount": 5, "metadata": {"a": "\\ud800"}}', invalid("metadata")),
    ("typo ammount", '{"ammount": 5}', invalid("ammount")),
    ("unknown field", '{"amount": 5, "currency": "EUR"}', invalid("currency")),
    ("body is an array", "[1, 2]", (400, "validation_error", None)),
    ("body is a string", '"amount"', (400, "validation_error", None)),
    ("body is a number", "12", (400, "validation_error", None)),
    ("body is null", "null", (400, "validation_error", None)),
    ("invalid JSON", "{amount: 5}", INVALID_JSON),
    ("truncated JSON", '{"amount": 5', INVALID_JSON),
    ("empty body", "", INVALID_JSON),
    ("duplicate keys", '{"amount": 5, "amount": 6}', INVALID_JSON),
    ("trailing garbage", '{"amount": 5} x', INVALID_JSON),
]


@pytest.mark.parametrize("body,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_preorder_body(api, body, expected):
    status, code, field = expected
    response = api.preorder_raw(body.encode("utf-8"))
    if status == 200:
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.get_json()["status"] == "pending"
        return
    error = assert_error(response, status, code)
    if field is not None:
        assert list(error["errors"]) == [field] or field in error["errors"]
        assert error["message"].startswith(f"{field}: ") or f" {field}: " in error["message"]


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


@pytest.mark.parametrize(
    "size,status", [(10_240, 200), (10_241, 400)], ids=["10240 bytes accepted", "10241 refused"]
)
def test_metadata_size_limit_is_on_compact_utf8_bytes(api, size, status):
    overhead = len('{"k":""}')
    metadata = {"k": "x" * (size - overhead)}
    assert len(json.dumps(metadata, separators=(",", ":")).encode()) == size
    # Whitespace in the request does not count: only the compact encoding is measured.
    response = api.preorder_raw(json.dumps({"amount": 5, "metadata": metadata}, indent=4))
    assert response.status_code == status


def test_metadata_size_counts_bytes_not_characters(api):
    # 3,500 three-byte characters: 3,500 characters, 10,500 bytes.
    metadata = {"k": "€" * 3500}
    error = assert_error(api.preorder_raw(json.dumps({"amount": 5, "metadata": metadata}, ensure_ascii=False)), 400, "validation_error")
    assert error["errors"]["metadata"] == [
        "Must be at most 10240 bytes as compact UTF-8 JSON (got 10508)."
    ]


def test_multibyte_metadata_under_the_limit_is_accepted(api):
    metadata = {"k": "€" * 3000}  # 9,008 bytes
    response = api.preorder_raw(json.dumps({"amount": 5, "metadata": metadata}, ensure_ascii=False))
    assert response.status_code == 200
    assert response.get_json()["metadata"] == metadata


@pytest.mark.parametrize(
    "content_type,status",
    [
        ("application/json", 200),
        ("application/json; charset=utf-8", 200),
        ("application/json; charset=UTF-8", 200),
        ("Application/JSON", 200),
        ("application/json; charset=latin-1", 415),
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("", 415),
    ],
)
def test_content_type(api, content_type, status):
    response = api.preorder_raw(b'{"amount": 5}', content_type=content_type)
    if status == 200:
        assert response.status_code == 200
    else:
        assert_error(response, 415, "unsupported_media_type")


def test_body_that_is_not_utf8(api):
    assert_error(api.preorder_raw(b'{"amount": 5, "metadata": {"a": "\xff"}}'), 400, "invalid_json")


def test_body_with_byte_order_mark(api):
    assert_error(api.preorder_raw(b'\xef\xbb\xbf{"amount": 5}'), 400, "invalid_json")


def test_body_over_64_kib(api):
    body = json.dumps({"amount": 5, "metadata": {"k": "x" * 70_000}})
    error = assert_error(api.preorder_raw(body), 413, "payload_too_large")
    assert error["message"] == "Request body is larger than 65536 bytes."


def test_deep_nesting_within_the_size_limit_does_not_crash(api):
    body = '{"amount": 5, "metadata": ' + "[" * 60_000 + "]" * 0
    assert_error(api.preorder_raw(body), 400, "invalid_json")
    # The same process still serves the next request.
    assert api.preorder().status_code == 200


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
    from conftest import Api

    runner = app.test_cli_runner()
    key = json.loads(runner.invoke(args=["merchants", "create", "--name", "L", "--json"]).output)["secretKey"]
    api = Api(app.test_client(), key)
    assert api.preorder_raw(b'{"amount": 50.5}').status_code == 200
    assert api.preorder_raw(b'{"amount": 1.005}').status_code == 200
    assert_error(api.preorder_raw(b'{"amount": 50.51}'), 400, "validation_error", "amount: Must be less than or equal to 50.5.")
    assert_error(api.preorder_raw(b'{"amount": 5, "metadata": {"k": "0123456789abc"}}'), 400, "validation_error")
    app.extensions["db"].close_all()
