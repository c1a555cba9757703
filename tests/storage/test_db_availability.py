"""A database that cannot serve (its directory deleted, its file replaced, read-only, locked past
the busy timeout, never made by init-db) is 503 on every API route, never a 200 for a row that is
not durably in the database, and never re-created by a request: only `init-db` creates
(docs/operations.md, "Failures and availability")."""
import contextlib
import fcntl
import os
import shutil
import signal
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from support.helpers import Api, assert_error
from support.servers import create_merchant, flask, gunicorn, service_env

from app import create_app

pytestmark = pytest.mark.sqlite_only  # SQLite's own machinery: the file, its locks, its WAL

PREORDER = "/payment-button/process/preorder"


def assert_unavailable(response):
    """503 service_unavailable in the envelope, with Retry-After (test client or requests)."""
    if isinstance(response, requests.Response):
        assert response.status_code == 503, response.text
        assert response.headers["Content-Type"] == "application/json"
        assert response.json() == {
            "code": "service_unavailable",
            "message": "The service cannot reach its database; try again later.",
        }
    else:
        assert_error(response, 503, "service_unavailable",
                     "The service cannot reach its database; try again later.")
    assert response.headers["Retry-After"] == "5"


def count_processes(database):
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT count(*) FROM processes").fetchone()[0]


@pytest.fixture
def app_config(tmp_path):
    return {"DATABASE": str(tmp_path / "data" / "service.sqlite3")}


def test_deleting_the_directory_under_open_connections(app, client, api, runner, tmp_path):
    process_id = api.preorder().get_json()["processId"]
    assert client.get("/healthz").status_code == 200
    shutil.rmtree(tmp_path / "data")  # the connection of this thread is still open on the files

    assert_unavailable(api.preorder())
    assert_unavailable(api.get(process_id))
    assert_unavailable(api.list())
    assert_unavailable(api.cancel(process_id))
    assert_error(client.get("/healthz"), 503, "unavailable")
    assert not (tmp_path / "data").exists()  # no request made a directory or a file

    # init-db is the one way back: the operator's deliberate choice of an empty database.
    assert runner.invoke(args=["init-db"]).exit_code == 0
    assert client.get("/healthz").status_code == 200
    assert_error(api.preorder(), 401, "invalid_secret_key")


def test_a_new_database_that_reuses_the_deleted_files_inode(tmp_path, clock):
    # A process's database is deleted, then init-db (another process) makes a new one. File systems
    # hand a freed inode number out again at once, so the new file can carry the deleted one's
    # (device, inode): the process must still refuse it. Without a descriptor held on the file it
    # serves, about half of these rounds served the new file.
    database = tmp_path / "data" / "service.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    for _ in range(10):
        client = create_app({"TESTING": True, "DATABASE": str(database),
                             "CLOCK": clock}).test_client()
        assert client.get("/healthz").status_code == 200
        shutil.rmtree(tmp_path / "data")
        assert_error(client.get("/healthz"), 503, "unavailable")
        flask(env, "init-db")
        assert_error(client.get("/healthz"), 503, "unavailable")
        assert_unavailable(Api(client, "sk_test_" + "x" * 32).preorder())


def test_a_write_in_flight_when_the_directory_is_deleted(app, api, tmp_path):
    # The request has passed its first check (authenticated) and waits in the writer queue while the
    # directory is removed; its commit then lands in a deleted file: 503, not 200.
    with ThreadPoolExecutor(1) as pool:  # one thread: its connection and WAL descriptor are reused
        assert pool.submit(api.preorder).result().status_code == 200
        lock = os.open(str(tmp_path / "data" / "service.sqlite3") + "-writer.lock", os.O_RDWR)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            in_flight = pool.submit(api.preorder)
            time.sleep(0.5)
            assert not in_flight.done()
            shutil.rmtree(tmp_path / "data")
        finally:
            os.close(lock)  # releases the flock: the waiting writer goes on
        assert_unavailable(in_flight.result())
    assert not (tmp_path / "data").exists()


def test_a_file_replaced_by_one_init_db_did_not_make(app, client, api, tmp_path):
    database = tmp_path / "data" / "service.sqlite3"
    assert api.preorder().status_code == 200
    other = tmp_path / "other.sqlite3"
    with contextlib.closing(sqlite3.connect(other)) as conn:  # a database of someone else's
        conn.executescript("CREATE TABLE merchants (id TEXT);")
    os.replace(other, database)
    assert_error(client.get("/healthz"), 503, "unavailable")
    assert_unavailable(api.preorder())
    # An empty file at the path (what SQLite would have made on its own) is not a database either.
    database.unlink()
    database.touch()
    assert_unavailable(api.preorder())
    assert_error(client.get("/healthz"), 503, "unavailable")
    assert database.stat().st_size == 0



def _make_read_only(directory, read_only):
    """The database's directory and every file in it (the file, its WAL and shm): read-only or
    back."""
    if not read_only:
        directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o444 if read_only else 0o644)
    if read_only:
        directory.chmod(0o555)


