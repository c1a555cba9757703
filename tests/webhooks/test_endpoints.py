"""Several webhook endpoints per merchant: the Merchant API's routes, the fan-out of each event into
one delivery per endpoint (its own secret, state and replay), and one endpoint that hangs delaying
neither the merchant's others nor other merchants. Real receivers, the real worker."""
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from support.helpers import FakeClock, assert_error, attempts_of, only_event, running, wait_until
from support.receiver import Receiver, Reply

from app.worker import Worker

BASE = "/payment-button/webhook-endpoints"
TYPES = ["payment.completed", "payment.failed", "process.cancelled", "process.expired",
         "payment.pending", "payment.partial", "payment.received_late", "payment.reversed",
         "payment.unexpected", "refund.created", "refund.completed", "refund.cancelled",
         "refund.reversed"]


@pytest.fixture
def clock():
    """Starts at the real time: standardwebhooks refuses timestamps more than 5 minutes off."""
    return FakeClock(int(time.time()))


def call(shop, path="", body=None, method="post"):
    headers = {"x-secret-key": shop.keys["secretKey"]}
    if method == "get":
        return shop.api.client.get(BASE + path, headers=headers)
    return shop.api.client.post(BASE + path, json=body, headers=headers)


def add(shop, url, **fields):
    response = call(shop, body={"url": url, **fields})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_the_endpoint_routes_as_the_contract_says(make_shop, receiver, clock):
    shop = make_shop()
    created = add(shop, receiver.url("/books"), events=["refund.created", "payment.completed"],
                  description="Bookkeeping")
    assert set(created) == {"endpointId", "url", "events", "enabled", "description", "createdAt",
                            "secret"}
    assert created["secret"].startswith("whsec_") and created["endpointId"].startswith("we_")
    assert (created["url"], created["events"], created["enabled"], created["description"]) == (
        receiver.url("/books"), ["refund.created", "payment.completed"], True, "Bookkeeping")
    every = add(shop, receiver.url("/shop"))
    assert every["events"] == ["*"] and every["description"] is None

    listed = call(shop, method="get")
    assert listed.status_code == 200
    assert listed.get_json() == {"data": [
        {k: v for k, v in e.items() if k != "secret"} for e in (created, every)]}  # oldest first

    one = created["endpointId"]
    changed = call(shop, f"/{one}", {"events": ["*"], "enabled": False, "description": None})
    assert changed.status_code == 200
    assert (changed.get_json()["events"], changed.get_json()["enabled"],
            changed.get_json()["description"]) == (["*"], False, None)
    assert "secret" not in changed.get_json()

    rolled = call(shop, f"/{one}/roll-secret", {"overlapHours": 0})
    assert rolled.status_code == 200
    assert rolled.get_json()["secret"] not in (created["secret"], None)
    assert call(shop, f"/{one}/roll-secret").status_code == 200  # no body: the default overlap

    gone = call(shop, f"/{one}/delete")
    assert gone.status_code == 200 and gone.get_json()["deleted"] is True
    assert [e["endpointId"] for e in call(shop, method="get").get_json()["data"]] == [
        every["endpointId"]]
    for path in (f"/{one}", f"/{one}/roll-secret", f"/{one}/delete", "/we_nope"):
        assert_error(call(shop, path, {}), 404, "not_found", "No such webhook endpoint.")
    other = make_shop()
    assert_error(call(other, f"/{every['endpointId']}", {"enabled": False}), 404, "not_found")


