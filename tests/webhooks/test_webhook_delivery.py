"""The delivery worker in-process: `Worker.run_once` against a real local receiver and a real SQLite
file, with the clock moved forward instead of sleeping through the retry schedule."""
import logging
import re
import sqlite3
import threading
import time
from dataclasses import replace
from email.utils import formatdate

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError
from support import dbutil
from support.helpers import (
    FakeClock,
    attempts_of,
    body_json,
    only_delivery,
    only_event,
    raw_metadata,
    running,
    wait_until,
)
from support.receiver import Receiver, Reply, closed_port

from app.data import endpoints as endpoint_rows
from app.data import merchants as merchant_rows
from app.data import outbox as event_rows
from app.domain.representation import iso
from app.webhooks import delivery, transport
from app.webhooks.signing import user_agent
from app.worker import POLL_MIN_SECONDS, Worker

SHORT = {"WEBHOOK_RETRY_SCHEDULE": "0,5,10"}


@pytest.fixture
def clock():
    """Starts at the real time: standardwebhooks refuses timestamps more than 5 minutes off."""
    return FakeClock(int(time.time()))


def test_cancel_delivers_one_webhook_a_merchant_can_verify(app, shop, receiver, worker, clock):
    metadata = ('{"orderRef":"A-1042","email":"buyer@example.com","note":"Grüße ✓",'
                '"total":1.10,"big":12345678901234567890,"nested":{"z":[true,null,{}],"a":""}}')
    process_id, preorder_body = shop.cancelled(metadata)

    worker.run_once()

    [got] = receiver.wait_for(1)
    event = only_event(app, process_id)
    assert (got.method, got.path) == ("POST", "/hooks/preorder")
    assert got.body == event.payload.encode("utf-8")
    payload = Webhook(shop.secret).verify(got.body, got.headers)  # as the merchant does
    assert got.headers["webhook-id"] == event.id
    assert got.headers["webhook-timestamp"] == str(clock.now)
    assert got.headers["content-type"] == "application/json"
    assert got.headers["user-agent"] == user_agent()
    assert payload["type"] == "process.cancelled"
    assert payload["data"]["processId"] == process_id
    assert payload["data"]["status"] == "cancelled"
    assert raw_metadata(got.body.decode("utf-8")) == raw_metadata(preorder_body) == metadata
    assert (event.status, event.attempts, event.delivered_at, event.deliveries[0].lease_owner) == (
        "delivered", 1, clock.now, None)
    [attempt] = attempts_of(app, event.id)
    assert (attempt.status_code, attempt.error, attempt.url) == (
        200, None, receiver.url("/hooks/preorder"))
    worker.run_once()  # nothing left
    assert len(receiver.requests) == len(attempts_of(app, event.id)) == 1


def test_retry_on_500_then_success_same_bytes_same_id(app, shop, receiver, worker, clock):
    receiver.reply(Reply(status=500, body=b"boom"))
    process_id, _ = shop.cancelled()

    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.next_attempt_at, event.last_error) == (
        "pending", 1, clock.now + 5, "HTTP 500")
    clock.advance(4)
    worker.run_once()
    assert len(receiver.requests) == 1  # not due yet
    clock.advance(1)
    worker.run_once()

    first, second = receiver.wait_for(2)
    assert first.body == second.body
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == event.id
    assert int(second.headers["webhook-timestamp"]) == int(first.headers["webhook-timestamp"]) + 5
    Webhook(shop.secret).verify(second.body, second.headers)
    assert only_event(app, process_id).status == "delivered"
    assert [(a.status_code, a.error) for a in attempts_of(app, event.id)] == [
        (500, "HTTP 500"), (200, None)]


@pytest.mark.parametrize("status, retry_after, wait", [
    (503, "120", 120),   # longer than the schedule's 5 s: honoured
    (429, "1", 5),       # shorter: the schedule wins
    (500, "120", 5),     # only 429 and 503 are asked about
    (503, "date +120", 120),  # an HTTP date, read on the worker's clock
])
def test_retry_after(app, shop, receiver, worker, clock, status, retry_after, wait):
    if retry_after.startswith("date"):
        clock.advance(86_400)  # a worker clock a day off the real one must still be the one used
        retry_after = formatdate(clock.now + int(retry_after.split("+")[1]), usegmt=True)
    receiver.reply(Reply(status=status, headers={"Retry-After": retry_after}))
    process_id, _ = shop.cancelled()
    worker.run_once()
    assert only_event(app, process_id).next_attempt_at == clock.now + wait


