"""backup-db while gunicorn writes: the copy is one consistent snapshot; the restore procedure of
docs/operations.md brings the service up on it, web and worker, with every process there."""
import shutil
import sqlite3
import threading
import time

import pytest
import requests
from support.servers import create_merchant, flask, gunicorn, service_env

pytestmark = pytest.mark.sqlite_only  # backup-db is SQLite's online file copy (PostgreSQL: pg_dump)

PREORDER = "/payment-button/process/preorder"


def writers(base, key, stop, acked, threads=3):
    """Preorders (every third one cancelled) until `stop`; acked: (processId, cancelled, when)."""
    def write():
        session = requests.Session()
        session.trust_env = False
        session.headers["x-secret-key"] = key
        n = 0
        while not stop.is_set():
            response = session.post(base + PREORDER, json={"amount": 5}, timeout=30)
            assert response.status_code == 200, response.text
            process_id, cancelled = response.json()["processId"], False
            n += 1
            if n % 3 == 0:
                answer = session.post(f"{base}/payment-button/process/{process_id}/cancel",
                                      timeout=30)
                assert answer.status_code == 200, answer.text
                cancelled = True
            acked.append((process_id, cancelled, time.monotonic()))

    pool = [threading.Thread(target=write) for _ in range(threads)]
    for thread in pool:
        thread.start()
    return pool


def test_online_backup_is_consistent_and_restores(tmp_path, receiver):
    database = tmp_path / "live" / "preorder.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    key = create_merchant(env, "--webhook-url", receiver.url("/hook"))["secretKey"]
    copy = tmp_path / "backups" / "preorder-1.sqlite3"
    copy.parent.mkdir()

    with gunicorn(env, tmp_path / "gunicorn.log", workers=3) as base:
        stop, acked = threading.Event(), []
        pool = writers(base, key, stop, acked)
        try:
            while len(acked) < 60:
                time.sleep(0.05)
            started = time.monotonic()
            result = flask(env, "backup-db", str(copy))
            ended = time.monotonic()
            while not any(when > ended for *_, when in acked):
                time.sleep(0.05)  # writes went on after the backup too
        finally:
            stop.set()
            for thread in pool:
                thread.join(timeout=30)
        assert result.stdout.startswith(f"Backed up the database to {copy} (")
        assert result.stdout.endswith(" bytes, integrity ok).\n")

        # An existing file is refused unless --force.
        again = flask(env, "backup-db", str(copy), check=False)
        assert again.returncode == 1
        assert again.stderr == f"Error: {copy} exists (--force to overwrite it)\n"
        assert flask(env, "backup-db", str(tmp_path / "backups" / "nodir" / "x.sqlite3"),
                     check=False).stderr == (
            f"Error: {tmp_path / 'backups' / 'nodir'} is not a directory\n")

    # The copy: one file, intact, one snapshot: every write acknowledged before the backup began
    # is in it, nothing that was never acknowledged, and each cancellation with its event.
    assert sorted(p.name for p in copy.parent.iterdir()) == [copy.name]
    conn = sqlite3.connect(copy)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        rows = dict(conn.execute("SELECT id, status FROM processes").fetchall())
        events = dict(conn.execute(
            "SELECT process_id, count(*) FROM events WHERE type = 'process.cancelled'"
            " GROUP BY process_id"
        ).fetchall())
    finally:
        conn.close()
    all_acked = {pid for pid, *_ in acked}
    before = {pid for pid, _, when in acked if when < started}
    assert before <= set(rows) <= all_acked
    assert len(rows) < len(all_acked)  # writes went on after the snapshot
    cancelled = {pid for pid, status in rows.items() if status == "cancelled"}
    assert cancelled == set(events) and set(events.values()) == {1}
    assert {pid for pid, was_cancelled, when in acked
            if was_cancelled and when < started} <= cancelled
    pending = [pid for pid, status in rows.items() if status == "pending"]
    assert pending and cancelled

    # Restore (docs/operations.md): services stopped; the live files moved aside, -wal and -shm
    # included; the copy put in place; init-db; start web and worker.
    aside = tmp_path / "live" / "before-restore"
    aside.mkdir()
    for path in database.parent.glob("preorder.sqlite3*"):
        shutil.move(path, aside / path.name)
    shutil.copyfile(copy, database)
    flask(env, "init-db")
    with gunicorn(env, tmp_path / "gunicorn-restored.log", workers=2) as base:
        session = requests.Session()
        session.trust_env = False
        session.headers["x-secret-key"] = key
        listed, after = [], ""
        while True:
            page = session.get(f"{base}/payment-button/processes?limit=100{after}",
                               timeout=30).json()
            listed += [(p["processId"], p["status"]) for p in page["data"]]
            if not page["hasMore"]:
                break
            after = f"&starting_after={listed[-1][0]}"
        assert dict(listed) == rows  # every process of the backup, as it was
        answer = session.post(f"{base}/payment-button/process/{pending[0]}/cancel", timeout=30)
        assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
    # The worker delivers on the restored database: the backup's undelivered cancellations and the
    # new one (the copy was taken before the worker ever ran).
    flask(env, "deliver-webhooks", "--once")
    delivered = {r.body for r in receiver.wait_for(len(cancelled) + 1)}
    assert len(delivered) == len(cancelled) + 1
    assert any(pending[0].encode() in body for body in delivered)

