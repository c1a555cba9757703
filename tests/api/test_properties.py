"""Properties of the preorder call over generated input (hypothesis):
- any JSON value as the body is answered 200, 400, 409, 413 or 415, never a 5xx, and every
  refusal is the JSON error envelope;
- an accepted amount is stored and shown with exactly the digits sent;
- an accepted metadata object comes back equal, keys in the same order, in every response.

Example counts come from the "suite" settings profile (tests/conftest.py).
"""
import json
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.dbutil import BACKEND
from support.helpers import Api, FakeClock

from app import create_app
from app.db import init_db

pytestmark = pytest.mark.both_backends  # `api` picks the backend itself

PREORDER_ANSWERS = {200, 400, 409, 413, 415}


@pytest.fixture(scope="module")
def api(request, tmp_path_factory):
    """One app and database of the suite's backend for all examples (hypothesis runs many per
    test): on the PostgreSQL pass, its text types (which cannot hold NUL) are under test too."""
    if BACKEND == "sqlite":
        database = str(tmp_path_factory.mktemp("properties") / "properties.sqlite3")
    else:
        database = request.getfixturevalue("postgres").create_database()
    app = create_app({"DATABASE": database, "CLOCK": FakeClock(), "SQLITE_SYNCHRONOUS": "OFF"})
    with app.app_context():
        init_db()
    created = app.test_cli_runner().invoke(args=["merchants", "create", "--name", "P", "--json"])
    yield Api(app.test_client(), json.loads(created.output)["secretKey"])
    app.extensions["db"].close_all()
    if BACKEND != "sqlite":
        request.getfixturevalue("postgres").drop_database(database)


def texts(**kwargs):
    """Any text, and often text holding NUL (which hypothesis draws rarely on its own)."""
    return st.text(**kwargs) | st.text(st.sampled_from("\x00a\u00e9"), **kwargs)


def json_values(max_leaves=20):
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=True, allow_infinity=True)  # NaN/Infinity: not JSON, still sent
        | texts()
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(texts(), inner, max_size=5),
        max_leaves=max_leaves,
    )


# Bodies shaped like preorders now and then, so the validation paths are reached, not only the
# "not an object" one.
preorder_like = st.fixed_dictionaries(
    {"amount": json_values(3) | st.decimals(allow_nan=False).map(float)},
    optional={"metadata": json_values(), "ammount": json_values(2)},
)


@given(
    body=json_values() | preorder_like,
    ascii_only=st.booleans(),
    idempotency_key=st.none() | st.sampled_from(["k1", "k2"]),
)
def test_any_json_body_gets_a_4xx_or_200_never_a_5xx(api, body, ascii_only, idempotency_key):
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    text = json.dumps(body, ensure_ascii=ascii_only)
    response = api.preorder_raw(text.encode("utf-8", "surrogatepass"), headers=headers)
    assert response.status_code in PREORDER_ANSWERS, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    if response.status_code != 200:
        error = response.get_json()
        assert set(error) <= {"code", "message", "errors"} and error["code"] and error["message"]


def amount_literals():
    """Amount literals as a merchant may write them: 1 to 1,000,000, at most two significant
    decimal places, sometimes with trailing zeros ("19.90", "5.000")."""
    whole = st.integers(0, 1_000_000).map(str)
    places = st.text("0123456789", min_size=0, max_size=2)
    zeros = st.text("0", max_size=3)
    return (
        st.tuples(whole, places, zeros)
        .map(lambda t: t[0] + ("." + t[1] + t[2] if t[1] + t[2] else ""))
        .filter(lambda lit: Decimal("0") < Decimal(lit) <= Decimal("1000000"))
    )


def shown_amount(body_text):
    return re.search(r'"amount":([^,]*),', body_text).group(1)


@given(literal=amount_literals())
def test_accepted_amounts_keep_exactly_the_digits_sent(api, literal):
    response = api.preorder_raw(f'{{"amount": {literal}, "metadata": {{}}}}')
    assert response.status_code == 200, response.get_data(as_text=True)
    assert shown_amount(response.get_data(as_text=True)) == literal
    process_id = response.get_json()["processId"]
    assert shown_amount(api.get(process_id).get_data(as_text=True)) == literal


@given(literal=amount_literals(), exponent=st.integers(-3, 3))
def test_exponent_amounts_are_written_out_with_the_same_value(api, literal, exponent):
    value = Decimal(literal).scaleb(-exponent)  # literal = mantissa e exponent
    sent = f"{value:f}e{exponent}"
    response = api.preorder_raw(f'{{"amount": {sent}}}')
    if response.status_code == 400:  # e.g. 1e3 * 1000000: over the maximum
        assert "amount" in response.get_json()["errors"]
        return
    shown = shown_amount(response.get_data(as_text=True))
    assert "e" not in shown.lower() and Decimal(shown) == Decimal(sent)


metadata_objects = st.dictionaries(
    texts(max_size=10),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
        | texts(max_size=20),
        lambda inner: st.lists(inner, max_size=4)
        | st.dictionaries(texts(max_size=10), inner, max_size=4),
        max_leaves=15,
    ),
    max_size=8,
)


def ordered(text):
    """JSON parsed with every object as its list of (key, value) pairs: order matters."""
    return json.loads(text, object_pairs_hook=list)


@given(metadata=metadata_objects, ascii_only=st.booleans())
def test_accepted_metadata_comes_back_equal_in_the_same_order(api, metadata, ascii_only):
    sent = json.dumps({"amount": 5, "metadata": metadata}, ensure_ascii=ascii_only)
    response = api.preorder_raw(sent.encode("utf-8"))
    assert response.status_code == 200, response.get_data(as_text=True)
    expected = dict(ordered(sent))["metadata"]
    created = response.get_data(as_text=True)
    read = api.get(response.get_json()["processId"]).get_data(as_text=True)
    for shown in (created, read):
        assert dict(ordered(shown))["metadata"] == expected
    # Stored as its compact UTF-8 JSON: number literals and key order untouched.
    compact = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
    assert f'"metadata":{compact},' in read