def test_redirect_is_a_failed_attempt_never_followed(app, shop, receiver, worker, clock):
    receiver.reply(Reply.redirect(receiver.url("/elsewhere")))
    process_id, _ = shop.cancelled()
    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.last_error) == (
        "pending", 1, "redirect 302 not followed")
    [attempt] = attempts_of(app, event.id)
    assert (attempt.status_code, attempt.error) == (302, "redirect 302 not followed")
    assert [r.path for r in receiver.requests] == ["/hooks/preorder"]


@pytest.mark.parametrize("app_config", [
    {"WEBHOOK_TIMEOUT_SECONDS": 0.3, "WEBHOOK_LEASE_SECONDS": 3}])
def test_timeout_is_a_failed_attempt(app, shop, receiver, worker, clock):
    receiver.reply(Reply(delay=5))
    process_id, _ = shop.cancelled()
    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.last_error, event.next_attempt_at) == (
        "pending", 1, "timeout after 0.3s", clock.now + 5)
    [attempt] = attempts_of(app, event.id)
    assert (attempt.status_code, attempt.error) == (None, "timeout after 0.3s")


def test_connection_refused_is_a_failed_attempt(app, make_shop, worker):
    shop = make_shop(webhook_url=f"http://127.0.0.1:{closed_port()}/hook")
    process_id, _ = shop.cancelled()
    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.last_error) == ("pending", "connection refused")


@pytest.mark.parametrize("app_config", [SHORT])
def test_exhausted_schedule_fails_then_replay_delivers(app, shop, receiver, worker, clock, runner):
    receiver.default = Reply(status=500)
    process_id, _ = shop.cancelled()
    event_id = only_event(app, process_id).id
    for wait in (5, 10):
        worker.run_once()
        clock.advance(wait)
    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.next_attempt_at) == ("failed", 3, None)
    clock.advance(3600)
    worker.run_once()
    # final until replayed
    assert (only_event(app, process_id), len(receiver.requests)) == (event, 3)

    result = runner.invoke(args=["events", "replay", event_id])
    assert (result.exit_code, result.output) == (0, f"Re-queued {event_id} for delivery now.\n")
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.next_attempt_at) == ("pending", 0, clock.now)
    receiver.default = Reply(status=204)
    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.delivered_at) == ("delivered", 1, clock.now)
    # history kept
    assert [a.status_code for a in attempts_of(app, event_id)] == [500, 500, 500, 204]
    assert len({r.body for r in receiver.wait_for(4)}) == 1


@pytest.mark.parametrize("app_config", [{"WEBHOOK_RETRY_SCHEDULE": "0"}])
def test_replay_failed_filters_by_merchant_and_time(app, make_shop, receiver, worker, clock,
                                                    runner):
    receiver.default = Reply(status=500)
    one = make_shop(webhook_url=receiver.url("/one"))
    two = make_shop(webhook_url=receiver.url("/two"))
    old, _ = one.cancelled()
    clock.advance(100)
    new, _ = one.cancelled()
    other, _ = two.cancelled()
    worker.run_once()
    assert {only_event(app, p).status for p in (old, new, other)} == {"failed"}

    since = runner.invoke(args=["events", "replay", "--failed", "--merchant", one.id,
                                "--since", iso(clock.now)])
    assert since.exit_code == 0, since.output
    assert since.output == f"Re-queued 1 event for delivery now.\n  {only_event(app, new).id}\n"
    assert [only_event(app, p).status for p in (old, new, other)] == ["failed", "pending", "failed"]

    everyone = runner.invoke(args=["events", "replay", "--failed"])
    assert everyone.output.startswith("Re-queued 2 events for delivery now.\n")
    assert {only_event(app, p).status for p in (old, new, other)} == {"pending"}


