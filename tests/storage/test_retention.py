"""Retention over a year of history: `prune` and the delivery worker remove events older than
RETENTION_DAYS none of whose deliveries is pending, with their deliveries and attempts, and
expired Idempotency-Key records; never a pending delivery, never a process; /metrics' delivery
totals do not go down."""

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support import dbutil

from app.core.records import Attempt, Delivery, Endpoint, Event, Process
from app.data import endpoints as endpoint_rows
from app.data import idempotency as idempotency_rows
from app.data import outbox as event_rows
from app.data import processes as process_rows
from app.db import is_postgres_url
from app.domain import ops
from app.worker import Worker

DAY = 86_400
DAYS = 365
PER_DAY = {"delivered": 20, "failed": 5, "no_endpoint": 5}  # no_endpoint: no delivery at all
ATTEMPTS = {"delivered": 1, "failed": 8, "no_endpoint": 0}
ENDPOINT = "we_" + "e" * 24
PENDING_EVERY = 7  # one pending event (a retry scheduled) every 7th day, of any age


def load_year(app, merchant_id, now):
    """A year of history through the data layer, one transaction: every day at now - d days - 1 h,
    30 final events (each on its own process) with their attempts and an Idempotency-Key record;
    every 7th day a pending event too. Returns the pending events' ids."""
    processes, events, deliveries, attempts, pending = [], [], [], [], []
    for day in range(DAYS):
        created = now - day * DAY - 3600
        kinds = [s for s, n in PER_DAY.items() for _ in range(n)]
        if day % PENDING_EVERY == 0:
            kinds.append("pending")
        for i, status in enumerate(kinds):
            pid = f"00000000-0000-4000-8000-{day:06d}{i:06d}"
            processes.append(Process(None, pid, merchant_id, "completed", "1.00", "{}", False,
                                     created, created, created + 1800))
            eid = f"evt_{day:06d}{i:026d}"
            events.append(Event(None, eid, merchant_id, pid, "payment.completed", "{}", created))
            if status != "no_endpoint":
                deliveries.append(Delivery(
                    None, eid, ENDPOINT, merchant_id, status, ATTEMPTS.get(status, 1),
                    now + DAY if status == "pending" else None, None, None, None,
                    created + 1 if status == "delivered" else None))
            attempts += [Attempt(None, eid, created + n, "http://shop.test/hook",
                                 200 if status == "delivered" else 500,
                                 None if status == "delivered" else "HTTP 500", 12, ENDPOINT)
                         for n in range(ATTEMPTS.get(status, 1))]
            if status == "pending":
                pending.append(eid)
    db = app.extensions["db"]
    with db.transaction() as conn:
        process_rows.insert_many(conn, processes)
        endpoint_rows.insert(conn, Endpoint(None, ENDPOINT, merchant_id, "http://shop.test/hook",
                                            ("*",), True, None, "whsec_" + "A" * 43 + "=", None,
                                            None, now - DAYS * DAY))
        event_rows.insert_many(conn, events, attempts, deliveries)
        event_rows.count_final(conn, {status: sum(d.status == status for d in deliveries)
                                      for status in ("delivered", "failed")})  # as the worker does
        for day in range(DAYS):
            created = now - day * DAY - 3600
            idempotency_rows.save(conn, merchant_id, f"key-{day}", "h", processes[day * 30].id,
                                  "{}", created)
    return pending


def counts(app):
    conn = dbutil.open_connection(app.config["DATABASE"])
    try:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("processes", "events", "delivery_attempts", "idempotency_keys")}
    finally:
        conn.close()


