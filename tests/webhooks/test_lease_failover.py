"""Delivery leases on PostgreSQL are counted by the database server's clock: workers whose hosts'
clocks disagree still never attempt one delivery at once, and take over a dead worker's claims
when its lease ends by the server's clock, not 30 s early or late."""
import time

import pytest
from support.helpers import FakeClock, only_delivery, only_event

from app.data import outbox as event_rows
from app.worker import Worker

pytestmark = pytest.mark.postgres_only

LEASE = 3  # the least WEBHOOK_LEASE_SECONDS a 1 s timeout allows


@pytest.fixture
def clock():
    """The API's host: a minute behind the real time, so what it writes is due for every worker
    below (whether a delivery is due is each worker's own clock: a schedule, not a lease)."""
    return FakeClock(int(time.time()) - 60)


@pytest.fixture
def app_config():
    return {"WEBHOOK_LEASE_SECONDS": LEASE, "WEBHOOK_TIMEOUT_SECONDS": 1}


def server_now(db) -> float:
    return float(db.connection().execute(
        "SELECT EXTRACT(EPOCH FROM clock_timestamp())").fetchone()[0])


def worker_with_clock(app, skew):
    """A worker on a host whose clock is `skew` seconds off the real time."""
    return Worker(app.extensions["db"], {**app.config, "CLOCK": lambda: time.time() + skew},
                  concurrency=2)


@pytest.mark.parametrize("skew", [30, -30])
def test_a_worker_whose_clock_is_off_neither_steals_a_live_lease_nor_waits_out_a_dead_one(
        app, shop, receiver, skew):
    process_id, _ = shop.cancelled()
    db = app.extensions["db"]
    with db.transaction() as conn:  # a worker (presumed to die now) holds it for LEASE seconds
        [held] = event_rows.claim_due(conn, owner="dead", now=int(time.time()), lease_seconds=LEASE,
                                      limit=1)
    with worker_with_clock(app, skew) as skewed:
        skewed.run_once()  # 30 s ahead, its own clock says that lease ran out long ago: still live
        assert (only_delivery(app, process_id).lease_owner, receiver.requests) == ("dead", [])
        time.sleep(max(0.0, held.lease_expires_at - server_now(db)) + 0.05)
        skewed.run_once()  # 30 s behind, its own clock says the lease has 30 s left: it ran out
    assert only_event(app, process_id).status == "delivered"
    assert len(receiver.wait_for(1)) == 1


@pytest.mark.parametrize("skew", [30, -30])
def test_a_worker_whose_clock_is_off_takes_a_lease_by_the_servers_clock(app, shop, receiver, skew):
    process_id, _ = shop.cancelled()
    db = app.extensions["db"]
    with worker_with_clock(app, skew) as skewed, worker_with_clock(app, 0) as honest:
        before = server_now(db)
        skewed.run_once(wait=False)
        lease = only_delivery(app, process_id)
        assert lease.lease_owner == skewed.owner
        assert before + LEASE <= lease.lease_expires_at <= server_now(db) + LEASE + 1
        honest.run_once()  # a worker with the right time leaves the skewed one's lease alone
        skewed.drain()
    assert only_event(app, process_id).status == "delivered"
    assert len(receiver.wait_for(1)) == 1