def test_merchant_without_url_gets_no_endpoint_then_replay_delivers(
        app, make_shop, receiver, worker, clock, runner):
    shop = make_shop(webhook_url=None)
    process_id, _ = shop.cancelled()
    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.next_attempt_at, event.last_error) == (
        "no_endpoint", 0, None, None)  # no endpoint wanted it: no delivery
    assert attempts_of(app, event.id) == []

    runner.invoke(args=["merchants", "set-webhook", shop.id, receiver.url("/late")])
    result = runner.invoke(args=["events", "replay", "--no-endpoint", "--merchant", shop.id])
    assert result.output == f"Re-queued 1 event for delivery now.\n  {event.id}\n"
    worker.run_once()
    [got] = receiver.wait_for(1)
    assert got.path == "/late" and got.headers["webhook-id"] == event.id
    assert only_event(app, process_id).status == "delivered"


def test_url_and_secret_are_read_at_delivery_time(app, shop, receiver, worker, clock, runner):
    receiver.reply(Reply(status=500))
    process_id, _ = shop.cancelled()
    worker.run_once()
    runner.invoke(args=["merchants", "set-webhook", shop.id, receiver.url("/moved")])
    clock.advance(5)
    worker.run_once()
    assert [r.path for r in receiver.wait_for(2)] == ["/hooks/preorder", "/moved"]
    assert [a.url for a in attempts_of(app, only_event(app, process_id).id)] == [
        receiver.url("/hooks/preorder"), receiver.url("/moved")]


@pytest.mark.parametrize("app_config", [{"WEBHOOK_RETRY_SCHEDULE": "0,5"}])
@pytest.mark.parametrize("url, reason", [
    ("https://127.0.0.1:{port}/hook", r"127\.0\.0\.1 \(loopback\)"),
    ("https://10.0.0.1/hook", r"10\.0\.0\.1 \(private\)"),
    ("https://[::1]:{port}/hook", r"::1 \(loopback\)"),
    ("https://169.254.169.254/latest/meta-data", r"169\.254\.169\.254 \(link-local\)"),
    ("https://localhost:{port}/hook", r"localhost resolves to a loopback address"),
])
def test_ssrf_guard_refuses_private_targets_for_live_merchants(
        app, database, make_shop, receiver, worker, clock, url, reason):
    # Refused when set, so stored as an earlier release let it be (or as DNS that changed since):
    # the guard runs again at every delivery.
    shop = make_shop(live=True)
    dbutil.execute(database, "INSERT INTO webhook_endpoints (id, merchant_id, url, events, enabled,"
                   " secret, created_at) SELECT 'we_' || substr(id, 5), id, ?, '*', 1,"
                   " webhook_secret, created_at FROM merchants WHERE id = ?",
                   url.format(port=receiver.port), shop.id)
    process_id, _ = shop.cancelled()
    expected = rf"unsafe url: {reason}, only public addresses are allowed"

    worker.run_once()
    event = only_event(app, process_id)
    assert re.fullmatch(expected, event.last_error)
    assert (event.status, event.attempts, event.next_attempt_at) == ("pending", 1, clock.now + 5)
    clock.advance(5)
    worker.run_once()  # the schedule goes on, refused again, then the event has failed
    event = only_event(app, process_id)
    assert (event.status, event.attempts) == ("failed", 2)
    attempts = attempts_of(app, event.id)
    assert [a.status_code for a in attempts] == [None, None]
    assert all(re.fullmatch(expected, a.error) for a in attempts)
    assert receiver.requests == []  # nothing was sent anywhere


