"""Real worker processes (`flask --app app deliver-webhooks`) on one database (of the backend under
test), against a real local receiver: two workers at once, SIGKILL and SIGTERM mid-batch,
overlapping cron runs."""
import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import time

import pytest
from standardwebhooks.webhooks import Webhook
from support.helpers import count
from support.receiver import Reply
from support.servers import BIN, ROOT, create_merchant, flask, service_env

from app import create_app
from app.cli.common import STOP_AGAIN_SECONDS
from app.data import merchants as merchant_rows
from app.domain import processes as process_service

FAST_DISK = {"FLASK_SQLITE_SYNCHRONOUS": "NORMAL"}  # WAL + NORMAL: crash-safe, no fsync per commit


class Outbox:
    """A database file with a merchant whose webhooks go to `receiver`, and helpers to fill it."""

    def __init__(self, tmp_path, database, receiver, **settings):
        self.tmp_path = tmp_path
        self.database = database
        self.env = service_env(self.database, **FAST_DISK, **settings)
        flask(self.env, "init-db")
        self.keys = create_merchant(self.env, "--webhook-url", receiver.url("/hook"))
        self.app = create_app({"DATABASE": self.database, "SQLITE_SYNCHRONOUS": "NORMAL"})
        self.db = self.app.extensions["db"]
        self.merchant = merchant_rows.get(self.db.connection(), self.keys["merchantId"])
        self.metadata = {}

    def past_expiry(self, n):
        """n pending processes already past their expiry (not yet swept); returns their ids."""
        then = int(time.time()) - 3600
        ids = []
        for i in range(n):
            metadata = json.dumps({"orderRef": f"A-{i}", "email": f"b{i}@example.com"},
                                  separators=(",", ":"))
            body, _ = process_service.create_preorder(
                self.db, self.merchant, amount="19.99", metadata=metadata, now=then, ttl=60)
            process_id = json.loads(body)["processId"]
            self.metadata[process_id] = metadata
            ids.append(process_id)
        return ids

    def due_events(self, n):
        """n process.expired events, due now."""
        self.past_expiry(n)
        assert process_service.expire_due(self.db, time.time()) == n
        return self.event_ids()

    def event_ids(self):
        return set(self.rows("SELECT id FROM events"))

    def rows(self, sql):
        conn = self.db.connection()
        return [row[0] for row in conn.execute(sql)]

    def status_count(self, status):
        return count(self.database, "SELECT count(*) FROM deliveries WHERE status = ?", status)

    @contextlib.contextmanager
    def worker(self, *args, name="worker"):
        """A `deliver-webhooks` process; stopped with SIGKILL if the test left it running."""
        log_path = self.tmp_path / f"{name}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(
                [str(BIN / "flask"), "--app", "app", "deliver-webhooks", "--poll-max", "0.5",
                 *args],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        proc.log_path = log_path
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
            self.app.extensions["db"].close_all()

    def once(self, *args):
        return flask(self.env, "deliver-webhooks", "--once", *args)

    def check_deliveries(self, received):
        """Every request is a verifiable webhook of one of our events, metadata intact."""
        hook = Webhook(self.keys["webhookSecret"])
        for request in received:
            body = hook.verify(request.body, request.headers)
            process_id = body["data"]["processId"]
            raw = request.body.decode()
            assert raw[raw.index('"metadata":') + 11:raw.index(',"livemode"')] == \
                self.metadata[process_id]


