"""Idempotency-Key on preorders (docs/contract.md): replay, conflict, expiry, concurrency."""
import json
import threading

import pytest
from support.helpers import assert_error

BODY = {"amount": 42.5, "metadata": {"orderRef": "A-7"}}


def test_same_key_same_body_replays_the_first_response(api):
    first = api.preorder(BODY, headers={"Idempotency-Key": "order-A-7"})
    second = api.preorder(BODY, headers={"Idempotency-Key": "order-A-7"})
    assert first.status_code == second.status_code == 200
    assert "Idempotent-Replayed" not in first.headers
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.get_data() == first.get_data()
    assert len(api.list().get_json()["data"]) == 1


def test_replay_ignores_json_whitespace(api):
    first = api.preorder_raw('{"amount": 42.5, "metadata": {"orderRef": "A-7"}}',
                             headers={"Idempotency-Key": "k"})
    second = api.preorder_raw('{ "amount" : 42.5 ,"metadata":{"orderRef":"A-7"} }',
                              headers={"Idempotency-Key": "k"})
    assert second.headers["Idempotent-Replayed"] == "true"
    assert second.get_json()["processId"] == first.get_json()["processId"]


def test_replay_returns_the_first_response_even_after_a_change(api):
    first = api.preorder(BODY, headers={"Idempotency-Key": "k"})
    api.cancel(first.get_json()["processId"])
    again = api.preorder(BODY, headers={"Idempotency-Key": "k"})
    assert again.get_data() == first.get_data()


@pytest.mark.parametrize(
    "other", [{"amount": 42.51, "metadata": {"orderRef": "A-7"}}, {"amount": 42.5},
              {"amount": 42.5, "metadata": {"orderRef": "A-8"}}]
)
def test_same_key_different_body_conflicts(api, other):
    api.preorder(BODY, headers={"Idempotency-Key": "k"})
    assert_error(api.preorder(other, headers={"Idempotency-Key": "k"}), 409,
                 "idempotency_key_reused")
    assert len(api.list().get_json()["data"]) == 1


def test_keys_are_per_merchant(client, make_merchant):
    from support.helpers import Api

    a, b = (Api(client, make_merchant(name=n)["secretKey"]) for n in ("A", "B"))
    pa = a.preorder(BODY, headers={"Idempotency-Key": "shared"}).get_json()["processId"]
    rb = b.preorder(BODY, headers={"Idempotency-Key": "shared"})
    assert "Idempotent-Replayed" not in rb.headers
    assert rb.get_json()["processId"] != pa


def test_key_expires_after_24_hours(api, clock):
    first = api.preorder(BODY, headers={"Idempotency-Key": "k"}).get_json()["processId"]
    clock.advance(24 * 3600 - 1)
    assert api.preorder(BODY, headers={"Idempotency-Key": "k"}).get_json()["processId"] == first
    clock.advance(2)
    later = api.preorder({"amount": 1}, headers={"Idempotency-Key": "k"})
    assert later.status_code == 200 and "Idempotent-Replayed" not in later.headers
    assert later.get_json()["processId"] != first


def test_failed_validation_is_not_remembered(api):
    assert_error(api.preorder({"amount": 0}, headers={"Idempotency-Key": "k"}), 400,
                 "validation_error")
    assert api.preorder(BODY, headers={"Idempotency-Key": "k"}).status_code == 200


def test_sixteen_concurrent_requests_with_one_key_create_one_process(app, merchant):
    barrier = threading.Barrier(16)
    results = []

    def call():
        client = app.test_client()
        barrier.wait()
        response = client.post(
            "/payment-button/process/preorder",
            data=json.dumps(BODY),
            content_type="application/json",
            headers={"x-secret-key": merchant["secretKey"], "Idempotency-Key": "race"},
        )
        results.append((response.status_code, response.get_json()["processId"],
                        response.headers.get("Idempotent-Replayed")))

    threads = [threading.Thread(target=call) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r[0] for r in results] == [200] * 16
    assert len({r[1] for r in results}) == 1
    assert sorted(r[2] or "" for r in results) == [""] + ["true"] * 15
    from support.helpers import Api

    assert len(Api(app.test_client(), merchant["secretKey"]).list().get_json()["data"]) == 1