@pytest.mark.parametrize("body, field", [
    ({"url": "http://127.0.0.1:9/x", "events": []}, "events"),
    ({"url": "http://127.0.0.1:9/x", "events": ["payment.done"]}, "events"),
    ({"url": "http://127.0.0.1:9/x", "events": "payment.completed"}, "events"),
    ({"url": "http://127.0.0.1:9/x", "events": [1]}, "events"),
    ({"url": "http://10.1.2.3/x"}, "url"),
    ({"url": "http://169.254.169.254/latest/meta-data"}, "url"),
    ({"url": "ftp://example.com/x"}, "url"),
    ({}, "url"),
    ({"url": "http://127.0.0.1:9/x", "enabled": "yes"}, "enabled"),
    ({"url": "http://127.0.0.1:9/x", "secret": "whsec_mine"}, "secret"),
])
def test_a_bad_endpoint_is_a_400_naming_the_field(make_shop, body, field):
    response = call(make_shop(), body=body)
    assert_error(response, 400, "validation_error")
    assert list(response.get_json()["errors"]) == [field]


def test_a_live_endpoint_must_be_https(make_shop):
    response = call(make_shop(live=True), body={"url": "http://hooks.example/x"})
    assert_error(response, 400, "validation_error")
    assert list(response.get_json()["errors"]) == ["url"]


def test_an_eleventh_endpoint_is_refused(make_shop):
    shop = make_shop()
    for n in range(10):
        add(shop, f"http://127.0.0.1:9/{n}")
    assert_error(call(shop, body={"url": "http://127.0.0.1:9/11"}), 409, "endpoint_limit",
                 "A merchant has at most 10 webhook endpoints: delete one first.")
    assert call(shop, f"/{call(shop, method='get').get_json()['data'][0]['endpointId']}/delete"
                ).status_code == 200
    add(shop, "http://127.0.0.1:9/11")  # a deleted one does not count


def test_each_event_goes_to_the_endpoints_that_want_it_each_signed_with_its_own_secret(
        app, make_shop, receiver, worker, clock):
    shop = make_shop(webhook_url=receiver.url("/first"))  # endpoint 1, every event
    books = add(shop, receiver.url("/books"), events=["refund.created"])
    chat = add(shop, receiver.url("/chat"), events=["process.cancelled", "payment.completed"])
    off = add(shop, receiver.url("/off"))
    call(shop, f"/{off['endpointId']}", {"enabled": False})

    process_id, _ = shop.cancelled()
    worker.run_once()
    got = {r.path: r for r in receiver.wait_for(2)}
    assert sorted(got) == ["/chat", "/first"]  # not the bookkeeping's, not the disabled one
    event = only_event(app, process_id)
    assert {r.headers["webhook-id"] for r in got.values()} == {event.id}
    assert got["/first"].body == got["/chat"].body == event.payload.encode()
    Webhook(shop.secret).verify(got["/first"].body, got["/first"].headers)
    Webhook(chat["secret"]).verify(got["/chat"].body, got["/chat"].headers)
    with pytest.raises(WebhookVerificationError):  # never signed with another endpoint's secret
        Webhook(shop.secret).verify(got["/chat"].body, got["/chat"].headers)
    assert sorted((d.endpoint_id, d.status) for d in event.deliveries) == sorted(
        [(chat["endpointId"], "delivered"), (event.deliveries[0].endpoint_id, "delivered")])
    assert books["endpointId"] not in {d.endpoint_id for d in event.deliveries}
    assert {a.endpoint_id for a in attempts_of(app, event.id)} == {
        d.endpoint_id for d in event.deliveries}

    # An endpoint added or subscribed after the event was made does not get it.
    call(shop, f"/{books['endpointId']}", {"events": ["*"]})
    add(shop, receiver.url("/late"))
    worker.run_once()
    assert len(receiver.requests) == 2 and len(only_event(app, process_id).deliveries) == 2


