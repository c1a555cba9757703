"""The chain watcher's full read of what it watches (app/data/transfers.py watched_addresses: the
rows of watch_list), on the backend under test: the upgrade's fill and the chores' prune leave in
it every address of a process pending or final within the monitoring window, with each choice,
exactly what one OR over every process returns, plus at most those of processes final before the
window that expire after its start (pruned later); a read costs one narrow table's rows
(bench/scale.py measures it at ten million)."""

import random

import pytest

from app.data import transfers

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


def _reference(conn, since, livemode):
    return sorted((pid, address.lower(), network, token.lower(), expires)
                  for pid, address, network, token, expires in conn.execute(
                      REFERENCE, (since, int(livemode), since, int(livemode))))


def _read(conn, livemode):
    return sorted(tuple(w[i] for i in (0, 1, 4, 2, 3))
                  for w in transfers.watched_addresses(conn, livemode))


@pytest.mark.parametrize("livemode", [False, True])
def test_the_upgrade_s_fill_watches_what_the_or_over_every_process_returns(loaded, livemode):
    with loaded.transaction() as conn:
        transfers.fill_watch_list(conn, SINCE)
    conn = loaded.connection()
    expected = _reference(conn, SINCE, livemode)
    assert 50 < len(expected) < 200  # pending and recent ones of the mode, with earlier choices
    assert _read(conn, livemode) == expected


def test_the_chores_prune_what_became_final_before_the_window(loaded):
    """Filled with everything, then pruned in batches: what is left is the window's set, plus the
    processes final before it whose expiry is after its start (candidates once it passes)."""
    with loaded.transaction() as conn:
        transfers.fill_watch_list(conn, 0)
    conn = loaded.connection()
    assert len(_read(conn, True)) + len(_read(conn, False)) > OLD
    deleted = []
    while not deleted or deleted[-1]:
        with loaded.transaction() as conn:
            deleted.append(transfers.prune_watch_list(conn, SINCE, 4_000))
    assert len(deleted) == 4 and sum(deleted) > OLD - 200  # 10,000 processes, 4,000 at a time
    conn = loaded.connection()
    for livemode in (False, True):
        left, expected = _read(conn, livemode), _reference(conn, SINCE, livemode)
        late = _reference(conn, 0, livemode)
        assert set(expected) <= set(left) <= set(late)
        assert all(row[4] >= SINCE for row in set(left) - set(expected))
