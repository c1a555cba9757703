"""Upgrading a database of the release before several webhook endpoints (schema version 21), with
events in every state: each merchant's URL and secret become its first endpoint, subscribed to
every event; its pending events are delivered once, to it, signed as before; delivered and failed
events stay as they were; the single-URL commands act on that endpoint. Both backends."""
import re
import time

from standardwebhooks.webhooks import Webhook
from support import dbutil
from support.helpers import FakeClock

from app import create_app
from app.db import init_db
from app.domain import outbox
from app.webhooks.signing import new_secret
from app.worker import Worker

SHOP, QUIET, GONE = "mer_" + "a" * 24, "mer_" + "b" * 24, "mer_" + "c" * 24


def _release_21(database, receiver, now):
    """The schema of versions 1 to 21 and rows as that release wrote them. (secret, rolled)."""
    secret, rolled = new_secret(), new_secret()
    conn = dbutil.open_connection(database)
    try:
        dbutil.schema_up_to(conn, database, 21)
        # SHOP: a URL and a secret rolled an hour ago, the old one signing for a day more; QUIET:
        # never had a URL; GONE: its URL removed after an event was delivered to it.
        for merchant, url, key, previous, until in (
                (SHOP, receiver.url("/hook"), secret, rolled, now + 86_400),
                (QUIET, None, new_secret(), None, None), (GONE, None, new_secret(), None, None)):
            conn.execute("INSERT INTO merchants (id, name, livemode, public_key, webhook_secret,"
                         " webhook_url, previous_webhook_secret, previous_webhook_secret_until,"
                         " created_at) VALUES (?, 'Shop', 0, ?, ?, ?, ?, ?, ?)",
                         (merchant, "pk_test_" + merchant[-8:], key, url, previous, until,
                          now - 10))
        events = [  # (id, merchant, status, attempts, next attempt, last error, delivered at)
            ("evt_due", SHOP, "pending", 0, now, None, None),
            ("evt_retrying", SHOP, "pending", 2, now + 300, "HTTP 500", None),
            ("evt_delivered", SHOP, "delivered", 1, None, None, now - 5),
            ("evt_failed", SHOP, "failed", 8, None, "HTTP 410", None),
            ("evt_nowhere", QUIET, "no_endpoint", 0, None, "merchant has no webhook URL", None),
            ("evt_quiet_pending", QUIET, "pending", 0, now, None, None),
            ("evt_gone", GONE, "delivered", 1, None, None, now - 5),
        ]
        for n, (event_id, merchant, status, attempts, next_at, error, delivered) in enumerate(
                events):
            process = f"00000000-0000-4000-8000-{n:012d}"
            conn.execute("INSERT INTO processes (id, merchant_id, status, amount, metadata,"
                         " livemode, created_at, updated_at, expires_at, currency)"
                         " VALUES (?, ?, 'cancelled', '5', '{}', 0, ?, ?, ?, 'USD')",
                         (process, merchant, now - 10, now - 10, now + 1800))
            conn.execute("INSERT INTO events (id, merchant_id, process_id, type, payload,"
                         " created_at, status, attempts, next_attempt_at, last_error, delivered_at)"
                         " VALUES (?, ?, ?, 'process.cancelled', ?, ?, ?, ?, ?, ?, ?)",
                         (event_id, merchant, process,
                          f'{{"type":"process.cancelled","id":"{event_id}"}}',
                          now - 10, status, attempts, next_at, error, delivered))
            for a in range(attempts):
                url = "https://old.example/gone" if merchant == GONE else receiver.url("/hook")
                conn.execute("INSERT INTO delivery_attempts (event_id, attempted_at, url,"
                             " status_code, error, duration_ms) VALUES (?, ?, ?, ?, ?, 5)",
                             (event_id, now - 9 + a, url, 200 if status == "delivered" else 500,
                              None if status == "delivered" else "HTTP 500"))
    finally:
        conn.close()
    return secret, rolled


def test_the_first_endpoint_takes_each_merchants_url_secret_and_pending_events(
        make_database, receiver):
    clock = FakeClock(int(time.time()))  # standardwebhooks checks timestamps against real time
    database = make_database("release-21")
    secret, rolled = _release_21(database, receiver, clock())

    app = create_app({"TESTING": True, "DATABASE": database, "CLOCK": clock})
    try:
        with app.app_context():
            assert init_db()[0] == 21
        endpoint = "we_" + "a" * 24
        assert dbutil.query(database, "SELECT id, merchant_id, url, events, enabled, secret,"
                            " previous_secret FROM webhook_endpoints ORDER BY seq") == [
            (endpoint, SHOP, receiver.url("/hook"), "*", 1, secret, rolled),
            ("we_" + "c" * 24, GONE, "https://old.example/gone", "*", 0,
             dbutil.scalar(database, "SELECT webhook_secret FROM merchants WHERE id = ?", GONE),
             None)]
        deliveries = dbutil.query(database, "SELECT event_id, endpoint_id, status, attempts,"
                                  " last_error FROM deliveries ORDER BY seq")
        assert deliveries == [
            ("evt_due", endpoint, "pending", 0, None),
            ("evt_retrying", endpoint, "pending", 2, "HTTP 500"),
            ("evt_delivered", endpoint, "delivered", 1, None),
            ("evt_failed", endpoint, "failed", 8, "HTTP 410"),
            ("evt_gone", "we_" + "c" * 24, "delivered", 1, None)]  # QUIET's: to no endpoint
        assert dbutil.query(database, "SELECT DISTINCT endpoint_id FROM delivery_attempts"
                            " ORDER BY 1") == [(endpoint,), ("we_" + "c" * 24,)]
        db = app.extensions["db"]
        assert outbox.get_with_attempts(db, "evt_nowhere")[0].status == "no_endpoint"

        # The pending ones are delivered once, to the first endpoint, signed with both secrets
        # while the roll's overlap lasts; the delivered and failed ones are not sent again.
        with Worker.from_app(app) as worker:
            worker.run_once()
            [due] = receiver.wait_for(1)
            assert due.headers["webhook-id"] == "evt_due"
            for key in (secret, rolled):
                Webhook(key).verify(due.body, due.headers)
            clock.advance(300)
            worker.run_once()
            assert [r.headers["webhook-id"] for r in receiver.wait_for(2)] == ["evt_due",
                                                                               "evt_retrying"]
            clock.advance(3600)
            worker.run_once()
        assert len(receiver.requests) == 2
        assert dbutil.query(database, "SELECT status, count(*) FROM deliveries GROUP BY status"
                            " ORDER BY 1") == [("delivered", 4), ("failed", 1)]

        # The single-URL commands act on that endpoint.
        runner = app.test_cli_runner()
        moved = runner.invoke(args=["merchants", "set-webhook", SHOP, receiver.url("/moved")])
        assert moved.output == (f"Webhook URL of {SHOP} set to {receiver.url('/moved')}"
                                f" (endpoint {endpoint}).\n")
        rotated = runner.invoke(args=["merchants", "rotate-webhook-secret", SHOP,
                                      "--overlap-hours", "0"]).output
        new = re.search(r"whsec_\S+", rotated)[0]
        assert dbutil.query(database, "SELECT url, secret FROM webhook_endpoints WHERE id = ?",
                            endpoint) == [(receiver.url("/moved"), new)]
    finally:
        app.extensions["db"].close_all()