def test_one_log_line_per_attempt_and_no_secret_or_content(
        app, make_shop, receiver, worker, clock, caplog):
    shop = make_shop(webhook_url=receiver.url("/hooks/tok_pathsecret?key=querysecret"))
    receiver.reply(Reply(status=500, body=b"receiver-body-text"))
    caplog.set_level(logging.INFO)
    process_id, _ = shop.cancelled('{"email":"buyer@example.com","orderRef":"ORDER-XYZ"}')
    worker.run_once()
    clock.advance(5)
    worker.run_once()

    event = only_event(app, process_id)
    lines = [r.getMessage() for r in caplog.records if r.name == delivery.__name__]
    host = f"127.0.0.1:{receiver.port}"
    assert len(lines) == 2
    assert re.fullmatch(
        rf"webhook {event.id} process\.cancelled to {event.deliveries[0].endpoint_id}"
        rf" -> {re.escape(host)}: HTTP 500 in \d+ ms"
        r" \(attempt 1, next in 5 s\)", lines[0])
    assert re.fullmatch(
        rf"webhook {event.id} process\.cancelled to {event.deliveries[0].endpoint_id}"
        rf" -> {re.escape(host)}: 200 in \d+ ms \(delivered\)",
        lines[1])
    signatures = [r.headers["webhook-signature"] for r in receiver.wait_for(2)]
    for secret in [shop.secret, shop.keys["secretKey"], "buyer@example.com", "ORDER-XYZ",
                   "tok_pathsecret", "querysecret", "receiver-body-text", *signatures,
                   shop.secret.removeprefix("whsec_")]:
        assert secret not in caplog.text


@pytest.mark.parametrize("app_config", [{"PROCESS_TTL_SECONDS": 60}])  # verifiable timestamps
def test_sweep_expires_a_process_once_with_one_event(app, shop, receiver, worker, clock):
    process_id, _ = shop.preorder()
    clock.advance(59)
    worker.run_once()
    assert shop.api.get(process_id).get_json()["status"] == "pending"
    assert dbutil.query(app.config["DATABASE"], "SELECT id FROM events") == []
    clock.advance(1)
    worker.run_once()
    clock.advance(1)
    worker.run_once()

    event = only_event(app, process_id)  # the one event: swept once
    assert (event.attempts, len(receiver.requests)) == (1, 1)
    assert (event.type, event.status) == ("process.expired", "delivered")
    [got] = receiver.wait_for(1)
    body = Webhook(shop.secret).verify(got.body, got.headers)
    assert (body["type"], body["data"]["status"]) == ("process.expired", "expired")
    assert shop.api.get(process_id).get_json()["status"] == "expired"


def test_concurrent_sweeps_expire_each_process_once(app, shop, receiver, clock):
    process_ids = [shop.preorder()[0] for _ in range(40)]
    clock.advance(1800)
    workers = [Worker.from_app(app, concurrency=4, batch_size=7) for _ in range(2)]
    start = threading.Barrier(2)

    def run(w):
        start.wait()
        w.run(until_idle=True)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for w in workers:
        w.close()
    for process_id in process_ids:
        event = only_event(app, process_id)  # one event: expired by one sweep
        assert (event.type, event.status) == ("process.expired", "delivered")
    ids = [r.headers["webhook-id"] for r in receiver.wait_for(40)]
    assert sorted(ids) == sorted(only_event(app, p).id for p in process_ids)  # each exactly once


def test_old_idempotency_keys_are_purged(app, shop, worker, clock):
    shop.preorder(headers={"Idempotency-Key": "old"})
    clock.advance(24 * 3600)
    shop.preorder(headers={"Idempotency-Key": "young"})
    clock.advance(1)
    worker.run_once()
    keys = dbutil.query(app.config["DATABASE"], "SELECT key FROM idempotency_keys")
    assert keys == [("young",)]


def test_one_slow_endpoint_does_not_hold_back_the_others(app, make_shop, receiver, worker):
    slow_receiver = Receiver().start()
    try:
        slow_receiver.default = Reply(delay=60)
        slow = make_shop(webhook_url=slow_receiver.url())
        fast = make_shop(webhook_url=receiver.url())
        slow.cancelled()  # first in line
        fast_ids = [fast.cancelled()[0] for _ in range(6)]  # more than the 3 threads left
        with running(worker):
            slow_receiver.wait_for(1)
            receiver.wait_for(6)  # all of them while the slow one is still being answered
            wait_until(lambda: all(only_event(app, p).status == "delivered" for p in fast_ids),
                       "fast deliveries recorded")
            assert len(slow_receiver.requests) == 1
            slow_receiver.stop()  # cuts the slow reply: that attempt fails
    finally:
        slow_receiver.stop()
    assert len(receiver.requests) == 6


