"""Several `watch-payments` on one database: one polls each network (its lease), the others stand by
without a JSON-RPC call and take over when it is killed or hangs, within two poll intervals plus the
lease; nothing is counted twice; a watcher that lost its lease writes nothing
(docs/storage.md, "Several watchers")."""
import logging
import os
import signal
import subprocess
import threading
import time

import pytest
from support.chain_shop import NETWORK, open_shop
from support.servers import BIN, ROOT, service_env

from app.chain.watcher import Watcher
from app.chain.watcher.lease import Lease
from app.data import leases as lease_rows

CONFIRMATIONS = 2
UNIT = 10**6
POLL = 1.0  # --poll-interval of the watchers in their own processes
LEASE = 10  # WATCHER_LEASE_SECONDS: the least allowed (app/db/interface.py, HUNG_SESSION_SECONDS)
BOUND = 2 * POLL + LEASE  # API.md: a failed watcher's transfers are credited within this


@pytest.fixture
def app_config():
    return {"PROCESS_TTL_SECONDS": 30 * 86400}


@pytest.fixture
def shop(app, client, runner, chain, clock, make_merchant, proxy):
    return open_shop(app, client, runner, chain, clock, make_merchant(),
                     confirmations=CONFIRMATIONS, rpc_url=proxy.url)


