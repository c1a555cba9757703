"""PostgreSQL as the shared database of several processes, proven on one machine over loopback:
two gunicorn instances, three delivery workers, two chain watchers on the real test chain, SIGKILL,
a server stopped and started again under load, an idle worker woken by NOTIFY."""
import collections
import contextlib
import json
import re
import signal
import statistics
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from support import dbutil
from support.chain_node import TRANSFER_SELECTOR
from support.chain_shop import DECIMALS, NETWORK, XPUB
from support.postgres_server import PostgresServer
from support.servers import BIN, ROOT, create_merchant, flask, gunicorn, service_env

from app import create_app
from app.core.records import Process
from app.data import processes as process_rows
from app.domain.processes import expire_due

pytestmark = pytest.mark.postgres_only


def _process(env, log_path, *args):
    """`flask --app app ARGS` running in the background, its output in log_path."""
    log = open(log_path, "w")
    proc = subprocess.Popen([str(BIN / "flask"), "--app", "app", *args], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    proc.log_path = log_path
    log.close()
    return proc


def _worker(env, log_path, *args):
    return _process(env, log_path, "deliver-webhooks", *args)


def _stop(procs):
    """SIGTERM to those still running, then wait (SIGKILL for one that does not stop)."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def _workers(env, tmp_path, n, *args):
    procs = [_worker(env, tmp_path / f"worker-{i}.log", *args) for i in range(n)]
    try:
        yield procs
    finally:
        _stop(procs)


def _wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _past_expiry(database, merchant_id, n):
    """n pending processes already past their expiry, bulk-inserted: the workers' sweep turns each
    into one process.expired event."""
    app = create_app({"DATABASE": database})
    then = int(time.time()) - 3600
    try:
        with app.extensions["db"].transaction() as conn:
            process_rows.insert_many(conn, (
                Process(seq=None, id=str(uuid.uuid4()), merchant_id=merchant_id, status="pending",
                        amount="1.00", metadata=json.dumps({"n": i}), livemode=False,
                        created_at=then, updated_at=then, expires_at=then + 60)
                for i in range(n)))
    finally:
        app.extensions["db"].close_all()


def _session():
    session = requests.Session()
    session.trust_env = False
    return session


def _delivered(database):
    return dbutil.scalar(database, "SELECT count(*) FROM deliveries WHERE status = 'delivered'")


def test_two_instances_three_workers_deliver_10000_events_each_exactly_once(
        tmp_path, make_database, receiver):
    database = make_database("scale")
    env = service_env(database)
    flask(env, "init-db")
    keys = create_merchant(env, "--webhook-url", receiver.url("/hook"))
    _past_expiry(database, keys["merchantId"], 9_800)
    options = ("--concurrency", "8", "--batch-size", "50", "--poll-max", "1")
    with gunicorn(env, tmp_path / "web-a.log", workers=2) as web_a, \
            gunicorn(env, tmp_path / "web-b.log", workers=2) as web_b, \
            _workers(env, tmp_path, 3, *options) as workers:
        # Meanwhile merchants cancel 200 processes through both instances: 200 more events.
        def cancel(i):
            session, base = _session(), (web_a, web_b)[i % 2]
            headers = {"x-secret-key": keys["secretKey"]}
            created = session.post(base + "/payment-button/process/preorder", json={"amount": 2},
                                   headers=headers, timeout=30)
            assert created.status_code == 200, created.text
            done = session.post(
                f"{base}/payment-button/process/{created.json()['processId']}/cancel",
                headers=headers, timeout=30)
            assert done.status_code == 200, done.text

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(cancel, range(200)))
        _wait_until(lambda: _delivered(database) == 10_000, 300, "10,000 deliveries")
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        assert [proc.wait(30) for proc in workers] == [0, 0, 0]

    received = collections.Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert set(received) == {row[0] for row in dbutil.query(database, "SELECT id FROM events")}
    assert len(received) == 10_000 and set(received.values()) == {1}  # each exactly once
    assert dbutil.scalar(database, "SELECT count(*) FROM delivery_attempts") == 10_000
    logs = [p.log_path.read_text() for p in workers]
    assert all(log.count(" (delivered)") > 0 for log in logs)  # all three took part
    assert all("Traceback" not in log for log in logs)


def test_sweepers_at_once_expire_each_process_once_without_a_deadlock(make_database):
    # Every delivery worker sweeps expired processes; several at once on one database lock the
    # same rows and must wait for each other, never deadlock or expire a process twice. (The
    # scale-out test above once met a deadlock here when ties in expires_at had no order; this
    # test guards the outcome, the total order in due_for_expiry is what prevents it.)
    database = make_database("sweep")
    env = service_env(database)
    flask(env, "init-db")
    _past_expiry(database, create_merchant(env)["merchantId"], 3_000)
    apps = [create_app({"DATABASE": database}) for _ in range(4)]
    start = threading.Barrier(len(apps))

    def sweep(app):
        start.wait()
        return expire_due(app.extensions["db"], int(time.time()), batch_size=200)

    try:
        with ThreadPoolExecutor(len(apps)) as pool:
            expired = list(pool.map(sweep, apps))
    finally:
        for app in apps:
            app.extensions["db"].close_all()
    assert sum(expired) == 3_000
    assert dbutil.scalar(database,
                         "SELECT count(*) FROM events WHERE type = 'process.expired'") == 3_000
    assert dbutil.scalar(database, "SELECT count(DISTINCT process_id) FROM events") == 3_000


def test_workers_killed_with_sigkill_lose_nothing(tmp_path, make_database, receiver):
    database = make_database("kill")
    env = service_env(database, FLASK_WEBHOOK_LEASE_SECONDS=3, FLASK_WEBHOOK_TIMEOUT_SECONDS=1)
    flask(env, "init-db")
    keys = create_merchant(env, "--webhook-url", receiver.url("/hook"))
    _past_expiry(database, keys["merchantId"], 3_000)
    options = ("--concurrency", "8", "--batch-size", "50", "--poll-max", "1")
    with _workers(env, tmp_path, 3, *options) as workers:
        _wait_until(lambda: _delivered(database) >= 300, 120, "the first deliveries")
        for proc in workers[:2]:
            proc.send_signal(signal.SIGKILL)  # mid-batch: their leases are left to expire
        replacement = _worker(env, tmp_path / "replacement.log", *options)
        try:
            _wait_until(lambda: _delivered(database) == 3_000, 180, "3,000 deliveries")
        finally:
            replacement.send_signal(signal.SIGTERM)
            assert replacement.wait(30) == 0
        assert [proc.wait(10) for proc in workers[:2]] == [-signal.SIGKILL] * 2

    received = collections.Counter(r.headers["webhook-id"] for r in receiver.requests)
    assert len(received) == 3_000  # nothing lost (a killed worker's attempt may be made again)
    assert dbutil.scalar(database,
                         "SELECT count(*) FROM deliveries WHERE status != 'delivered'") == 0


def test_identical_idempotent_requests_over_two_instances_create_one_process(tmp_path,
                                                                            make_database):
    database = make_database("idem")
    env = service_env(database)
    flask(env, "init-db")
    keys = create_merchant(env)
    with gunicorn(env, tmp_path / "web-a.log", workers=2) as web_a, \
            gunicorn(env, tmp_path / "web-b.log", workers=2) as web_b:
        for key in ("order-1", "order-2", "order-3", "order-4", "order-5"):
            start = threading.Barrier(16)

            def send(i, key=key, start=start):
                session = _session()
                start.wait()
                response = session.post(
                    (web_a, web_b)[i % 2] + "/payment-button/process/preorder",
                    json={"amount": 19.99, "metadata": {"orderRef": key}},
                    headers={"x-secret-key": keys["secretKey"], "Idempotency-Key": key}, timeout=30)
                return response.status_code, response.json()["processId"], \
                    response.headers.get("Idempotent-Replayed")

            with ThreadPoolExecutor(16) as pool:
                results = list(pool.map(send, range(16)))
            assert [status for status, _, _ in results] == [200] * 16
            assert len({pid for _, pid, _ in results}) == 1
            assert sorted(replayed or "" for _, _, replayed in results) == [""] + ["true"] * 15
    assert dbutil.scalar(database, "SELECT count(*) FROM processes") == 5


def test_an_idle_worker_is_woken_by_a_new_event_within_100_ms(tmp_path, make_database, receiver):
    database = make_database("listen")
    env = service_env(database)
    flask(env, "init-db")
    keys = create_merchant(env, "--webhook-url", receiver.url("/hook"))
    app = create_app({"DATABASE": database})
    client = app.test_client()
    headers = {"x-secret-key": keys["secretKey"]}
    # --poll-max 5: without the notification an idle worker would look only every few seconds.
    with _workers(env, tmp_path, 1, "--poll-max", "5") as [worker]:
        time.sleep(3)  # idle: its poll interval has backed off to seconds
        latencies = []
        for i in range(5):
            process_id = client.post("/payment-button/process/preorder", json={"amount": 1},
                                     headers=headers).get_json()["processId"]
            assert client.post(f"/payment-button/process/{process_id}/cancel",
                               headers=headers).status_code == 200
            committed = time.monotonic()  # the answer follows the commit
            receiver.wait_for(i + 1, timeout=10)
            latencies.append(time.monotonic() - committed)
            time.sleep(1.5)  # idle again
    app.extensions["db"].close_all()
    assert "Traceback" not in worker.log_path.read_text()
    # Picked up and delivered (one HTTP request to the receiver included) within 100 ms.
    assert statistics.median(latencies) < 0.1, latencies
    assert max(latencies) < 0.5, latencies


def test_a_busy_pool_queues_the_request_until_a_connection_is_free(make_database):
    """Only an unreachable server is answered 503 at once: a request that finds every connection
    of a reachable server's pool in use waits for one (up to POSTGRES_POOL_TIMEOUT_SECONDS)."""
    app = create_app({"DATABASE": make_database("busy", schema=True), "POSTGRES_POOL_MIN": 1,
                      "POSTGRES_POOL_MAX": 1, "POSTGRES_POOL_TIMEOUT_SECONDS": 10})
    db, holding = app.extensions["db"], threading.Event()

    def hold():
        with db.transaction() as conn:  # the pool's only connection, for 2 s
            holding.set()
            conn.execute("SELECT pg_sleep(2)")

    try:
        assert app.test_client().get("/healthz").status_code == 200  # the pool is open
        holder = threading.Thread(target=hold)
        holder.start()
        assert holding.wait(10)
        started = time.monotonic()
        response = app.test_client().get("/healthz")
        waited = time.monotonic() - started
        holder.join(10)
    finally:
        db.close_all()
    assert response.status_code == 200, response.get_data(as_text=True)
    assert waited > 1, waited


def test_server_stopped_under_load_is_503_then_recovers_without_a_restart(tmp_path):
    server = PostgresServer(durable=True)  # a server of its own: this test stops it
    try:
        server.start()
        database = server.create_database()
        env = service_env(database)  # the pool's timeout at its default, 10 s
        flask(env, "init-db")
        keys = create_merchant(env)
        headers = {"x-secret-key": keys["secretKey"]}
        answers, stop = [], threading.Event()
        with gunicorn(env, tmp_path / "web.log", workers=2) as base:
            def load():
                session = _session()
                while not stop.is_set():
                    started = time.monotonic()
                    try:
                        response = session.post(base + "/payment-button/process/preorder",
                                                json={"amount": 1}, headers=headers, timeout=30)
                    except requests.RequestException as e:
                        answers.append((None, repr(e), time.monotonic() - started))
                        continue
                    answers.append((response.status_code, response.json(),
                                    time.monotonic() - started))

            threads = [threading.Thread(target=load) for _ in range(4)]
            for thread in threads:
                thread.start()
            time.sleep(1)
            server.stop("immediate")  # as a crash: connections cut mid-transaction
            session = _session()
            time.sleep(1)  # the load has found every pooled connection broken
            # Answered at once, not after the pool's 10 s: the pool cannot connect, so a request
            # does not queue for a connection (generous bounds for a busy machine).
            started = time.monotonic()
            down = session.post(base + "/payment-button/process/preorder", json={"amount": 1},
                                headers=headers, timeout=30)
            down_seconds, started = time.monotonic() - started, time.monotonic()
            health = session.get(base + "/healthz", timeout=30)
            health_seconds = time.monotonic() - started
            assert down.status_code == 503 and down.headers["Retry-After"] == "5"
            assert down.json() == {"code": "service_unavailable",
                                   "message": "The service cannot reach its database;"
                                              " try again later."}
            assert health.status_code == 503 and health.json()["code"] == "unavailable"
            assert down_seconds < 3 and health_seconds < 3, (down_seconds, health_seconds)
            server.start()  # the same port: the service was not told anything
            deadline = time.monotonic() + 60
            while session.get(base + "/healthz", timeout=30).status_code != 200:
                assert time.monotonic() < deadline, "the service did not recover"
                time.sleep(0.2)
            after = session.post(base + "/payment-button/process/preorder", json={"amount": 1},
                                 headers=headers, timeout=30)
            assert after.status_code == 200
            stop.set()
            for thread in threads:
                thread.join(60)
        statuses = collections.Counter(status for status, _, _ in answers)
        assert set(statuses) <= {200, 503}, statuses  # never a 500, never a dropped connection
        assert statuses[503] >= 1 and statuses[200] >= 1
        slowest_503 = max(seconds for status, _, seconds in answers if status == 503)
        assert slowest_503 < 5, slowest_503
        stored = {row[0] for row in dbutil.query(database, "SELECT id FROM processes")}
        answered = {body["processId"] for status, body, _ in answers if status == 200}
        assert answered <= stored  # never a 200 for a preorder that was not committed
        assert "Traceback" not in (tmp_path / "web.log").read_text()
    finally:
        server.destroy()


def _watcher(env, log_path):
    """A long-lived chain watcher (`watch-payments`, not --once)."""
    return _process(env, log_path, "watch-payments", "--poll-interval", "0.2", "--backoff-max", "1")


def _worked(log_text):
    """Whether a watcher's log shows it committed something: transfers recorded or confirmed."""
    return re.search(r"blocks \d+-\d+: \d+ transfers|transfers confirmed in", log_text) is not None


def _mine_one_block(chain, transfers):
    """Token transfers [(address, base units)] all in one new block (automine off meanwhile), so
    that every watcher first sees each of them one confirmation deep; their (tx hash, log index,
    block number), in the order given."""
    sender = chain.accounts[0]
    nonce = int(chain.rpc("eth_getTransactionCount", sender, "latest"), 16)
    chain.rpc("evm_setAutomine", False)
    try:
        hashes = []
        for i, (address, amount) in enumerate(transfers):
            data = ("0x" + TRANSFER_SELECTOR + address[2:].lower().rjust(64, "0")
                    + format(amount, "064x"))
            # Nonce and gas given: without automine the node would not queue them otherwise.
            hashes.append(chain.rpc("eth_sendTransaction", {
                "from": sender, "to": chain.token, "data": data, "nonce": hex(nonce + i),
                "gas": hex(100_000)}))
        chain.rpc("evm_mine")
    finally:
        chain.rpc("evm_setAutomine", True)
    receipts = [chain.rpc("eth_getTransactionReceipt", h) for h in hashes]
    assert all(r is not None and r["status"] == "0x1" for r in receipts), receipts
    assert len({r["blockNumber"] for r in receipts}) == 1
    return [(h, int(r["logs"][0]["logIndex"], 16), int(r["blockNumber"], 16))
            for h, r in zip(hashes, receipts, strict=True)]


def test_two_instances_three_workers_two_watchers_count_each_transfer_once(
        tmp_path, make_database, receiver, chain):
    """Live payments on the real test chain with everything running at once on one database: two
    gunicorn instances take the preorders and the customers' choices, two chain watcher loops (one
    active, one standing by), three delivery workers send the webhooks. Each transfer is recorded
    once and each event delivered once with the body the contract gives it; the active watcher
    killed with SIGKILL mid-way loses nothing (the standby takes over at the end of its lease and
    finishes)."""
    confirmations, unit = 3, 10**6
    database = make_database("chain")
    # Processes live 30 days: the test chain's clock may run ahead of this machine's.
    # The least watcher lease (10 s): the standby takes over sooner.
    env = service_env(database, FLASK_PROCESS_TTL_SECONDS=30 * 86400,
                      FLASK_WATCHER_LEASE_SECONDS=10)
    flask(env, "init-db")
    keys = create_merchant(env, "--webhook-url", receiver.url("/hook"))
    flask(env, "networks", "add", NETWORK, "--name", "Hardhat", "--chain-id", "31337", "--rpc-url",
          chain.url, "--confirmations", str(confirmations), "--start-block", str(chain.head() + 1))
    flask(env, "assets", "add", "tusd", "--network", NETWORK, "--symbol", "TUSD", "--name",
          "Test USD", "--contract", chain.token, "--decimals", str(DECIMALS))
    flask(env, "merchants", "set-xpub", keys["merchantId"], XPUB)
    secret, public = {"x-secret-key": keys["secretKey"]}, {"x-public-key": keys["publicKey"]}
    watchers = [_watcher(env, tmp_path / f"watcher-{i}.log") for i in range(2)]
    try:
        with gunicorn(env, tmp_path / "web-a.log", workers=2) as web_a, \
                gunicorn(env, tmp_path / "web-b.log", workers=2) as web_b, \
                _workers(env, tmp_path, 3, "--concurrency", "4", "--poll-max", "1") as workers:
            def order(i):
                """A preorder of 4 tokens through one instance, the customer's choice through the
                other: (process id, deposit address)."""
                session, bases = _session(), (web_a, web_b) if i % 2 else (web_b, web_a)
                created = session.post(bases[0] + "/payment-button/process/preorder",
                                       json={"amount": 4, "metadata": {"n": i}}, headers=secret,
                                       timeout=30)
                assert created.status_code == 200, created.text
                process_id = created.json()["processId"]
                chosen = session.post(f"{bases[1]}/payment-button/process/{process_id}/confirm",
                                      json={"assetId": "tusd", "networkId": NETWORK},
                                      headers=public, timeout=30)
                assert chosen.status_code == 200, chosen.text
                assert chosen.json()["payment"]["amountDue"] == "4"
                return process_id, chosen.json()["payment"]["address"]

            with ThreadPoolExecutor(6) as pool:
                orders = list(pool.map(order, range(24)))
            for proc in workers + watchers:  # all running before the first block
                _wait_until(lambda p=proc: " started" in p.log_path.read_text(), 60,
                            proc.log_path.name)
            full, split, over = orders[0:8], orders[8:16], orders[16:24]

            def recorded(n):
                return dbutil.scalar(database, "SELECT count(*) FROM transfers") == n

            def confirmed(n):
                return dbutil.scalar(
                    database, "SELECT count(*) FROM transfers WHERE status = 'confirmed'") == n

            # One block: the whole amount, the first part (1.5 of 4), a little more (4.25).
            first = _mine_one_block(chain, [(a, 4 * unit) for _, a in full]
                                    + [(a, 3 * unit // 2) for _, a in split]
                                    + [(a, 17 * unit // 4) for _, a in over])
            _wait_until(lambda: recorded(24), 30, "24 transfers seen")
            chain.mine(confirmations - 1)
            _wait_until(lambda: confirmed(24), 30, "24 transfers confirmed")
            # The rest of the split payments; a watcher that has done work so far is killed as
            # soon as they are mined, whatever it is doing; the other one finishes.
            rest = _mine_one_block(chain, [(a, 5 * unit // 2) for _, a in split])
            killed = next(w for w in watchers if _worked(w.log_path.read_text()))
            killed.send_signal(signal.SIGKILL)
            assert killed.wait(10) == -signal.SIGKILL
            _wait_until(lambda: recorded(32), 30, "the last 8 transfers seen")
            chain.mine(confirmations - 1)
            _wait_until(lambda: confirmed(32), 30, "the last 8 transfers confirmed")
            events = dbutil.scalar(database, "SELECT count(*) FROM events")
            assert events == 8 * 2 + 8 * 4 + 8 * 2
            _wait_until(lambda: _delivered(database) == events, 60, "every event delivered")
            for proc in workers:
                proc.send_signal(signal.SIGTERM)
            assert [proc.wait(30) for proc in workers] == [0, 0, 0]
    finally:
        _stop(watchers)
    survivor = next(w for w in watchers if w is not killed)
    assert survivor.returncode == 0
    logs = [w.log_path.read_text() for w in watchers]
    assert all(_worked(log) for log in logs), logs  # both took part
    assert all("Traceback" not in log for log in logs)
    assert all("Traceback" not in p.log_path.read_text() for p in workers)

    # Every transfer recorded once, confirmed.
    rows = dbutil.query(database, "SELECT process_id, tx_hash, log_index, block_number, amount,"
                                  " status FROM transfers")
    expected = {}
    for (pid, _), (tx, index, block), amount in zip(full + split + over, first,
                                                     [4 * unit] * 8 + [3 * unit // 2] * 8
                                                     + [17 * unit // 4] * 8, strict=True):
        expected[tx] = (pid, tx, index, block, str(amount), "confirmed")
    for (pid, _), (tx, index, block) in zip(split, rest, strict=True):
        expected[tx] = (pid, tx, index, block, str(5 * unit // 2), "confirmed")
    assert sorted(rows) == sorted(expected.values())

    # Every event delivered exactly once, the bytes of its outbox row.
    received = collections.Counter(r.headers["webhook-id"] for r in receiver.requests)
    outbox = {row[0]: row[1:] for row in dbutil.query(
        database, "SELECT id, process_id, type, payload, seq FROM events")}
    assert set(received) == set(outbox) and set(received.values()) == {1}
    for request in receiver.requests:
        assert request.body.decode() == outbox[request.headers["webhook-id"]][2]

    # Each process's events, in order, with the payment docs/contract.md describes.
    block_1, block_2 = first[0][2], rest[0][2]

    def transfer(tx_index, amount, head):
        tx, index, block = tx_index
        return {"txHash": tx, "logIndex": index, "blockNumber": block, "amount": amount,
                "confirmations": head - block + 1}

    def payments(pid):
        bodies = sorted((seq, json.loads(payload)) for p, _, payload, seq in outbox.values()
                        if p == pid)
        return [(body["type"], body["data"]["status"], body["data"]["processId"],
                 {k: body["data"]["payment"][k] for k in
                  ("amountDue", "amountPaid", "amountPending", "transfers")})
                for _, body in bodies]

    for (pid, _), tx in zip(full, first[:8], strict=True):
        assert payments(pid) == [
            ("payment.pending", "pending", pid, {"amountDue": "4", "amountPaid": "0",
             "amountPending": "4", "transfers": [transfer(tx, "4", block_1)]}),
            ("payment.completed", "completed", pid, {"amountDue": "4", "amountPaid": "4",
             "amountPending": "0", "transfers": [transfer(tx, "4", block_1 + 2)]}),
        ]
    for (pid, _), tx in zip(over, first[16:], strict=True):
        assert payments(pid) == [
            ("payment.pending", "pending", pid, {"amountDue": "4", "amountPaid": "0",
             "amountPending": "4.25", "transfers": [transfer(tx, "4.25", block_1)]}),
            ("payment.completed", "completed", pid, {"amountDue": "4", "amountPaid": "4.25",
             "amountPending": "0", "transfers": [transfer(tx, "4.25", block_1 + 2)]}),
        ]
    for (pid, _), tx, tx2 in zip(split, first[8:16], rest, strict=True):
        assert payments(pid) == [
            ("payment.pending", "pending", pid, {"amountDue": "4", "amountPaid": "0",
             "amountPending": "1.5", "transfers": [transfer(tx, "1.5", block_1)]}),
            ("payment.partial", "pending", pid, {"amountDue": "4", "amountPaid": "1.5",
             "amountPending": "0", "transfers": [transfer(tx, "1.5", block_1 + 2)]}),
            ("payment.pending", "pending", pid, {"amountDue": "4", "amountPaid": "1.5",
             "amountPending": "2.5", "transfers": [transfer(tx, "1.5", block_2),
                                                   transfer(tx2, "2.5", block_2)]}),
            ("payment.completed", "completed", pid, {"amountDue": "4", "amountPaid": "4",
             "amountPending": "0", "transfers": [transfer(tx, "1.5", block_2 + 2),
                                                 transfer(tx2, "2.5", block_2 + 2)]}),
        ]


def test_pg_dump_and_pg_restore_bring_the_service_back_on_an_empty_database(tmp_path,
                                                                            make_database):
    # The backup procedure of docs/storage.md: pg_dump -Fc, pg_restore into an empty database,
    # init-db finds the newest schema and changes nothing, the service answers on the copy.
    from support.postgres_server import _bin

    live = make_database("live")
    env = service_env(live)
    flask(env, "init-db")
    keys = create_merchant(env, "--webhook-url", "http://127.0.0.1:9/hook")  # a delivery pending
    app = create_app({"DATABASE": live})
    try:
        client, headers = app.test_client(), {"x-secret-key": keys["secretKey"]}
        created = [client.post("/payment-button/process/preorder", json={"amount": 5 + n},
                               headers=headers).get_json()["processId"] for n in range(3)]
        assert client.post(f"/payment-button/process/{created[0]}/cancel",
                           headers=headers).status_code == 200
        shown = [client.get(f"/payment-button/process/{p}", headers=headers).get_json()
                 for p in created]
    finally:
        app.extensions["db"].close_all()
    refused = flask(env, "backup-db", str(tmp_path / "copy.sqlite3"), check=False)
    assert (refused.returncode, refused.stderr) == (1, (
        "Error: backup-db copies a SQLite file; back up PostgreSQL with pg_dump"
        ' (docs/storage.md, "Backups on PostgreSQL").\n'))
    backup = tmp_path / "preorder.dump"
    subprocess.run([_bin("pg_dump"), "-Fc", "-f", str(backup), live], check=True, timeout=60)

    restored = make_database("restored")  # empty: CREATE DATABASE from template0
    subprocess.run([_bin("pg_restore"), "--exit-on-error", "--single-transaction", "-d", restored,
                    str(backup)], check=True, timeout=60)
    version = dbutil.scalar(live, "SELECT max(version) FROM schema_version")
    restored_env = service_env(restored)
    assert flask(restored_env, "init-db").stdout == (
        f"Initialised the database (schema version {version}).\n")
    assert dbutil.dump(restored) == dbutil.dump(live)
    triggers = "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal ORDER BY tgname"
    assert dbutil.query(restored, triggers) == dbutil.query(live, triggers) == [
        ("deliveries_notify",), ("payments_watched",)]

    app = create_app({"DATABASE": restored})
    try:
        client = app.test_client()
        health = client.get("/healthz")
        pending = dbutil.scalar(live, "SELECT count(*) FROM deliveries WHERE status = 'pending'")
        assert (health.status_code, health.get_json()["status"]) == (200, "ok")
        assert health.get_json()["outbox"]["pending"] == pending > 0  # to deliver from the copy
        assert [client.get(f"/payment-button/process/{p}", headers=headers).get_json()
                for p in created] == shown
        response = client.post("/payment-button/process/preorder", json={"amount": 9},
                               headers=headers)
        assert response.status_code == 200  # the identity sequences were restored past the rows
        cancel = client.post(f"/payment-button/process/{response.get_json()['processId']}/cancel",
                             headers=headers)
        assert cancel.status_code == 200
    finally:
        app.extensions["db"].close_all()
    for table in ("processes", "events"):
        count = f"SELECT count(*) FROM {table}"
        assert dbutil.scalar(restored, count) == dbutil.scalar(live, count) + 1
