import base64
import re
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from werkzeug.datastructures import Headers

from app.webhooks import transport
from app.webhooks.signing import (
    VerificationError,
    new_secret,
    sign,
    user_agent,
    verify,
    webhook_headers,
)

# Known-answer vector from the Standard Webhooks reference libraries' tests.
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_MSG_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

BODY = b'{"type":"process.cancelled","data":{"metadata":{"orderRef":"A-1","note":"\xc3\xa9"}}}'


def test_known_answer_vector_from_the_spec():
    assert sign(SPEC_SECRET, SPEC_MSG_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_known_answer_matches_the_reference_library_signer():
    ts = datetime.fromtimestamp(SPEC_TIMESTAMP, tz=UTC)
    expected = Webhook(SPEC_SECRET).sign(SPEC_MSG_ID, ts, SPEC_BODY.decode())
    assert sign(SPEC_SECRET, SPEC_MSG_ID, SPEC_TIMESTAMP, SPEC_BODY) == expected


def test_new_secret_form():
    secret = new_secret()
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
    assert len(base64.b64decode(secret[len("whsec_"):])) == 32
    assert new_secret() != secret


def test_headers_verify_with_standardwebhooks():
    secret, now = new_secret(), int(time.time())
    headers = webhook_headers(secret, "evt_123", now, BODY)
    assert headers == {
        "webhook-id": "evt_123",
        "webhook-timestamp": str(now),
        "webhook-signature": sign(secret, "evt_123", now, BODY),
        "Content-Type": "application/json",
        "User-Agent": user_agent(),
    }
    assert Webhook(secret).verify(BODY, headers)["data"]["metadata"] == {
        "orderRef": "A-1", "note": "\u00e9"}


def test_user_agent_names_service_and_installed_version():
    from importlib.metadata import version

    assert user_agent() == f"preorder-service-webhooks/{version('preorder-service')}"


def tampered(tamper, now):
    """A delivery signed at `now`, then changed as `tamper` says: (secret to verify with, headers,
    body)."""
    secret = new_secret()
    body, verify_secret = BODY, secret
    headers = webhook_headers(secret, "evt_123", now, BODY)
    if tamper == "body":
        body = BODY.replace(b"A-1", b"A-2")
    elif tamper == "id":
        headers["webhook-id"] = "evt_124"
    elif tamper == "timestamp":
        headers["webhook-timestamp"] = str(now + 1)
    elif tamper == "signature":
        sig = bytearray(base64.b64decode(headers["webhook-signature"][3:]))
        sig[0] ^= 1
        headers["webhook-signature"] = "v1," + base64.b64encode(bytes(sig)).decode()
    elif tamper == "other_secret":
        verify_secret = new_secret()
    elif tamper == "v2_only":
        headers["webhook-signature"] = "v2," + headers["webhook-signature"][3:]
    elif tamper == "garbage_signature":
        headers["webhook-signature"] = "v1,\u00e9\u00e9 v1, ,,"
    elif tamper == "empty_signature":
        headers["webhook-signature"] = ""
    elif tamper.startswith("missing_"):
        del headers["webhook-" + tamper[len("missing_"):]]
    elif tamper == "timestamp_not_digits":
        headers["webhook-timestamp"] = f"{now}.0"
    elif tamper == "timestamp_negative":
        headers["webhook-timestamp"] = f"-{now}"
    else:
        raise AssertionError(tamper)
    return verify_secret, headers, body


@pytest.mark.parametrize("tamper", [
    "body", "id", "timestamp", "signature", "other_secret", "missing_signature", "v2_only",
])
def test_tampered_delivery_fails_verification(tamper):
    verify_secret, headers, body = tampered(tamper, int(time.time()))
    with pytest.raises(WebhookVerificationError):
        Webhook(verify_secret).verify(body, headers)


def test_stale_timestamp_is_refused_by_merchant_library():
    secret = new_secret()
    old = int(time.time()) - 600
    with pytest.raises(WebhookVerificationError, match="too old"):
        Webhook(secret).verify(BODY, webhook_headers(secret, "evt_1", old, BODY))


@pytest.mark.parametrize("bad", ["whsec_", "whsec_not base64!", ""])
def test_invalid_secret_is_refused(bad):
    with pytest.raises(ValueError):
        sign(bad, "evt_1", 1, b"{}")


def test_body_must_be_bytes_and_timestamp_int():
    with pytest.raises(TypeError):
        sign(SPEC_SECRET, "evt_1", 1, "{}")
    with pytest.raises(TypeError):
        sign(SPEC_SECRET, "evt_1", 1.5, b"{}")


def test_delivery_over_http_verifies_on_the_raw_body(receiver):
    """What a merchant does: verify the raw bytes and headers as received."""
    secret, now = new_secret(), int(time.time())
    headers = webhook_headers(secret, "evt_http", now, BODY)
    result = transport.post(transport.new_session(), receiver.url("/webhooks"), BODY, headers,
                            timeout=5, livemode=False, allow_loopback=True)
    assert result.ok
    [got] = receiver.wait_for(1)
    assert got.body == BODY
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"] == user_agent()
    payload = Webhook(secret).verify(got.body, got.headers)
    assert payload["type"] == "process.cancelled"


# --- verify(): the receiving side, as the demo shop's receiver uses it --------------------------

NOW = 1_795_000_000


def test_verify_accepts_our_headers_and_the_reference_signer():
    secret = new_secret()
    verify(secret, webhook_headers(secret, "evt_1", NOW, BODY), BODY, now=NOW)
    reference = Webhook(secret).sign("evt_1", datetime.fromtimestamp(NOW, tz=UTC), BODY.decode())
    verify(secret, {"webhook-id": "evt_1", "webhook-timestamp": str(NOW),
                    "webhook-signature": reference},
           BODY, now=NOW)


def test_verify_reads_headers_case_insensitively_from_a_request():
    secret = new_secret()
    headers = Headers({k.title(): v
                       for k, v in webhook_headers(secret, "evt_1", NOW, BODY).items()})
    assert "Webhook-Signature" in headers.keys()
    verify(secret, headers, BODY, now=NOW)


def test_verify_accepts_any_matching_v1_among_several():
    secret = new_secret()
    good = sign(secret, "evt_1", NOW, BODY)
    headers = webhook_headers(secret, "evt_1", NOW, BODY)
    headers["webhook-signature"] = f"v1a,abc v1,{'A' * 44} v1,not*base64 {good}"
    verify(secret, headers, BODY, now=NOW)


@pytest.mark.parametrize("skew, ok", [(0, True), (300, True), (-300, True), (301, False),
                                      (-301, False)])
def test_verify_timestamp_tolerance_is_five_minutes_either_way(skew, ok):
    secret = new_secret()
    headers = webhook_headers(secret, "evt_1", NOW + skew, BODY)
    if ok:
        verify(secret, headers, BODY, now=NOW)
    else:
        with pytest.raises(VerificationError, match="more than 300 s from now"):
            verify(secret, headers, BODY, now=NOW)


@pytest.mark.parametrize("tamper, reason", [
    ("body", "no matching v1 signature"),
    ("id", "no matching v1 signature"),
    ("timestamp", "no matching v1 signature"),
    ("signature", "no matching v1 signature"),
    ("other_secret", "no matching v1 signature"),
    ("v2_only", "no matching v1 signature"),
    ("garbage_signature", "no matching v1 signature"),
    ("empty_signature", "missing webhook-id"),
    ("missing_id", "missing webhook-id"),
    ("missing_timestamp", "missing webhook-id"),
    ("missing_signature", "missing webhook-id"),
    ("timestamp_not_digits", "not unix seconds"),
    ("timestamp_negative", "not unix seconds"),
])
def test_verify_refuses_tampered_or_incomplete_deliveries(tamper, reason):
    verify_secret, headers, body = tampered(tamper, NOW)
    with pytest.raises(VerificationError, match=reason):
        verify(verify_secret, headers, body, now=NOW)


def test_a_timestamp_of_thousands_of_digits_fails_verification_cleanly():
    secret = new_secret()
    headers = {"webhook-id": "evt_1", "webhook-timestamp": "9" * 5000,
               "webhook-signature": "v1,AAAA"}
    with pytest.raises(VerificationError):
        verify(secret, headers, b"{}", now=1_795_000_000)


def test_two_secrets_give_two_signatures_each_verifying_alone():
    """A rolled secret's overlap: one `v1,` signature per secret, new first, space-separated."""
    new, old, now = new_secret(), new_secret(), int(time.time())
    headers = webhook_headers([new, old], "evt_roll", now, BODY)
    assert headers["webhook-signature"] == (
        f"{sign(new, 'evt_roll', now, BODY)} {sign(old, 'evt_roll', now, BODY)}")
    for secret in (new, old):
        assert Webhook(secret).verify(BODY, headers)["type"] == "process.cancelled"
        verify(secret, headers, BODY, now=now)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(BODY, headers)
    assert webhook_headers([new], "evt_roll", now, BODY) == (
        webhook_headers(new, "evt_roll", now, BODY))