class WatcherProcess:
    """`watch-payments` in a process of its own, its output lines read as they come, each with the
    time.monotonic() it was read at."""

    def __init__(self, database):
        env = service_env(database, FLASK_WATCHER_LEASE_SECONDS=str(LEASE))
        self.process = subprocess.Popen(
            [str(BIN / "flask"), "--app", "app", "watch-payments", "--poll-interval", str(POLL),
             "--backoff-max", str(POLL)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.pid = self.process.pid
        self.lines = []  # (monotonic time, line)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def output(self, since=0.0):
        return "\n".join(line for at, line in self.lines if at >= since)

    def wait_for(self, text, timeout=60, since=0.0):
        """The time the first line holding `text` (read after `since`) was read."""
        deadline = time.monotonic() + timeout
        while True:
            found = [at for at, line in list(self.lines) if at >= since and text in line]
            if found:
                return found[0]
            assert self.process.poll() is None, \
                f"exited {self.process.returncode}:\n{self.output()}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout} s:\n{self.output()}"
            time.sleep(0.02)

    def stop(self):
        """SIGTERM (after SIGCONT, should it be stopped); the exit status."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        self._reader.join(timeout=5)
        return status


@pytest.fixture
def watchers(app):
    started = []

    def start():
        started.append(WatcherProcess(app.config["DATABASE"]))
        return started[-1]

    yield start
    for watcher in started:
        watcher.stop()


def _wait_until(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return time.monotonic()


def _scanned_block(app):
    conn = app.extensions["db"].connection()
    return conn.execute("SELECT scanned_block FROM networks WHERE id = ?", (NETWORK,)).fetchone()[0]


def test_a_second_watcher_says_it_is_not_needed_and_waits(shop, chain, watchers):
    first = watchers()
    first.wait_for(f"watch {NETWORK}: polling it")
    second = watchers()
    line_at = second.wait_for(f"watch {NETWORK}: not needed: watcher ")
    time.sleep(3 * POLL)
    assert second.process.poll() is None and first.process.poll() is None
    assert f"watch {NETWORK}: polling it" not in second.output()
    assert second.output(since=line_at + 0.001).count("not needed") == 0  # said once
    # the one that polls names itself in its line; the standby names that one
    holder = first.output().split("(lease ")[1].split(",")[0]
    assert f"not needed: watcher {holder} polls this network" in second.output()
    assert first.stop() == 0 and second.stop() == 0


def test_a_standby_makes_no_rpc_call_and_takes_over_a_killed_watcher(shop, chain, proxy, app,
                                                                    watchers):
    process_id, address = shop.order(3)
    first = watchers()
    first.wait_for(f"watch {NETWORK}: polling it")
    second = watchers()
    second.wait_for(f"watch {NETWORK}: not needed")
    time.sleep(2 * POLL)  # a few polls of the first

    first.process.kill()  # SIGKILL: no lease given up
    killed = time.monotonic()
    requests = proxy.requests
    chain.transfer(address, 3 * UNIT)
    chain.mine(CONFIRMATIONS)
    confirmed = time.monotonic()
    # The first renewed its lease at its last poll, at most a poll (and that poll's length) before
    # it died: until then the standby makes no call at all.
    time.sleep(max(0.0, killed + LEASE - 2 * POLL - 0.5 - time.monotonic()))
    assert proxy.requests == requests, proxy.calls
    assert shop.event_types(process_id) == []

    done = _wait_until(lambda: shop.event_types(process_id) == ["payment.completed"],
                       "credited by the standby", BOUND + 10)
    took_over = second.wait_for(f"watch {NETWORK}: polling it")
    logging.getLogger(__name__).warning("takeover after SIGKILL: %.2f s, credited %.2f s after"
                                        " the confirmations", took_over - killed, done - confirmed)
    assert done - max(killed, confirmed) <= BOUND, (done - max(killed, confirmed), second.output())
    assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed"]
    assert second.stop() == 0
    assert shop.event_types(process_id) == ["payment.completed"]


@pytest.mark.postgres_only  # the server's session timeouts; SQLite has one host and one writer
def test_a_watcher_hung_inside_a_write_transaction_holds_nobody_and_writes_nothing_when_woken(
        shop, chain, proxy, app, watchers):
    import psycopg

    process_id, address = shop.order(3)
    first = watchers()
    first.wait_for(f"watch {NETWORK}: polling it")
    second = watchers()
    second.wait_for(f"watch {NETWORK}: not needed")
    url = app.config["DATABASE"]
    positions = []  # the network's scan position, read every 50 ms: it never goes back
    sampling = threading.Event()

    def sample():
        with psycopg.connect(url, autocommit=True) as conn:
            while not sampling.is_set():
                positions.append(conn.execute("SELECT scanned_block FROM networks WHERE id = %s",
                                              (NETWORK,)).fetchone()[0])
                time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # The first watcher is caught inside a write transaction: the test holds the network's row, the
    # watcher's next poll waits for it inside its transaction (its lease renewed, its row locked
    # there), and it is stopped right then; the row is let go, the statement completes, and the
    # session is left idle inside the transaction of a stopped process.
    with psycopg.connect(url) as blocker:
        blocker.execute("SELECT 1 FROM networks WHERE id = %s FOR UPDATE", (NETWORK,))
        with psycopg.connect(url, autocommit=True) as observer:
            def waiting():
                return observer.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE 'UPDATE networks%%'").fetchall()

            _wait_until(waiting, "the watcher waiting for the network's row", 10)
            [(backend,)] = waiting()
            os.kill(first.pid, signal.SIGSTOP)
            hung = time.monotonic()
            blocker.rollback()
            _wait_until(lambda: observer.execute(
                "SELECT state FROM pg_stat_activity WHERE pid = %s", (backend,)).fetchone()
                == ("idle in transaction",), "the statement done, the transaction open", 5)
            assert observer.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                " WHERE l.pid = %s AND c.relname = 'watcher_leases' AND l.granted",
                (backend,)).fetchone()[0] >= 1  # the lease's row, held by the hung transaction

            chain.transfer(address, 3 * UNIT)
            chain.mine(CONFIRMATIONS)
            confirmed = time.monotonic()
            done = _wait_until(lambda: shop.event_types(process_id) == ["payment.completed"],
                               "credited by the standby", BOUND + 10)
            took_over = second.wait_for(f"watch {NETWORK}: polling it")
            logging.getLogger(__name__).warning(
                "takeover after SIGSTOP inside a transaction: %.2f s, credited %.2f s after the"
                " confirmations", took_over - hung, done - confirmed)
            assert done - max(hung, confirmed) <= BOUND, (done - hung, second.output())
            # the server ended the hung session (idle_in_transaction_session_timeout)
            assert observer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                    (backend,)).fetchone()[0] == 0

    events, transfers = shop.events(process_id), shop.transfers(process_id)
    woken = time.monotonic()
    os.kill(first.pid, signal.SIGCONT)
    first.wait_for(f"watch {NETWORK}: not needed: watcher ", since=woken, timeout=30)
    chain.mine(1)
    time.sleep(3 * POLL)  # the woken one's polls, had it any
    sampling.set()
    sampler.join()
    woke = first.output(since=woken)
    assert "transfers" not in woke and "polling it" not in woke, woke
    assert shop.events(process_id) == events and shop.transfers(process_id) == transfers
    assert [t["status"] for t in transfers] == ["confirmed"]
    assert positions == sorted(positions), positions
    assert first.stop() == 0 and second.stop() == 0


def test_a_watcher_that_lost_its_lease_mid_poll_records_nothing_and_calls_no_node(
        shop, chain, proxy, app, caplog):
    """In one process: another watcher takes the lease while this one's eth_getLogs is under way
    (as after a pause longer than the lease): the step it read is not recorded, and no node is
    asked again while the other holds it; once it is free again, this one takes it and counts the
    transfer once."""
    process_id, address = shop.order(3)
    chain.transfer(address, 3 * UNIT)
    db = app.extensions["db"]
    other = Lease(db, NETWORK, "another-host/1/cafe", 15)
    position = _scanned_block(app)

    def taken_over():
        with db.transaction() as conn:
            conn.execute("UPDATE watcher_leases SET expires_at = 0 WHERE network_id = ?",
                         (NETWORK,))
        assert other.take()
        db.release()

    with app.app_context(), Watcher.from_app(app) as watcher:
        proxy.before("eth_getLogs", 0, taken_over)
        caplog.set_level(logging.INFO, "app.chain.watcher")
        assert watcher.run_once() is True
        assert "eth_getLogs" not in proxy.hooks  # the other took it during the step's read
        assert shop.event_types(process_id) == [] and shop.transfers(process_id) == []
        assert _scanned_block(app) == position
        assert (f"watch {NETWORK}: watcher another-host/1/cafe took this network over; nothing"
                " more written here, standing by") in caplog.text
        holder = lease_rows.holder(db.connection(), NETWORK)
        assert holder[0] == "another-host/1/cafe" and holder[1] > 10

        requests = proxy.requests
        assert watcher.run_once() is True  # not needed: no call to the node
        assert proxy.requests == requests
        assert shop.event_types(process_id) == []

        other.release()
        chain.mine(CONFIRMATIONS)
        assert watcher.run_once() is True
    assert shop.event_types(process_id) == ["payment.completed"]
    assert [t["status"] for t in shop.transfers(process_id)] == ["confirmed"]
    assert lease_rows.holder(db.connection(), NETWORK) is None  # given up when the pass ended


def test_the_lease_is_taken_renewed_and_taken_over_only_once_expired(app):
    db = app.extensions["db"]
    with db.transaction() as conn:
        assert lease_rows.take(conn, "n1", "a", 30)
        assert lease_rows.take(conn, "n1", "a", 30)  # renewed
        assert not lease_rows.take(conn, "n1", "b", 30)
        assert lease_rows.renew(conn, "n1", "a", 30) and not lease_rows.renew(conn, "n1", "b", 30)
        conn.execute("UPDATE watcher_leases SET expires_at = expires_at - 31")
        assert lease_rows.take(conn, "n1", "b", 30)  # expired: taken over
        assert not lease_rows.renew(conn, "n1", "a", 30) \
            and not lease_rows.take(conn, "n1", "a", 30)
        owner, left = lease_rows.holder(conn, "n1")
        assert owner == "b" and 29 < left <= 30
        lease_rows.release(conn, "n1", "a")  # not a's: kept
        assert lease_rows.holder(conn, "n1")[0] == "b"
        lease_rows.release(conn, "n1", "b")
        assert lease_rows.holder(conn, "n1") is None