def test_each_delivery_has_its_own_retries_and_replay(app, runner, make_shop, receiver, clock):
    failing = Receiver().start()
    try:
        failing.default = Reply(status=500)
        shop = make_shop(webhook_url=receiver.url("/ok"))
        broken = add(shop, failing.url("/broken"))
        app.config["WEBHOOK_RETRY_SCHEDULE"] = (0, 5)
        process_id, _ = shop.cancelled()
        with Worker.from_app(app, concurrency=4) as worker:
            worker.run_once()
            clock.advance(5)
            worker.run_once()
            event = only_event(app, process_id)
            states = {d.endpoint_id: (d.status, d.attempts) for d in event.deliveries}
            assert states[broken["endpointId"]] == ("failed", 2)
            assert list(states.values()).count(("delivered", 1)) == 1
            assert event.status == "failed"  # the list's summary: the worst of its deliveries

            shown = runner.invoke(args=["events", "show", event.id]).output
            assert f"delivery to {broken['endpointId']}: failed, 2 attempt(s)" in shown
            failing.default = Reply(status=204)
            replayed = runner.invoke(args=["events", "replay", event.id])  # the failed one only
            assert replayed.exit_code == 0, replayed.output
            worker.run_once()
            assert len(failing.wait_for(3)) == 3 and len(receiver.requests) == 1
            # --endpoint: that delivery whatever its state (a delivered one is sent again).
            ok_id = next(d.endpoint_id for d in event.deliveries
                         if d.endpoint_id != broken["endpointId"])
            again = runner.invoke(args=["events", "replay", event.id, "--endpoint", ok_id])
            assert again.exit_code == 0, again.output
            worker.run_once()
            assert len(receiver.wait_for(2)) == 2 and len(failing.requests) == 3
            assert only_event(app, process_id).status == "delivered"
    finally:
        failing.stop()


def test_disabling_or_deleting_cancels_pending_deliveries_and_enabling_does_not_resume(
        app, runner, make_shop, receiver, worker, clock):
    shop = make_shop(webhook_url=receiver.url("/first"))
    second = add(shop, receiver.url("/second"))
    third = add(shop, receiver.url("/third"))
    process_id, _ = shop.cancelled()
    call(shop, f"/{second['endpointId']}", {"enabled": False})
    call(shop, f"/{third['endpointId']}/delete")
    call(shop, f"/{second['endpointId']}", {"enabled": True})
    worker.run_once()
    assert [r.path for r in receiver.wait_for(1)] == ["/first"]
    states = {d.endpoint_id: d.status for d in only_event(app, process_id).deliveries}
    assert (states[second["endpointId"]], states[third["endpointId"]]) == ("cancelled", "cancelled")
    event_id = only_event(app, process_id).id
    assert runner.invoke(args=["events", "replay", "--cancelled"]).output == (
        f"Re-queued 1 event for delivery now.\n  {event_id}\n")  # the enabled one's
    worker.run_once()
    assert sorted(r.path for r in receiver.wait_for(2)) == ["/first", "/second"]


def test_a_test_event_goes_to_the_endpoint_chosen(app, runner, make_shop, receiver, worker, clock):
    from app.domain import endpoints, merchants, outbox

    shop = make_shop(webhook_url=receiver.url("/first"))
    second = add(shop, receiver.url("/second"), events=["refund.created"])
    db = app.extensions["db"]
    chosen = endpoints.get(db, shop.id, second["endpointId"])
    outbox.queue_test(db, merchants.get(db, shop.id), chosen, clock())
    with pytest.raises(outbox.TestEventWaiting):
        outbox.queue_test(db, merchants.get(db, shop.id), chosen, clock())
    worker.run_once()
    [got] = receiver.wait_for(1)
    assert got.path == "/second"  # whatever its subscriptions: a test goes where it is sent
    Webhook(second["secret"]).verify(got.body, got.headers)