def deliveries_total(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        if family.name == "preorder_webhook_deliveries":
            return {s.labels["outcome"]: s.value for s in family.samples}
    raise AssertionError("no preorder_webhook_deliveries")


@pytest.fixture
def year(app, merchant, clock):
    return load_year(app, merchant["merchantId"], clock())


def test_prune_removes_only_old_final_events_and_expired_keys(app, runner, client, clock, year):
    before = counts(app)
    final_per_day = sum(PER_DAY.values())
    assert before == {"processes": DAYS * final_per_day + len(year),
                      "events": DAYS * final_per_day + len(year),
                      "delivery_attempts": DAYS * 60 + len(year),  # 20 x 1 + 5 x 8 a day
                      "idempotency_keys": DAYS}
    totals = deliveries_total(client)
    assert totals == {"delivered": DAYS * 20, "failed": DAYS * 5, "cancelled": 0}

    result = runner.invoke(args=["prune"])
    assert result.exit_code == 0, result.output
    old_days = DAYS - 90  # created 90 days + 1 h ago or more: days 90..364
    assert result.output == (f"Pruned {old_days * final_per_day} events older than 90 days,"
                             f" {old_days * 60} delivery attempts, {DAYS - 1} expired"
                             " idempotency keys.\n")
    after = counts(app)
    assert after["processes"] == before["processes"]  # never a process
    assert after["events"] == before["events"] - old_days * final_per_day
    assert after["delivery_attempts"] == before["delivery_attempts"] - old_days * 60
    assert after["idempotency_keys"] == 1  # the one younger than IDEMPOTENCY_TTL_SECONDS
    conn = dbutil.open_connection(app.config["DATABASE"])
    try:
        # Every pending event is still there, however old (the oldest is 364 days).
        kept = {row[0] for row in conn.execute(
            "SELECT event_id FROM deliveries WHERE status = 'pending'")}
        assert kept == set(year) and len(year) == 53
        # Nothing final older than 90 days is left; nothing younger was touched; no orphan attempt.
        cutoff = clock() - 90 * DAY
        final = ("NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id"
                 " AND d.status = 'pending')")
        assert conn.execute(f"SELECT count(*) FROM events WHERE {final} AND created_at < ?",
                            (cutoff,)).fetchone()[0] == 0
        assert conn.execute(f"SELECT count(*) FROM events WHERE {final}").fetchone()[0] \
            == 90 * final_per_day
        assert conn.execute("SELECT count(*) FROM deliveries WHERE event_id NOT IN"
                            " (SELECT id FROM events)").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM delivery_attempts WHERE event_id NOT IN"
                            " (SELECT id FROM events)").fetchone()[0] == 0
        if not is_postgres_url(app.config["DATABASE"]):  # PostgreSQL enforces them at once
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()
    # The delivery totals count pruned events too: they do not go down.
    assert deliveries_total(client) == totals

    again = runner.invoke(args=["prune"])
    assert again.output == ("Pruned 0 events older than 90 days, 0 delivery attempts,"
                            " 0 expired idempotency keys.\n")
    shorter = runner.invoke(args=["prune", "--older-than", "30"])
    assert shorter.output == (f"Pruned {60 * final_per_day} events older than 30 days,"
                              f" {60 * 60} delivery attempts, 0 expired idempotency keys.\n")
    assert deliveries_total(client) == totals


def test_prune_options(runner, app):
    result = runner.invoke(args=["prune", "--older-than", "0"])
    assert result.exit_code == 2 and "--older-than" in result.output
    app.config["RETENTION_DAYS"] = 0
    result = runner.invoke(args=["prune"])
    assert result.exit_code == 1
    assert "RETENTION_DAYS is 0 (keep for ever): give --older-than DAYS." in result.output


def test_prune_in_bounded_batches(app, clock, year):
    """Each transaction looks at `batch_size` events, oldest first; pending ones are stepped
    over."""
    db = app.extensions["db"]
    first = ops.prune(db, clock(), older_than_days=90, idempotency_ttl=DAY,
                             batch_size=1000, max_batches=3)
    assert (first.events, first.more) == (finals_among_oldest(3000), True)
    assert finals_among_oldest(3000) == 3000 - 15  # days 364, 357, ..., 266 have a pending one
    rest = ops.prune(db, clock(), older_than_days=90, idempotency_ttl=DAY, batch_size=1000)
    assert (rest.events, rest.idempotency_keys, rest.more) == (
        (DAYS - 90) * 30 - first.events, DAYS - 1, False)


@pytest.mark.parametrize("app_config", [{"RETENTION_DAYS": 90}])
def test_the_worker_prunes_about_hourly(app, clock, year, merchant):
    final_per_day = sum(PER_DAY.values())
    total = DAYS * final_per_day + len(year)
    with Worker.from_app(app) as worker:
        # At most 25 transactions of 200 events a time: the 5,000 oldest looked at first ...
        worker.run_once()
        assert counts(app)["events"] == total - finals_among_oldest(5000)
        clock.advance(59)
        worker.run_once()
        assert counts(app)["events"] == total - finals_among_oldest(5000)
        # ... and, rows being left, the rest at the next purge a minute later, not in an hour.
        clock.advance(1)
        worker.run_once()
        assert counts(app)["events"] == 90 * final_per_day + len(year)
        # One more old delivered event: not pruned within the hour, pruned at the first purge
        # (at most once a minute) after it.
        with app.extensions["db"].transaction() as conn:
            event_rows.insert_many(
                conn, [Event(None, "evt_late", merchant["merchantId"], year and _pid(conn, year[0]),
                             "payment.completed", "{}", clock() - 200 * DAY)],
                deliveries=[Delivery(None, "evt_late", ENDPOINT, merchant["merchantId"],
                                     "delivered", 1, None, None, None, None,
                                     clock() - 200 * DAY)])
        clock.advance(3599)
        worker.run_once()
        assert counts(app)["events"] == 90 * final_per_day + len(year) + 1
        clock.advance(60)
        worker.run_once()
        assert counts(app)["events"] == 90 * final_per_day + len(year)


def finals_among_oldest(count):
    """How many of the `count` oldest events are final: 30 a day from day 364 down, and a pending
    one after them every 7th day."""
    oldest = [status for day in range(DAYS - 1, -1, -1)
              for status in ["final"] * 30 + (["pending"] if day % PENDING_EVERY == 0 else [])]
    return oldest[:count].count("final")


def _pid(conn, event_id):
    return conn.execute("SELECT process_id FROM events WHERE id = ?", (event_id,)).fetchone()[0]