def wait_until(condition, timeout=30, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def ids_received(receiver):
    return collections.Counter(r.headers["webhook-id"] for r in receiver.requests)


def test_two_workers_over_500_due_events_deliver_each_exactly_once(make_database, tmp_path,
                                                                   receiver):
    outbox = Outbox(tmp_path, make_database("outbox"), receiver)
    event_ids = outbox.due_events(500)
    options = ("--concurrency", "8", "--batch-size", "25")
    with outbox.worker(*options, name="one") as one, outbox.worker(*options, name="two") as two:
        wait_until(lambda: outbox.status_count("delivered") == 500, what="500 deliveries")
        for proc in (one, two):
            proc.send_signal(signal.SIGTERM)
        assert [one.wait(15), two.wait(15)] == [0, 0]

    received = ids_received(receiver)
    logs = [p.log_path.read_text() for p in (one, two)]
    unusual = [line for log in logs for line in log.splitlines() if "(delivered)" not in line]
    assert set(received) == event_ids
    assert set(received.values()) == {1}, unusual  # each exactly once
    assert count(outbox.database, "SELECT count(*) FROM delivery_attempts") == 500
    outbox.check_deliveries(receiver.requests)
    assert sum(log.count(" (delivered)") for log in logs) == 500
    assert all("Traceback" not in log and "database is locked" not in log for log in logs)


def test_sigkill_mid_batch_then_a_second_worker_loses_nothing(make_database, tmp_path, receiver):
    # Short lease so the killed worker's claims expire within seconds.
    outbox = Outbox(tmp_path, make_database("outbox"), receiver, FLASK_WEBHOOK_LEASE_SECONDS=3,
                    FLASK_WEBHOOK_TIMEOUT_SECONDS=1)
    event_ids = outbox.due_events(100)
    receiver.default = Reply(delay=0.2)
    with outbox.worker("--concurrency", "4", "--batch-size", "20", name="killed") as killed:
        receiver.wait_for(8)
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(10) == -signal.SIGKILL
    leased = count(outbox.database, "SELECT count(*) FROM deliveries WHERE status = 'pending'"
                                    " AND lease_owner IS NOT NULL")
    assert leased > 0  # it died holding claims
    receiver.default = Reply()
    with outbox.worker("--concurrency", "8", name="second") as second:
        wait_until(lambda: outbox.status_count("delivered") == 100, what="every event delivered")
        second.send_signal(signal.SIGTERM)
        assert second.wait(15) == 0

    received = ids_received(receiver)
    assert set(received) == event_ids  # every event at least once, none lost
    outbox.check_deliveries(receiver.requests)


def test_with_default_settings_a_killed_workers_claims_are_delivered_by_another_within_15_s(
        make_database, tmp_path, receiver):
    """Two workers share the outbox; one is SIGKILLed holding claims. With the default lease and
    idle poll, the other delivers every one of them within 15 s of the kill, each once at least."""
    outbox = Outbox(tmp_path, make_database("outbox"), receiver)
    event_ids = outbox.due_events(40)
    receiver.default = Reply(delay=0.3)
    defaults = ("--poll-max", "1")  # the command's default, over the helper's shorter one
    with outbox.worker("--concurrency", "4", "--batch-size", "20", *defaults,
                       name="victim") as victim:
        receiver.wait_for(4)
        victim.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        assert victim.wait(10) == -signal.SIGKILL
    held = count(outbox.database, "SELECT count(*) FROM deliveries WHERE status = 'pending'"
                                  " AND lease_owner IS NOT NULL")
    assert held > 0  # it died holding claims
    receiver.default = Reply()
    with outbox.worker("--concurrency", "8", *defaults, name="survivor") as survivor:
        wait_until(lambda: outbox.status_count("delivered") == 40, timeout=30,
                   what="every event delivered")
        took = time.monotonic() - killed_at
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(15) == 0
    print(f"takeover: {held} claims of a killed worker delivered {took:.2f} s after the kill")
    assert took <= 15
    assert set(ids_received(receiver)) == event_ids


def test_sigterm_mid_batch_exits_0_and_loses_nothing(make_database, tmp_path, receiver):
    outbox = Outbox(tmp_path, make_database("outbox"), receiver)
    event_ids = outbox.due_events(60)
    receiver.default = Reply(delay=0.3)
    with outbox.worker("--concurrency", "4", "--batch-size", "20", name="stopped") as stopped:
        receiver.wait_for(6)
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(15) == 0

    delivered = outbox.status_count("delivered")
    assert 6 <= delivered < 60  # stopped mid-batch; the attempts in flight were finished
    assert delivered == len(receiver.requests)  # ...and each recorded
    assert outbox.rows("SELECT count(*) FROM deliveries WHERE lease_owner IS NOT NULL") == [0]
    assert "stopped" in stopped.log_path.read_text()

    receiver.default = Reply()
    assert outbox.once("--concurrency", "8").returncode == 0
    assert outbox.status_count("delivered") == 60
    received = ids_received(receiver)
    assert set(received) == event_ids and set(received.values()) == {1}


def test_a_second_signal_exits_at_once(make_database, tmp_path, receiver):
    outbox = Outbox(tmp_path, make_database("outbox"), receiver, FLASK_WEBHOOK_TIMEOUT_SECONDS=20,
                    FLASK_WEBHOOK_LEASE_SECONDS=30)
    outbox.due_events(1)
    receiver.default = Reply(delay=60)  # held until the receiver stops
    with outbox.worker(name="impatient") as proc:
        receiver.wait_for(1)
        proc.send_signal(signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(STOP_AGAIN_SECONDS + 0.2)  # the first one waits for the attempt in flight
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 128 + signal.SIGTERM
    # Its lease is left behind, as after a crash: the event is still pending, not lost.
    assert outbox.rows("SELECT status || ' ' || CASE WHEN lease_owner IS NULL THEN 0 ELSE 1 END"
                       " FROM deliveries") == ["pending 1"]


def make_run_script():
    """The Makefile's `run` recipe from the worker's start on, as make would run it (`make -n`):
    its traps verbatim; the worker polls every 0.5 s at most, the EXIT trap also prints the
    worker's exit status, and `sleep 600` stands for `flask run` in the foreground."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    printed = subprocess.run(["make", "-n", "--no-print-directory", "run", f"BIN={BIN}"], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if " deliver-webhooks & worker=$!;" in line)
    recipe = lines[start:]
    assert recipe[-1].startswith(f"FLASK_DEMO_SHOP=1 {BIN / 'flask'} --app app run "), recipe
    assert sum(line.lstrip().startswith("trap ") for line in recipe) == 2, recipe
    script = "\n".join(recipe[:-1] + ["sleep 600"])
    script = script.replace(" deliver-webhooks & ", " deliver-webhooks --poll-max 0.5 & ", 1)
    script, traps = re.subn(r"trap '([^']*)' EXIT;", r"trap '\1; echo worker exited $?' EXIT;",
                            script)
    assert traps == 1, script
    return script


def test_a_group_wide_sigterm_and_the_scripts_own_still_drain(make_database, tmp_path, receiver):
    # `make run`'s recipe: the worker is a background job whose script sends it SIGTERM on exit.
    # Stopping the whole process group (a service manager, `kill -TERM -PGID`) delivers the group's
    # SIGTERM and then the script's own within milliseconds: one stop, so the worker still finishes
    # and records the attempt in flight, and exits 0.
    outbox = Outbox(tmp_path, make_database("outbox"), receiver)
    outbox.due_events(1)
    receiver.default = Reply(delay=2)
    log_path = tmp_path / "make-run.log"
    script = make_run_script()
    with open(log_path, "w") as log:
        shell = subprocess.Popen(["bash", "-c", script], cwd=ROOT, env=outbox.env, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
    try:
        receiver.wait_for(1)
        os.killpg(shell.pid, signal.SIGTERM)
        assert shell.wait(30) == 130
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGKILL)
    assert "worker exited 0" in log_path.read_text()
    assert outbox.status_count("delivered") == 1  # the attempt in flight finished and was recorded


def test_overlapping_cron_runs_sweep_and_deliver_each_event_once(make_database, tmp_path, receiver):
    outbox = Outbox(tmp_path, make_database("outbox"), receiver)
    process_ids = outbox.past_expiry(30)
    runs = [subprocess.Popen([str(BIN / "flask"), "--app", "app", "deliver-webhooks", "--once",
                              "--batch-size", "5"], cwd=ROOT, env=outbox.env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=60)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs

    assert outbox.rows("SELECT count(*) FROM events WHERE type = 'process.expired'") == [30]
    assert outbox.rows("SELECT count(DISTINCT process_id) FROM events") == [30]
    assert outbox.status_count("delivered") == 30
    received = ids_received(receiver)
    assert len(received) == 30 and set(received.values()) == {1}
    outbox.check_deliveries(receiver.requests)
    assert {json.loads(r.body)["data"]["processId"] for r in receiver.requests} == set(process_ids)