def test_the_cli_adds_lists_updates_rolls_and_deletes(runner, make_shop, receiver):
    shop = make_shop(webhook_url=receiver.url("/first"))
    added = runner.invoke(args=["endpoints", "add", shop.id, receiver.url("/books"), "--events",
                                "refund.created,refund.completed", "--description", "Books"])
    assert added.exit_code == 0, added.output
    endpoint_id = added.output.split()[3]
    assert "signing secret:  whsec_" in added.output
    listed = runner.invoke(args=["endpoints", "list", shop.id]).output.splitlines()
    assert listed[0].split() == ["ENDPOINT", "ID", "STATE", "EVENTS", "URL", "DESCRIPTION",
                                 "CREATED"]
    assert listed[2].split()[:5] == [endpoint_id, "enabled", "refund.created,refund.completed",
                                     receiver.url("/books"), "Books"]
    assert runner.invoke(args=["endpoints", "disable", endpoint_id]).output == (
        f"Webhook endpoint {endpoint_id} (disabled): {receiver.url('/books')}, events"
        " refund.created,refund.completed.\n")
    assert runner.invoke(args=["endpoints", "update", endpoint_id, "--events", "*"]).exit_code == 0
    bad = runner.invoke(args=["endpoints", "update", endpoint_id, "--events", "refund.lost"])
    assert bad.exit_code == 1 and "Unknown event type 'refund.lost'" in bad.output
    rolled = runner.invoke(args=["endpoints", "roll-secret", endpoint_id, "--overlap-hours", "0"])
    assert rolled.output.startswith(f"New signing secret of {endpoint_id} (shown once): whsec_")
    assert runner.invoke(args=["endpoints", "delete", endpoint_id]).exit_code == 0
    missing = runner.invoke(args=["endpoints", "delete", endpoint_id])
    assert (missing.exit_code,
            missing.output.startswith(f"Error: No webhook endpoint {endpoint_id}")) == (1, True)
    # The single-URL command acts on the first endpoint.
    first_id = runner.invoke(args=["endpoints", "list", shop.id]).output.splitlines()[1].split()[0]
    moved = runner.invoke(args=["merchants", "set-webhook", shop.id, receiver.url("/moved")])
    assert moved.output == (f"Webhook URL of {shop.id} set to {receiver.url('/moved')}"
                            f" (endpoint {first_id}).\n")


def test_an_endpoint_that_hangs_delays_neither_its_merchants_others_nor_other_merchants(
        app, make_shop, receiver, clock):
    """A receiver that never answers beside ones that do: every delivery to the answering ones
    arrives while the hanging one's attempts are still open."""
    hanging = Receiver().start()
    try:
        hanging.default = Reply(delay=60)
        shop = make_shop(webhook_url=receiver.url("/shop"))
        add(shop, hanging.url("/chat"))  # the merchant's second endpoint never answers
        other = make_shop(webhook_url=receiver.url("/other"))
        # The real clock: a slow attempt is told by how long it has been in flight.
        with Worker(app.extensions["db"], {**app.config, "CLOCK": time.time}, concurrency=4,
                    batch_size=10) as worker, running(worker):
            for _ in range(6):
                shop.cancelled()
                other.cancelled()
            got = receiver.wait_for(12, timeout=20)
            assert sorted(r.path for r in got).count("/shop") == 6
            assert sorted(r.path for r in got).count("/other") == 6
            assert 1 <= len(hanging.requests) <= 2  # capped: half the threads at most
            wait_until(lambda: sum(d.status == "delivered" for e in _events(app, shop.id)
                                   for d in e.deliveries) == 6, "the shop's answered ones recorded")
            hanging.stop()  # cut: those attempts fail and are retried later
    finally:
        hanging.stop()


def _events(app, merchant_id):
    from app.domain import outbox

    return outbox.list_recent(app.extensions["db"], limit=100, merchant_id=merchant_id)