def test_a_database_made_read_only_under_open_connections(tmp_path):
    # The worker's connection was opened read-write; the file is then made read-only under it (the
    # mode bits bind the server as in the test above). /healthz reports it at once; commits through
    # the open connection still reach the file (durable: 200 is true), a worker restarted meanwhile
    # cannot write (503); permissions repaired, everything is 200 again without a restart.
    directory = tmp_path / "data"
    database = directory / "service.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    key = create_merchant(env)["secretKey"]
    log_path = tmp_path / "gunicorn.log"
    started = []
    try:
        with gunicorn(env, log_path, workers=1, unprivileged=True, started=started) as base:
            def preorder():
                return requests.post(base + PREORDER, json={"amount": 5}, timeout=30,
                                     headers={"x-secret-key": key})

            assert [preorder().status_code for _ in range(3)] == [200] * 3
            _make_read_only(directory, True)
            health = requests.get(base + "/healthz", timeout=30)
            assert health.status_code == 503
            assert health.json() == {
                "code": "unavailable",
                "message": "The database cannot serve: the database cannot be written (read-only).",
            }
            assert [preorder().status_code for _ in range(3)] == [200] * 3
            assert count_processes(database) == 6

            started[0].send_signal(signal.SIGHUP)  # a new worker opens the file as it is now
            time.sleep(1)
            _wait_for_workers(base)
            for _ in range(3):
                assert_unavailable(preorder())
            assert requests.get(base + "/healthz", timeout=30).status_code == 503

            _make_read_only(directory, False)
            assert preorder().status_code == 200
            assert requests.get(base + "/healthz", timeout=30).status_code == 200
    finally:
        _make_read_only(directory, False)
    assert count_processes(database) == 7  # every 200, and nothing else
    log = log_path.read_text()
    assert "Traceback" not in log
    assert "healthz: database unavailable: the database cannot be written (read-only)" in log


def test_no_request_creates_the_database_or_its_directory(tmp_path, clock):
    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "nowhere" / "x.sqlite3"),
                      "CLOCK": clock})
    client = app.test_client()
    assert_error(client.get("/healthz"), 503, "unavailable")
    assert_unavailable(Api(client, "sk_test_" + "x" * 32).preorder())
    assert_unavailable(client.get(
        f"/payment-button/process/{'0' * 8}-0000-4000-8000-{'0' * 12}/public",
        headers={"x-public-key": "pk_test_x"}))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("app_config", [{"SQLITE_BUSY_TIMEOUT_MS": 200}])
def test_locked_past_the_busy_timeout_is_503(app, api):
    # Another program (an operator's sqlite3 shell) holds the write lock past the busy timeout.
    holder = sqlite3.connect(app.config["DATABASE"], isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert_unavailable(api.preorder())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert api.preorder().status_code == 200


def _wait_for_workers(base, timeout=20):
    """After a SIGHUP: until the new workers answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            response = requests.get(base + "/openapi.json", timeout=2)
            if response.status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError("no worker answered after the reload")


def test_deleting_the_directory_under_gunicorn(tmp_path):
    directory = tmp_path / "data"
    database = directory / "service.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    key = create_merchant(env)["secretKey"]
    log_path = tmp_path / "gunicorn.log"
    started = []
    with gunicorn(env, log_path, workers=1, started=started) as base:
        def preorder():
            return requests.post(base + PREORDER, json={"amount": 5}, timeout=30,
                                 headers={"x-secret-key": key})

        def healthz():
            return requests.get(base + "/healthz", timeout=30).status_code

        def reload_workers():
            started[0].send_signal(signal.SIGHUP)
            time.sleep(1)
            _wait_for_workers(base)

        # The worker has its connection open.
        assert {preorder().status_code for _ in range(6)} == {200}
        shutil.rmtree(directory)
        for _ in range(6):
            assert_unavailable(preorder())
        assert healthz() == 503 and not directory.exists()

        # init-db makes a new database: the worker that served the deleted one does not take it up
        # under its open connection; it stays unavailable until restarted.
        flask(env, "init-db")
        for _ in range(6):
            assert_unavailable(preorder())
        assert healthz() == 503

        # A worker restarted while there is no database does not make one either.
        shutil.rmtree(directory)
        reload_workers()
        for _ in range(6):
            assert_unavailable(preorder())
        assert healthz() == 503 and not directory.exists()

        # The operator runs init-db: this worker never had a database, it serves the new one.
        flask(env, "init-db")
        assert healthz() == 200
        assert preorder().status_code == 401  # an empty database: the old key is unknown
        new_key = create_merchant(env)["secretKey"]
        assert requests.post(base + PREORDER, json={"amount": 5}, timeout=30,
                             headers={"x-secret-key": new_key}).status_code == 200
    log = log_path.read_text()
    assert "Traceback" not in log
    assert "database unavailable on POST /payment-button/process/preorder" in log


def test_a_read_only_database_under_gunicorn(tmp_path):
    # Root writes whatever the mode bits say, so the server runs without the capabilities that let
    # it (setpriv, see servers.gunicorn): the bits then bind it as they bind a service user.
    directory = tmp_path / "data"
    database = directory / "service.sqlite3"
    env = service_env(database)
    flask(env, "init-db")
    keys = create_merchant(env)
    # Everything read-only: the file, its WAL and shm if any, the directory.
    for path in directory.iterdir():
        path.chmod(0o444)
    directory.chmod(0o555)
    log_path = tmp_path / "gunicorn.log"
    try:
        with gunicorn(env, log_path, workers=1, unprivileged=True, ready="/openapi.json") as base:
            for _ in range(3):
                assert_unavailable(requests.post(base + PREORDER, json={"amount": 5}, timeout=30,
                                                 headers={"x-secret-key": keys["secretKey"]}))
            response = requests.get(base + "/healthz", timeout=30)
            assert response.status_code == 503 and response.json()["code"] == "unavailable"

            # Writable again: the next request opens a new connection, no restart needed.
            directory.chmod(0o755)
            for path in directory.iterdir():
                path.chmod(0o644)
            assert requests.get(base + "/healthz", timeout=30).status_code == 200
            assert requests.post(base + PREORDER, json={"amount": 5}, timeout=30,
                                 headers={"x-secret-key": keys["secretKey"]}).status_code == 200
    finally:
        directory.chmod(0o755)
    assert count_processes(database) == 1  # only the one answered 200
    log = log_path.read_text()
    assert "Traceback" not in log
