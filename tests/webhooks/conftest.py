"""Fixtures of the webhook tests."""
import time

import pytest


@pytest.fixture
def leases_run_out(app, clock):
    """leases_run_out(seconds): time passes until the delivery leases taken so far have run out by
    the lease clock. On SQLite that is the app's clock, moved `seconds` on. On PostgreSQL it is the
    server's (app/data/outbox.py), which no test clock moves: the app's clock moves as well and
    the test waits for the real expiry, so tests that use it there take short leases."""
    def run_out(seconds):
        clock.advance(seconds)
        db = app.extensions["db"]
        if db.dialect != "postgresql":
            return
        left = db.connection().execute(
            "SELECT max(lease_expires_at) - EXTRACT(EPOCH FROM clock_timestamp())"
            " FROM deliveries").fetchone()[0]
        if left is not None and left > 0:
            time.sleep(float(left) + 0.05)

    return run_out
