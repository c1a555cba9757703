"""Creating a preorder: the Process object, exact amounts, metadata round trip, authentication."""
import re
import uuid

import pytest
from support import dbutil
from support.helpers import assert_error


def test_preorder_returns_the_process_object(api):
    response = api.preorder_raw(b'{"amount": 19.99, "metadata": {"orderRef": "A-1"}}')
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert list(body) == [
        "processId", "status", "amount", "currency", "metadata", "livemode", "createdAt",
        "updatedAt", "expiresAt",
        "description", "successUrl", "cancelUrl", "checkoutUrl", "payment", "refunds",
    ]
    assert (body["description"], body["successUrl"], body["cancelUrl"]) == (None, None, None)
    # the request's host
    assert body["checkoutUrl"] == f"http://localhost/checkout/{body['processId']}"
    assert body["payment"] is None  # until the customer confirms a live payment
    assert body["refunds"] == []
    assert uuid.UUID(body["processId"]).version == 4
    assert body["processId"] == str(uuid.UUID(body["processId"]))
    assert body["status"] == "pending"
    assert body["metadata"] == {"orderRef": "A-1"}
    assert body["livemode"] is False
    assert body["createdAt"] == body["updatedAt"] == "2026-11-18T11:06:40Z"
    assert body["expiresAt"] == "2026-11-18T11:36:40Z"  # PROCESS_TTL_SECONDS = 1800


@pytest.mark.parametrize(
    "literal,shown",
    [("19.99", "19.99"), ("19.90", "19.90"), ("20", "20"), ("0.1", "0.1"), ("1.5e2", "150"),
     ("999999.99", "999999.99"), ("1.500", "1.500")],
)
def test_amount_keeps_its_exact_digits(api, literal, shown):
    response = api.preorder_raw(f'{{"amount": {literal}}}')
    text = response.get_data(as_text=True)
    assert f'"amount":{shown},' in text
    process_id = response.get_json()["processId"]
    assert f'"amount":{shown},' in api.get(process_id).get_data(as_text=True)


def test_metadata_round_trip_is_byte_exact(api):
    metadata = (
        '{"zeta":1,"alpha":{"nested":[1,2.50,-0,1E+5,true,false,null,"x"]},'
        '"emoji":"🎉 東京 Zoë","escaped":"line\\nbreak \\"quoted\\" \\\\ \\u0001",'
        '"big":123456789012345678901234567890.123456789,"empty":{},"list":[]}'
    )
    response = api.preorder_raw(f'{{"amount": 5, "metadata": {metadata}}}'.encode())
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert f'"metadata":{metadata},' in text
    assert f'"metadata":{metadata},' in api.get(response.get_json()["processId"]).get_data(
        as_text=True)


def test_metadata_holding_nul_at_any_depth_comes_back_unchanged(api, database):
    # PostgreSQL's text cannot hold NUL: a top-level value holding one was a 500 there (its
    # search row), while SQLite stored it. In keys and values, at every depth, on both backends.
    metadata = ('{"a\\u0000":"\\u0000","ref":"A-\\u00001","\\u0000":{"k\\u0000":["\\u0000x",'
                '{"\\u0000":"\\u0000\\u0000"}]},"n":1}')
    response = api.preorder_raw(f'{{"amount": 5, "metadata": {metadata}}}'.encode())
    assert response.status_code == 200, response.get_data(as_text=True)
    process_id = response.get_json()["processId"]
    for shown in (response, api.get(process_id), api.list()):
        assert f'"metadata":{metadata},' in shown.get_data(as_text=True)
    assert response.get_json()["metadata"]["ref"] == "A-\x001"
    assert dbutil.scalar(database, "SELECT metadata FROM processes WHERE id = ?",
                         process_id) == metadata


def test_metadata_whitespace_is_compacted_but_order_kept(api):
    response = api.preorder_raw('{"amount": 5, "metadata": { "b" : 1 , "a" : [ 1 , 2 ] }}')
    assert '"metadata":{"b":1,"a":[1,2]},' in response.get_data(as_text=True)


def test_live_merchant_processes_are_livemode(client, make_merchant):
    from support.helpers import Api

    live = Api(client, make_merchant(live=True)["secretKey"])
    assert live.preorder().get_json()["livemode"] is True


def test_keys_have_the_documented_forms(merchant, make_merchant):
    assert re.fullmatch(r"sk_test_[0-9A-Za-z]{32,}", merchant["secretKey"])
    assert re.fullmatch(r"pk_test_[0-9A-Za-z]{32,}", merchant["publicKey"])
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{32,}={0,2}", merchant["webhookSecret"])
    import base64

    assert len(base64.b64decode(merchant["webhookSecret"][6:])) >= 24
    live = make_merchant(live=True)
    assert live["secretKey"].startswith("sk_live_") and live["publicKey"].startswith("pk_live_")


# --- authentication -------------------------------------------------------------------------


def post(client, headers, body=b'{"amount": 5}', content_type="application/json"):
    return client.post(
        "/payment-button/process/preorder", data=body, content_type=content_type, headers=headers
    )


def test_authentication_is_checked_before_the_body(client):
    # Without a valid key, a malformed body or wrong content type is never looked at.
    assert_error(post(client, {"x-secret-key": "bad"}, body=b"{nope", content_type="text/plain"),
                 401, "invalid_secret_key")
    assert_error(post(client, {}, body=b"x" * 100_000), 401, "missing_secret_key")


def test_browser_origin_is_refused_without_cors_headers(client, merchant):
    response = post(client, {"x-secret-key": merchant["secretKey"], "Origin": "https://shop.example"})
    assert_error(response, 403, "browser_request_forbidden")
    assert not [h for h in response.headers.keys() if h.lower().startswith("access-control-")]


def test_browser_preflight_on_secret_endpoint_is_refused(client):
    response = client.options(
        "/payment-button/process/preorder",
        headers={"Origin": "https://shop.example", "Access-Control-Request-Method": "POST"},
    )
    assert_error(response, 403, "browser_request_forbidden")
    assert not [h for h in response.headers.keys() if h.lower().startswith("access-control-")]


def test_disabled_merchant_is_refused(client, runner, merchant, api):
    assert runner.invoke(args=["merchants", "disable", merchant["merchantId"]]).exit_code == 0
    assert_error(api.preorder(), 403, "merchant_disabled")
    assert_error(api.list(), 403, "merchant_disabled")


def test_no_secret_in_logs(client, merchant, api, caplog):
    caplog.set_level("DEBUG")
    api.preorder({"amount": 5, "metadata": {"email": "very-private@example.com"}})
    post(client, {"x-secret-key": merchant["secretKey"] + "x"})
    logged = caplog.text
    assert merchant["secretKey"] not in logged
    assert "very-private@example.com" not in logged