def test_claims_queued_behind_a_slow_attempt_are_given_back_and_not_claimed_again(
        app, make_shop, clock):
    # Its only thread held by a hanging endpoint, a worker gives back the events it claimed behind
    # that attempt once it has run POLL_MIN_SECONDS, so any worker can take them; no poll waits.
    slow_receiver = Receiver().start()
    try:
        slow_receiver.default = Reply(delay=60)
        slow = make_shop(webhook_url=slow_receiver.url())
        process_ids = [slow.cancelled()[0] for _ in range(3)]
        with Worker.from_app(app, concurrency=1, batch_size=2) as one:
            one.run_once(wait=False)
            slow_receiver.wait_for(1)
            clock.advance(POLL_MIN_SECONDS)
            one.run_once(wait=False)
            leased = [only_delivery(app, p).lease_owner for p in process_ids]
            assert leased == [one.owner, None, None]  # only the attempt in flight
            assert len(slow_receiver.requests) == 1
            slow_receiver.stop()  # the attempt fails (connection cut)
            one.drain()
            # The merchant is slow now: one attempt in flight for it at a time (per_endpoint 1).
            one.run_once()
    finally:
        slow_receiver.stop()
    assert [only_event(app, p).attempts for p in process_ids] == [1, 1, 0]


def test_a_merchant_known_to_be_slow_gets_at_most_per_endpoint_threads(app, make_shop, receiver,
                                                                        clock):
    slow_receiver = Receiver().start()
    try:
        slow_receiver.reply(Reply(delay=0.3))  # the first attempt: slow on the worker's clock
        slow_receiver.default = Reply(delay=60)  # then a hanging endpoint
        slow = make_shop(webhook_url=slow_receiver.url())
        fast = make_shop(webhook_url=receiver.url())
        with Worker.from_app(app, concurrency=4, batch_size=10) as worker:
            assert worker.per_endpoint == 2  # half the threads
            first, _ = slow.cancelled()
            worker.run_once(wait=False)
            slow_receiver.wait_for(1)
            clock.advance(POLL_MIN_SECONDS)  # while it is answered
            worker.drain()
            assert (only_event(app, first).attempts,
                    only_delivery(app, first).lease_owner) == (1, None)

            slow_ids = [slow.cancelled()[0] for _ in range(6)]
            fast_ids = [fast.cancelled()[0] for _ in range(3)]
            worker.run_once(wait=False)

            def fast_ones_recorded():  # a new endpoint: two at first, then all once proven fast
                worker.run_once(wait=False)
                return all(only_event(app, p).status == "delivered" for p in fast_ids)

            wait_until(fast_ones_recorded, "fast deliveries recorded")
            # The slow merchant got two threads (its cap), not four: the fast one got the others.
            slow_receiver.wait_for(3)
            leased = [only_delivery(app, p).lease_owner for p in slow_ids]
            assert leased.count(worker.owner) == 2
            assert len(slow_receiver.requests) == 3
            slow_receiver.stop()  # the two hanging attempts fail
    finally:
        slow_receiver.stop()


def test_a_merchant_whose_attempt_is_still_running_gets_at_most_per_endpoint_threads(
        app, make_shop, receiver, clock):
    slow_receiver = Receiver().start()
    try:
        slow_receiver.default = Reply(delay=60)  # a hanging endpoint, never slow before
        slow = make_shop(webhook_url=slow_receiver.url())
        fast = make_shop(webhook_url=receiver.url())
        with Worker.from_app(app, concurrency=4, batch_size=10) as worker:  # per merchant: 2
            slow.cancelled()
            worker.run_once(wait=False)
            slow_receiver.wait_for(1)
            clock.advance(POLL_MIN_SECONDS)  # unanswered for that long: a slow merchant
            slow_ids = [slow.cancelled()[0] for _ in range(5)]  # due before the fast ones
            fast_ids = [fast.cancelled()[0] for _ in range(2)]
            worker.run_once(wait=False)  # 3 free threads: 2 for the fast ones, 1 for the slow
            receiver.wait_for(2)
            slow_receiver.wait_for(2)
            assert [only_delivery(app, p).lease_owner for p in fast_ids] == [worker.owner] * 2
            assert [only_delivery(app, p).lease_owner for p in slow_ids].count(worker.owner) == 1
            assert len(slow_receiver.requests) == 2
            slow_receiver.stop()  # the hanging attempts fail
    finally:
        slow_receiver.stop()


