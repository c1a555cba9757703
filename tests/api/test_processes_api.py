"""Reading, listing and cancelling processes (docs/contract.md, Merchant API and States)."""
import pytest
from support.helpers import Api, assert_error


@pytest.fixture
def other(client, make_merchant):
    return Api(client, make_merchant(name="Other shop")["secretKey"])


def create(api, amount=10, ref="A"):
    response = api.preorder({"amount": amount, "metadata": {"orderRef": ref}})
    assert response.status_code == 200
    return response.get_json()


def test_get_returns_the_same_process_object(api):
    created = create(api)
    response = api.get(created["processId"])
    assert response.status_code == 200
    assert response.get_json() == created


def test_another_merchants_process_is_404_like_an_unknown_one(api, other):
    created = create(api)
    unknown = assert_error(other.get("00000000-0000-4000-8000-000000000000"), 404, "not_found")
    foreign = assert_error(other.get(created["processId"]), 404, "not_found")
    assert foreign == unknown
    assert_error(other.cancel(created["processId"]), 404, "not_found")
    assert api.get(created["processId"]).get_json()["status"] == "pending"


def test_list_is_newest_first_and_only_mine(api, other, clock):
    ids = []
    for i in range(3):
        ids.append(create(api, ref=str(i))["processId"])
        clock.advance(1)
    create(other)
    body = api.list().get_json()
    assert [p["processId"] for p in body["data"]] == ids[::-1]
    assert body["hasMore"] is False


def test_list_pagination_with_starting_after(api):
    ids = [create(api, ref=str(i))["processId"] for i in range(5)][::-1]
    page1 = api.list("?limit=2").get_json()
    assert [p["processId"] for p in page1["data"]] == ids[:2] and page1["hasMore"] is True
    page2 = api.list(f"?limit=2&starting_after={ids[1]}").get_json()
    assert [p["processId"] for p in page2["data"]] == ids[2:4] and page2["hasMore"] is True
    page3 = api.list(f"?limit=2&starting_after={ids[3]}").get_json()
    assert [p["processId"] for p in page3["data"]] == ids[4:] and page3["hasMore"] is False


def test_list_default_limit_is_20(api):
    for i in range(21):
        create(api, ref=str(i))
    body = api.list().get_json()
    assert len(body["data"]) == 20 and body["hasMore"] is True
    assert len(api.list("?limit=100").get_json()["data"]) == 21


def test_list_filters_by_status(api, clock):
    a, b, c = (create(api, ref=r)["processId"] for r in "abc")
    api.cancel(b)
    clock.advance(1801)  # a and c expire (never swept: reads still say expired)
    d = create(api, ref="d")["processId"]

    def status_of(q):
        return [p["processId"] for p in api.list(f"?status={q}").get_json()["data"]]

    assert status_of("pending") == [d]
    assert status_of("cancelled") == [b]
    assert status_of("expired") == [c, a]
    assert status_of("completed") == []


@pytest.mark.parametrize(
    "query,field",
    [
        ("?limit=0", "limit"),
        ("?limit=101", "limit"),
        ("?limit=abc", "limit"),
        ("?limit=12.5", "limit"),
        ("?limit=-1", "limit"),
        ("?status=paid", "status"),
        ("?starting_after=nope", "starting_after"),
        ("?starting_after=00000000-0000-4000-8000-000000000000", "starting_after"),
        ("?stauts=pending", "stauts"),
    ],
)
def test_list_query_validation(api, query, field):
    error = assert_error(api.list(query), 400, "validation_error")
    assert list(error["errors"]) == [field]


def test_starting_after_another_merchants_process_is_refused(api, other):
    foreign = create(other)["processId"]
    assert_error(api.list(f"?starting_after={foreign}"), 400, "validation_error")


def test_cancel_moves_pending_to_cancelled(api, clock):
    created = create(api)
    clock.advance(60)
    response = api.cancel(created["processId"])
    assert response.status_code == 200
    body = response.get_json()
    assert body["status"] == "cancelled"
    assert body["updatedAt"] == "2026-11-18T11:07:40Z"
    assert body["metadata"] == created["metadata"]
    assert api.get(created["processId"]).get_json() == body


def test_cancel_twice_is_invalid_state(api):
    created = create(api)
    api.cancel(created["processId"])
    error = assert_error(api.cancel(created["processId"]), 409, "invalid_state")
    assert "cancelled" in error["message"]


def test_cancel_writes_one_process_cancelled_event(api, runner):
    created = create(api)
    api.cancel(created["processId"])
    api.cancel(created["processId"])  # refused: no second event
    output = runner.invoke(args=["processes", "show", created["processId"]]).output
    assert output.count("process.cancelled") == 1
    assert "events: 1" in output


def test_a_process_past_its_expiry_reads_as_expired(api, clock):
    created = create(api)
    clock.advance(1799)
    assert api.get(created["processId"]).get_json()["status"] == "pending"
    clock.advance(1)
    body = api.get(created["processId"]).get_json()
    assert body["status"] == "expired"
    assert body["updatedAt"] == body["expiresAt"]


def test_an_expired_process_cannot_be_cancelled(api, clock, runner):
    created = create(api)
    clock.advance(1800)
    error = assert_error(api.cancel(created["processId"]), 409, "invalid_state")
    assert "expired" in error["message"]
    assert "events: 0" in runner.invoke(args=["processes", "show", created["processId"]]).output


def test_cancel_ignores_a_body(api):
    created = create(api)
    response = api.client.post(
        f"/payment-button/process/{created['processId']}/cancel",
        data=b"anything", content_type="text/plain", headers=api.headers(),
    )
    assert response.status_code == 200
