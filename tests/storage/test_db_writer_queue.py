"""Writers queue on the writer lock (app/db/sqlite/writer_queue.py) instead of polling SQLite's busy
lock: with SQLite's busy timeout at 0, where any collision on SQLite's lock would fail at once,
concurrent writers from threads and from processes all succeed (they wait in the queue instead). The
queue's own wait is bounded: a writer stuck behind a held transaction fails after the timeout, it
does not hang."""
import multiprocessing
import sqlite3
import threading

import pytest

from app.db.sqlite import SqliteDatabase as Database

pytestmark = pytest.mark.sqlite_only  # SQLite's own machinery: the file, its locks, its WAL

SCHEMA = "CREATE TABLE IF NOT EXISTS t (who TEXT NOT NULL, n INTEGER NOT NULL);"
WRITERS, EACH = 6, 60


def write(path, who, errors):
    db = Database(str(path), busy_timeout_ms=0, queue_timeout_ms=30_000)
    try:
        for n in range(EACH):
            with db.transaction() as conn:
                conn.execute("INSERT INTO t (who, n) VALUES (?, ?)", (who, n))
                conn.execute("SELECT count(*) FROM t").fetchone()  # hold the lock a little longer
    except sqlite3.OperationalError as e:
        errors.append(str(e))
    finally:
        db.close_all()


def rows(path):
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*), count(DISTINCT who) FROM t").fetchone()
    finally:
        conn.close()


def _open_database(path):
    """The database with its schema, kept open by the caller while writers come and go: opening
    the first connection to a WAL database runs its recovery, which another connection opening at
    that moment finds busy (a collision of opens, not of writers, and with the busy timeout at 0 a
    failure): an open service always has a connection up."""
    keeper = Database(str(path))
    keeper.init_schema(SCHEMA)
    return keeper


def test_threads_queue_for_the_write_lock(tmp_path):
    path = tmp_path / "queue.sqlite3"
    keeper = _open_database(path)
    errors = []
    threads = [threading.Thread(target=write, args=(path, f"thread-{i}", errors))
               for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keeper.close_all()
    assert errors == []
    assert rows(path) == (WRITERS * EACH, WRITERS)


def _process_writer(path, who, queue):
    errors = []
    write(path, who, errors)
    queue.put(errors)


def test_processes_queue_for_the_write_lock(tmp_path):
    path = tmp_path / "queue.sqlite3"
    keeper = _open_database(path)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_writer, args=(str(path), f"proc-{i}", queue))
             for i in range(WRITERS)]
    for p in procs:
        p.start()
    errors = [e for _ in procs for e in queue.get(timeout=60)]
    for p in procs:
        p.join(60)
    keeper.close_all()
    assert errors == []
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert rows(path) == (WRITERS * EACH, WRITERS)


def test_the_lock_is_released_when_a_transaction_fails(tmp_path):
    path = tmp_path / "queue.sqlite3"
    db = Database(path, busy_timeout_ms=0)  # a Path works as well as a str
    db.init_schema(SCHEMA)
    try:
        with db.transaction() as conn:
            conn.execute("INSERT INTO nowhere VALUES (1)")
    except sqlite3.OperationalError:
        pass
    errors = []
    worker = threading.Thread(target=write, args=(path, "after", errors), daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and errors == []
    assert rows(path) == (EACH, 1)
    db.close_all()


def test_a_writer_behind_a_held_transaction_gives_up_after_the_timeout(tmp_path):
    path = tmp_path / "queue.sqlite3"
    holder = Database(str(path))
    holder.init_schema(SCHEMA)
    waiter = Database(str(path), busy_timeout_ms=200)
    outcome = []

    def write_once():
        try:
            with waiter.transaction() as conn:
                conn.execute("INSERT INTO t (who, n) VALUES ('waiter', 1)")
            outcome.append("written")
        except sqlite3.OperationalError as e:
            outcome.append(str(e))

    with holder.transaction() as conn:
        conn.execute("INSERT INTO t (who, n) VALUES ('holder', 1)")
        thread = threading.Thread(target=write_once)
        thread.start()
        thread.join(30)
    assert outcome == ["database is locked (writer queue)"]
    # The waiter that gave up gets the lock when the holder commits and must hand it straight back:
    # another connection can write (it would fail after its 5 s queue timeout otherwise).
    other = Database(str(path), busy_timeout_ms=5000)
    with other.transaction() as conn:
        conn.execute("INSERT INTO t (who, n) VALUES ('other', 1)")
    write_once()  # once the holder has committed, the queue is free again
    assert outcome[-1] == "written"
    assert rows(path) == (3, 3)
    holder.close_all()
    waiter.close_all()
    other.close_all()


def test_a_failed_commit_leaves_no_transaction_open(tmp_path):
    # A deferred foreign-key violation makes COMMIT itself fail: the connection must be rolled back,
    # or this thread would keep SQLite's write lock (and the writer queue) for good.
    path = tmp_path / "commit.sqlite3"
    db = Database(str(path), busy_timeout_ms=200)
    db.init_schema("CREATE TABLE p (id INTEGER PRIMARY KEY);"
                   "CREATE TABLE c (p_id INTEGER REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED);")
    try:
        with db.transaction() as conn:
            conn.execute("INSERT INTO c (p_id) VALUES (42)")
    except sqlite3.IntegrityError:
        pass
    assert not db.connection().in_transaction
    other = Database(str(path), busy_timeout_ms=200)
    with other.transaction() as conn:  # another writer gets the lock at once
        conn.execute("INSERT INTO p (id) VALUES (1)")
    with db.transaction() as conn:  # and so does this thread again
        conn.execute("INSERT INTO c (p_id) VALUES (1)")
    db.close_all()
    other.close_all()