def test_a_claim_without_enough_lease_left_is_released_unattempted(app, shop, receiver, clock):
    process_id, _ = shop.cancelled()
    written_at = clock.now
    clock.advance(55)  # e.g. a long sweep between reading the time and claiming
    with Worker.from_app(app) as late:  # lease 60 s, timeout 10 s + 1 s margin: 5 s left
        late.run_once(written_at, wait=False)
        assert only_delivery(app, process_id).lease_owner == late.owner  # claimed ...
        late.drain()  # ... and released
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.deliveries[0].lease_owner,
            event.deliveries[0].lease_expires_at) == ("pending", 0, None, None)
    assert receiver.requests == []


def test_stop_finishes_the_attempt_in_flight_and_claims_no_more(app, shop, receiver, clock):
    receiver.reply(Reply(delay=0.5))
    process_ids = [shop.cancelled()[0] for _ in range(5)]
    with Worker.from_app(app, concurrency=1, batch_size=5) as one:
        with running(one):
            receiver.wait_for(1)
            one.stop()
    events = [only_event(app, p) for p in process_ids]
    assert [e.status for e in events] == ["delivered"] + ["pending"] * 4
    assert all(e.deliveries[0].lease_owner is None and e.deliveries[0].lease_expires_at is None
               for e in events)
    assert all(e.attempts == 0 and e.next_attempt_at == clock.now for e in events[1:])
    assert len(receiver.requests) == 1


def test_a_live_lease_keeps_other_workers_off_until_it_expires(
        app, shop, receiver, worker, clock, leases_run_out):
    process_id, _ = shop.cancelled()
    db = app.extensions["db"]
    with db.transaction() as conn:
        [claimed] = event_rows.claim_due(conn, owner="crashed", now=clock.now,
                                         lease_seconds=2, limit=10)
    assert claimed.lease_owner == "crashed"
    clock.advance(1)
    worker.run_once()
    assert (only_delivery(app, process_id).lease_owner, receiver.requests) == ("crashed", [])
    leases_run_out(1)
    worker.run_once()
    assert only_event(app, process_id).status == "delivered"
    assert len(receiver.wait_for(1)) == 1


def test_a_worker_whose_lease_was_taken_over_cannot_clobber_the_new_state(
        app, shop, receiver, worker, clock, leases_run_out):
    process_id, _ = shop.cancelled()
    db = app.extensions["db"]
    with db.transaction() as conn:
        [stale] = event_rows.claim_due(conn, owner="slow", now=clock.now,
                                       lease_seconds=1, limit=10)
    leases_run_out(1)
    receiver.reply(Reply(status=500), Reply(status=500))
    worker.run_once()  # the new owner: attempt 1 failed, next in 5 s
    after_takeover = only_event(app, process_id)
    assert (after_takeover.attempts, after_takeover.next_attempt_at) == (1, clock.now + 5)

    # the old owner's late failure is kept as history but does not change the event
    assert attempt_and_record(app, stale, "slow", clock) == delivery.LEASE_LOST
    assert only_event(app, process_id) == after_takeover
    # a late 2xx is a delivery whoever holds the lease: at least once
    assert attempt_and_record(app, stale, "slow", clock) == delivery.DELIVERED
    assert only_event(app, process_id).status == "delivered"
    assert [a.status_code for a in attempts_of(app, stale.event_id)] == [500, 500, 200]


def record(app, sent, owner):
    """What the worker's poll does with the attempts that ended: write them in one transaction,
    then log them; returns their outcomes."""
    settings = delivery.Settings.from_config(app.config)
    with app.extensions["db"].transaction() as conn:
        notes = delivery.write_records(conn, sent, owner=owner, settings=settings)
    return delivery.log_records(sent, notes)


def sent_by(app, claimed, clock):
    """One attempt of each claimed delivery, as a worker's threads make them (writing nothing)."""
    conn = app.extensions["db"].connection()
    settings = delivery.Settings.from_config(app.config)
    with transport.new_session() as session:
        return [delivery.send(session, d, event_rows.get(conn, d.event_id),
                              endpoint_rows.get(conn, d.endpoint_id),
                              merchant_rows.get(conn, d.merchant_id).livemode, clock=clock,
                              settings=settings) for d in claimed]