def test_a_disabled_endpoint_gets_nothing_even_by_replay(app, runner, make_shop, receiver, clock,
                                                         leases_run_out):
    shop = make_shop(webhook_url=receiver.url("/first"))
    second = add(shop, receiver.url("/second"))
    process_id, _ = shop.cancelled()
    db = app.extensions["db"]
    with Worker.from_app(app, concurrency=2) as worker:
        # Claimed, then disabled before the attempt: the worker sends nothing to it.
        with db.transaction() as conn:
            from app.data import outbox as event_rows
            claimed = event_rows.claim_due(conn, owner=worker.owner, now=clock(),
                                           lease_seconds=2, limit=10)
        call(shop, f"/{second['endpointId']}", {"enabled": False})
        # A replay while that lease lives re-queues nothing to it: never two workers at once.
        event_id = only_event(app, process_id).id
        replayed = runner.invoke(args=["events", "replay", "--cancelled"])
        assert replayed.output == "Re-queued 0 events for delivery now.\n"
        leases_run_out(3)  # the claims ran out: the worker takes them again
        worker.run_once()
        assert [r.path for r in receiver.wait_for(1)] == ["/first"]
        assert len(claimed) == 2
        # Replays of every kind leave a disabled endpoint alone.
        for args in (["events", "replay", event_id], ["events", "replay", "--cancelled"],
                     ["events", "replay", "--failed"]):
            runner.invoke(args=args)
        worker.run_once()
    # the default replay resent it
    assert [r.path for r in receiver.requests] == ["/first", "/first"]
    states = {d.endpoint_id: d.status for d in only_event(app, process_id).deliveries}
    assert states[second["endpointId"]] == "cancelled"


def test_a_secret_rolled_away_never_comes_back(app, runner, make_shop, receiver, clock):
    shop = make_shop(webhook_url=receiver.url("/first"))  # signs with the creation's secret
    rotated = runner.invoke(args=["merchants", "rotate-webhook-secret", shop.id, "--overlap-hours",
                                  "0"]).output
    new = rotated.split("(shown once): ")[1].split()[0]
    [first] = call(shop, method="get").get_json()["data"]
    call(shop, f"/{first['endpointId']}/delete")
    runner.invoke(args=["merchants", "set-webhook", shop.id, receiver.url("/again")])
    shop.cancelled()
    with Worker.from_app(app) as worker:
        worker.run_once()
    [got] = receiver.wait_for(1)
    Webhook(new).verify(got.body, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(shop.secret).verify(got.body, got.headers)


@pytest.mark.parametrize("path", ["/we_%00", "/we_%00/delete", "/x%00/roll-secret",
                                  "/we_" + "A" * 24, "/" + "9" * 300])
def test_an_id_of_another_form_is_a_404_on_every_backend(make_shop, path):
    assert_error(call(make_shop(), path, {}), 404, "not_found", "No such webhook endpoint.")


@pytest.mark.parametrize("description", ["a\x00b", "x" * 251, "line\nbreak"])
def test_a_description_is_plain_text_at_every_door(app, make_shop, description):
    from app.domain import endpoints, merchants

    shop = make_shop()
    assert_error(call(shop, body={"url": "http://127.0.0.1:9/x", "description": description}),
                 400, "validation_error")
    with pytest.raises(endpoints.EndpointError):
        endpoints.create(app.extensions["db"], merchants.get(app.extensions["db"], shop.id),
                         url="http://127.0.0.1:9/x", now=0, description=description,
                         allow_loopback=True)


@pytest.mark.sqlite_only  # PostgreSQL's planner picks a scan on tables this small
def test_a_merchants_failing_deliveries_are_read_through_its_own_index(app):
    """The console's failing list and the overview's count read the merchant's own failing
    deliveries (a partial index), not every delivery of every merchant."""
    from app.data.outbox import STATES

    conn = app.extensions["db"].connection()
    for sql in (f"SELECT d.seq FROM deliveries d WHERE d.merchant_id = ? AND {STATES['failing']}"
                " ORDER BY d.seq DESC LIMIT 50",
                "SELECT count(*) FROM deliveries d WHERE d.merchant_id = ?"
                f" AND {STATES['failing']}"):
        plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, ("mer_x",)))
        assert "USING INDEX deliveries_failing (merchant_id=?)" in plan, plan
