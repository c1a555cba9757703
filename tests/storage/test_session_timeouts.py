"""PostgreSQL sessions bound what a hung or unreachable process can hold (app/db/postgres.py,
SESSION_SETTINGS): a request that waits for a lock past lock_timeout answers 503 service_unavailable
with Retry-After, never a 500; a transaction left idle is ended by the server."""
import time

import psycopg
import pytest

from app.db.interface import HUNG_SESSION_SECONDS
from app.db.postgres import KEEPALIVES, SESSION_SETTINGS

pytestmark = pytest.mark.postgres_only


def test_every_session_bounds_lock_waits_idle_transactions_and_dead_peers(app):
    conn = app.extensions["db"].connection()
    shown = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in SESSION_SETTINGS}
    assert shown == {"lock_timeout": "5s", "idle_in_transaction_session_timeout": "10s",
                     "tcp_keepalives_idle": "4", "tcp_keepalives_interval": "2",
                     "tcp_keepalives_count": "3", "tcp_user_timeout": "10000",  # ms
                     "jit": "off"}
    info = conn.raw.info.get_parameters()  # the client's side, as libpq was given it
    assert {k: info.get(k) for k in KEEPALIVES} == {k: str(v) for k, v in KEEPALIVES.items()}
    assert 4 + 3 * 2 <= HUNG_SESSION_SECONDS


def test_a_request_that_waits_past_lock_timeout_answers_503_json(app, api, merchant):
    """A hung process holds what a preorder needs (here: the idempotency key's lock)."""
    key = "order-42"
    with psycopg.connect(app.config["DATABASE"]) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended(CAST(%s AS text) || '/'"
                       " || CAST(%s AS text), 0))", (merchant["merchantId"], key))
        started = time.monotonic()
        response = api.preorder(headers={"Idempotency-Key": key})
        waited = time.monotonic() - started
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Retry-After"] == "5"
    body = response.get_json()
    assert body["code"] == "service_unavailable" and body["message"]
    assert 5 <= waited < 5 + 2, waited
    assert api.preorder(headers={"Idempotency-Key": key}).status_code == 200  # the lock is gone


def test_a_transaction_left_idle_is_ended_and_its_locks_freed(app):
    db = app.extensions["db"]
    pool = db.pool()
    raw = pool.getconn()
    try:
        raw.execute("BEGIN")
        raw.execute("SELECT 1 FROM merchants FOR UPDATE")
        raw.execute("LOCK TABLE networks IN EXCLUSIVE MODE")  # what a hung process may hold
        time.sleep(HUNG_SESSION_SECONDS + 1)
        with pytest.raises(psycopg.Error) as failed:
            raw.execute("SELECT 1")
        assert db.is_unavailable(failed.value), repr(failed.value)  # a 503 for a request
    finally:
        pool.putconn(raw)
    with db.transaction() as conn:  # nothing left locked
        conn.execute("UPDATE networks SET polled_at = polled_at")