def attempt_and_record(app, claimed, owner, clock):
    """One attempt of the `claimed` delivery as a worker holding it as `owner` makes and records
    it."""
    [sent] = sent_by(app, [claimed], clock)
    [outcome] = record(app, [sent], owner)
    return outcome


def test_attempts_are_sent_without_writing_then_recorded_together_each_on_its_own(
        app, shop, receiver, clock):
    process_ids = [shop.cancelled()[0] for _ in range(3)]
    db = app.extensions["db"]
    with db.transaction() as conn:
        claimed = event_rows.claim_due(conn, owner="w", now=clock.now, lease_seconds=60,
                                       limit=10)
    sent = sent_by(app, claimed, clock)
    assert len(receiver.wait_for(3)) == 3
    # sending wrote nothing: each delivery is still leased, unattempted
    assert [(d.status, d.attempts, d.lease_owner)
            for d in map(only_delivery, [app] * 3, process_ids)] == [("pending", 0, "w")] * 3
    # the middle one's attempt row cannot be written (no such event: the foreign key refuses it)
    ghost = replace(sent[1], event=replace(sent[1].event, id="evt_" + "0" * 32))

    outcomes = record(app, [sent[0], ghost, sent[2]], "w")

    assert outcomes == [delivery.DELIVERED, delivery.NOT_RECORDED, delivery.DELIVERED]
    assert [only_event(app, p).status for p in process_ids] == ["delivered", "pending", "delivered"]
    assert [len(attempts_of(app, d.event_id)) for d in claimed] == [1, 0, 1]


@pytest.mark.sqlite_only  # another program holding SQLite's one write lock
@pytest.mark.parametrize("app_config", [{"SQLITE_BUSY_TIMEOUT_MS": 100}])
def test_attempts_whose_poll_could_not_write_are_recorded_by_the_next(app, shop, receiver, clock):
    process_id, _ = shop.cancelled()
    with Worker.from_app(app) as worker:
        worker.run_once(wait=False)
        assert only_delivery(app, process_id).lease_owner == worker.owner
        other = sqlite3.connect(app.config["DATABASE"], isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another program holds the write lock past the timeout
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                worker.drain()  # the attempt ends (200) but cannot be recorded
            assert len(receiver.requests) == 1
            assert only_event(app, process_id).status == "pending"
        finally:
            other.execute("ROLLBACK")
            other.close()
        worker.run_once(wait=False)  # records it
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.deliveries[0].lease_owner) == ("delivered", 1, None)
    assert [a.status_code for a in attempts_of(app, event.id)] == [200]
    assert len(receiver.requests) == 1


