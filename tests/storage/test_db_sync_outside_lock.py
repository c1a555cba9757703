"""`transaction(sync_outside_lock=True)` (app/db/sqlite/database.py): under SYNCHRONOUS=FULL the
commit is written at NORMAL and the WAL is fdatasynced after the writer lock is released, before the
transaction returns. The spy records each fdatasync the process makes and still makes it (the sync
is real)."""
import fcntl
import os
import sqlite3

import pytest

from app.db.sqlite import SqliteDatabase as Database

pytestmark = pytest.mark.sqlite_only  # SQLite's own machinery: the file, its locks, its WAL

SCHEMA = "CREATE TABLE IF NOT EXISTS t (n INTEGER NOT NULL);"


@pytest.fixture
def syncs(monkeypatch):
    """Every os.fdatasync made, as (file name, writer lock free?, rows a fresh connection sees)."""
    calls = []
    real = os.fdatasync

    def spy(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        calls.append((os.path.basename(name), _writer_lock_free(name), _rows_seen(name)))
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", spy)
    return calls


def _writer_lock_free(wal_name):
    fd = os.open(wal_name[: -len("-wal")] + "-writer.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _rows_seen(wal_name, table="t"):
    conn = sqlite3.connect(wal_name[: -len("-wal")])
    try:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except sqlite3.OperationalError:  # no such table: the service's database
        return None
    finally:
        conn.close()


@pytest.fixture
def make_db(tmp_path):
    made = []

    def make(synchronous="FULL"):
        db = Database(str(tmp_path / "sync.sqlite3"), synchronous=synchronous)
        db.init_schema(SCHEMA)
        made.append(db)
        return db

    yield make
    for db in made:
        db.close_all()


def synchronous_level(conn):
    return conn.execute("PRAGMA synchronous").fetchone()[0]  # 1 NORMAL, 2 FULL


def test_the_wal_is_synced_after_the_commit_and_outside_the_writer_lock(make_db, syncs):
    db = make_db()
    with db.transaction(sync_outside_lock=True) as conn:
        assert synchronous_level(conn) == 1
        conn.execute("INSERT INTO t VALUES (1)")
        assert syncs == []
    assert syncs == [("sync.sqlite3-wal", True, 1)]


def test_ordinary_transactions_keep_full_and_leave_the_sync_to_sqlite(make_db, syncs):
    db = make_db()
    with db.transaction(sync_outside_lock=True) as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    with db.transaction() as conn:
        assert synchronous_level(conn) == 2
        conn.execute("INSERT INTO t VALUES (2)")
    with db.transaction(sync_outside_lock=True) as conn:
        assert synchronous_level(conn) == 1
        conn.execute("INSERT INTO t VALUES (3)")
    assert [rows for _, _, rows in syncs] == [1, 3]


def test_a_rolled_back_transaction_syncs_nothing(make_db, syncs):
    db = make_db()
    with pytest.raises(RuntimeError):
        with db.transaction(sync_outside_lock=True) as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            raise RuntimeError("abandon")
    assert syncs == []
    assert _rows_seen(db.path + "-wal") == 0


@pytest.mark.parametrize("synchronous, level", [("NORMAL", 1), ("OFF", 0)])
def test_a_weaker_configured_level_is_kept_and_never_synced_by_us(make_db, syncs, synchronous,
                                                                  level):
    db = make_db(synchronous)
    with db.transaction(sync_outside_lock=True) as conn:
        assert synchronous_level(conn) == level
        conn.execute("INSERT INTO t VALUES (1)")
    assert syncs == []


def test_a_preorder_and_its_replay_are_each_synced_before_the_answer(api, app, syncs):
    key = {"Idempotency-Key": "order-1"}
    body = {"amount": 19.99, "metadata": {"orderId": "A-1"}}
    first = api.preorder(body, headers=key)
    assert first.status_code == 200
    assert syncs == [("test.sqlite3-wal", True, None)]
    assert _rows_seen(app.config["DATABASE"] + "-wal", "processes") == 1
    replay = api.preorder(body, headers=key)
    assert (replay.status_code, replay.get_json()) == (200, first.get_json())
    assert len(syncs) == 2


def test_without_a_wal_the_commit_is_left_to_sqlite(syncs, tmp_path, monkeypatch):
    """Where SQLite could not switch to WAL (here an in-memory database) there is no WAL to sync:
    the transaction commits at the configured level, as an ordinary one."""
    monkeypatch.chdir(tmp_path)  # the writer queue's lock file is made next to the "path"
    db = Database(":memory:", synchronous="FULL")
    try:
        db.init_schema(SCHEMA)
        with db.transaction(sync_outside_lock=True) as conn:
            assert synchronous_level(conn) == 2
            conn.execute("INSERT INTO t VALUES (1)")
        assert db.connection().execute("SELECT count(*) FROM t").fetchone()[0] == 1
    finally:
        db.close_all()
    assert syncs == []
