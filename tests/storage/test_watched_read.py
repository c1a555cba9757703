"""The chain watcher's full read of what it watches (app/data/transfers.py watched_addresses), on
the backend under test: it returns exactly what the plain OR query over every process returns, and
its plan reads processes through indexes only (no scan of processes, payments or payment_choices),
so its cost follows what is watched, not the number of processes (bench/scale.py measures it at a
million)."""
import random

import pytest

from app.data import transfers
from app.data.schema import dialect

OLD = 10_000  # final long ago: never watched
NOW = 2_000_000_000
SINCE = NOW - 86_400

REFERENCE = (  # the same read as one OR over every process
    "SELECT p.process_id, p.address, p.network_id, p.token_contract, pr.expires_at"
    " FROM payments p JOIN processes pr ON pr.id = p.process_id"
    " WHERE (pr.status = 'pending' OR pr.updated_at >= ?) AND pr.livemode = ?"
    " UNION ALL SELECT p.process_id, p.address, c.network_id, c.token_contract, pr.expires_at"
    " FROM payment_choices c JOIN payments p ON p.process_id = c.process_id"
    " JOIN processes pr ON pr.id = c.process_id"
    " WHERE (pr.status = 'pending' OR pr.updated_at >= ?) AND pr.livemode = ?")


@pytest.fixture
def loaded(app, make_merchant):
    """OLD final processes of long ago and 200 of every kind around SINCE, in both modes, each with
    a payment, a tenth with an earlier choice."""
    merchant = make_merchant()["merchantId"]
    rnd = random.Random(7)
    db = app.extensions["db"]
    rows = []
    for i in range(OLD + 200):
        old = i < OLD
        status = rnd.choice(("completed", "expired", "cancelled")) if old else rnd.choice(
            ("pending", "completed", "expired", "cancelled"))
        updated = rnd.randrange(NOW - 400 * 86_400, SINCE - 1) if old else rnd.randrange(
            SINCE - 3_600, NOW)
        rows.append((f"p{i:07d}", status, int(not old and i % 2), updated))
    with db.transaction() as conn:
        for network, chain_id in (("one", 1), ("two", 2)):
            conn.execute("INSERT INTO networks (id, name, chain_id, rpc_url, confirmations,"
                         " start_block, scanned_block, head_block, created_at)"
                         " VALUES (?, ?, ?, 'http://127.0.0.1:1', 1, 1, 1, 1, 0)",
                         (network, network, chain_id))
        conn.executemany(
            "INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode,"
            " created_at, updated_at, expires_at) VALUES (?, ?, ?, '1', '{}', ?, ?, ?, ?)",
            [(pid, merchant, status, live, updated - 60, updated, updated + 900)
             for pid, status, live, updated in rows])
        conn.executemany(
            "INSERT INTO payments (process_id, merchant_id, address_index, address, asset_id,"
            " network_id, chain_id, token_contract, decimals, amount_due, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, 'usdc', 'one', 1, '0xT1', 6, '1', ?, ?)",
            [(pid, merchant, n, f"0x{n:040x}", updated - 60, updated - 60)
             for n, (pid, _, _, updated) in enumerate(rows)])
        conn.executemany(
            "INSERT INTO payment_choices (process_id, network_id, token_contract, decimals,"
            " created_at) VALUES (?, 'two', '0xT2', 6, ?)",
            [(pid, updated - 70) for n, (pid, _, _, updated) in enumerate(rows) if n % 10 == 3])
        conn.execute("ANALYZE")
    return db


@pytest.mark.parametrize("livemode", [False, True])
def test_the_watched_read_returns_what_the_or_over_every_process_returns(loaded, livemode):
    conn = loaded.connection()
    found = sorted(tuple(r) for r in conn.execute(*transfers.watched_query(conn, SINCE, livemode)))
    expected = sorted(tuple(r) for r in conn.execute(
        REFERENCE, (SINCE, int(livemode), SINCE, int(livemode))))
    assert found == expected
    assert 50 < len(found) < 200  # pending and recent ones of the mode, with their earlier choices
    assert {w.process_id for w in transfers.watched_addresses(conn, SINCE, livemode)} == {
        r[0] for r in found}


def test_the_watched_read_scans_no_table(loaded):
    conn = loaded.connection()
    sql, params = transfers.watched_query(conn, SINCE, True)
    if dialect(conn) == "postgresql":
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
        assert "Seq Scan" not in plan, plan
        assert "processes_final_updated" in plan and "processes_status_expiry" in plan, plan
    else:
        steps = [r["detail"] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
        tables = [s for s in steps if s.startswith(("SCAN", "SEARCH")) and " w" not in s]
        assert tables and all(s.startswith("SEARCH") for s in tables), steps
        assert any("processes_final_updated" in s for s in steps), steps