@pytest.mark.sqlite_only  # another program holding SQLite's one write lock
@pytest.mark.parametrize("app_config", [{"SQLITE_BUSY_TIMEOUT_MS": 100}])
def test_a_poll_that_fails_is_logged_and_the_running_worker_goes_on(
        app, shop, receiver, worker, caplog):
    process_id, _ = shop.cancelled()
    other = sqlite3.connect(app.config["DATABASE"], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # no poll can write: each fails after 100 ms
    try:
        with running(worker) as thread:
            wait_until(lambda: "webhook worker iteration failed" in caplog.text, "a failed poll")
            assert thread.is_alive() and receiver.requests == []
            other.execute("ROLLBACK")
            wait_until(lambda: only_event(app, process_id).status == "delivered", "delivered")
    finally:
        other.close()
    assert len(receiver.requests) == 1


def test_events_are_attempted_oldest_due_first(app, shop, receiver, clock):
    process_ids = [shop.cancelled()[0] for _ in range(4)]
    with Worker.from_app(app, concurrency=1, batch_size=2) as one:
        one.run(until_idle=True)
    ids = [r.headers["webhook-id"] for r in receiver.wait_for(4)]
    assert ids == [only_event(app, p).id for p in process_ids]
    assert [body_json(r)["data"]["processId"] for r in receiver.requests] == process_ids


@pytest.mark.parametrize("app_config", [{"WEBHOOK_RETRY_SCHEDULE": "0"}])
def test_a_damaged_secret_is_a_failed_attempt_not_a_crash(app, shop, receiver, worker):
    process_id, _ = shop.cancelled()
    with app.extensions["db"].transaction() as conn:  # e.g. a bad manual edit of the database
        conn.execute("UPDATE webhook_endpoints SET secret = 'whsec_***' WHERE merchant_id = ?",
                     (shop.id,))
    worker.run_once()
    event = only_event(app, process_id)
    assert (event.status, event.attempts, event.last_error) == (
        "failed", 1, "cannot sign: webhook secret is not valid base64")
    assert receiver.requests == []


def test_an_event_due_while_a_slow_attempt_is_in_flight_is_not_held_back(
        app, make_shop, receiver, worker):
    slow_receiver = Receiver().start()
    try:
        slow_receiver.default = Reply(delay=60)  # answered only when that receiver stops
        slow = make_shop(webhook_url=slow_receiver.url())
        fast = make_shop(webhook_url=receiver.url())
        slow_id, _ = slow.cancelled()
        with running(worker):
            slow_receiver.wait_for(1)  # the slow attempt is in flight...
            fast_id, _ = fast.cancelled()  # ...when the fast merchant's event is written
            receiver.wait_for(1)
            wait_until(lambda: only_event(app, fast_id).status == "delivered", "fast recorded")
            # delivered and recorded while the slow attempt is still unanswered and unrecorded
            slow_event = only_event(app, slow_id)
            assert (slow_event.status, slow_event.attempts,
                    slow_event.deliveries[0].lease_owner) == ("pending", 0, worker.owner)
            assert attempts_of(app, slow_event.id) == []
            assert len(slow_receiver.requests) == 1
            slow_receiver.stop()  # cuts the slow reply: that attempt fails and is recorded
            wait_until(lambda: only_event(app, slow_id).attempts == 1, "slow attempt recorded")
    finally:
        slow_receiver.stop()
    [fast_attempt] = attempts_of(app, only_event(app, fast_id).id)
    [slow_attempt] = attempts_of(app, slow_event.id)
    assert fast_attempt.id < slow_attempt.id  # recorded in that order
    assert (fast_attempt.status_code, slow_attempt.status_code) == (200, None)
    assert only_delivery(app, slow_id).lease_owner is None


def test_a_rotated_webhook_secret_signs_the_next_attempt(app, shop, receiver, worker, clock,
                                                         runner):
    receiver.reply(Reply(status=500))
    shop.cancelled()
    worker.run_once()
    result = runner.invoke(args=["merchants", "rotate-webhook-secret", shop.id,
                                 "--overlap-hours", "0"])
    new_secret = result.output.split("(shown once): ")[1].split()[0]
    clock.advance(5)
    worker.run_once()
    first, retry = receiver.wait_for(2)
    Webhook(shop.secret).verify(first.body, first.headers)
    Webhook(new_secret).verify(retry.body, retry.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(shop.secret).verify(retry.body, retry.headers)


@pytest.mark.parametrize("app_config", [
    {"WEBHOOK_TIMEOUT_SECONDS": 0.3, "WEBHOOK_LEASE_SECONDS": 3}])
def test_a_lease_is_counted_on_a_clock_that_is_never_set_back(app, make_shop, receiver, clock):
    """The wall clock stands still (as one set back does) while 16 merchants' claims queue
    behind two threads, each attempt taking the whole 0.3 s timeout: those that would start too
    late for the lease (3 s from the claim, by a clock that always runs) are released
    unattempted, so no attempt outlives its lease however the wall clock moves."""
    receiver.reply(*[Reply(delay=5)] * 16)
    process_ids = [make_shop(webhook_url=receiver.url("/hooks")).cancelled()[0] for _ in range(16)]
    with Worker.from_app(app, concurrency=2, batch_size=16) as two:
        two.run_once()
    events = [only_event(app, p) for p in process_ids]
    attempted = [e for e in events if e.attempts]
    assert 2 <= len(attempted) <= 12, len(attempted)  # 2 a wave, 0.3 s apart, within 1.7 s
    assert len(receiver.requests) == len(attempted)
    assert all((e.status, e.attempts, e.deliveries[0].lease_owner) == ("pending", 0, None)
               for e in events if not e.attempts)
