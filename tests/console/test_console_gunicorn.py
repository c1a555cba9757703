"""The console through a real gunicorn: no page waits on a merchant's endpoint (test events hang
in the delivery worker, never in a web worker), and the CSV export of the whole list, cut or whole,
whatever the worker timeout (docs/console.md)."""
import contextlib
import json
import re
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from app import create_app
from support.receiver import Reply, receiver  # noqa: F401  (fixture)
from support.servers import BIN, ROOT, gunicorn, service_env

PASSWORD = "correct horse battery"
PREORDER = "/payment-button/process/preorder"


def csrf_of(html):
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def _setup(database, merchants, webhook_url=None):
    """init-db, `merchants` merchants (webhooks to `webhook_url`) each with an owner
    owner<i>@shop.example, through the CLI in this process; returns their keys."""
    app = create_app({"DATABASE": database, "DASHBOARD_PASSWORD_HASH": "pbkdf2:sha256:1000"})
    runner = app.test_cli_runner()
    assert runner.invoke(args=["init-db"]).exit_code == 0
    keys = []
    for i in range(merchants):
        args = ["merchants", "create", "--name", f"Shop {i}", "--json"]
        result = runner.invoke(args=args + (["--webhook-url", webhook_url] if webhook_url else []))
        keys.append(json.loads(result.stdout))
        result = runner.invoke(args=["users", "create", f"owner{i}@shop.example", "--merchant",
                                     keys[-1]["merchantId"]], input=PASSWORD + "\n")
        assert result.exit_code == 0, result.output
    app.extensions["db"].close_all()
    return keys


def log_in(base, email):
    session = requests.Session()
    page = session.get(base + "/dashboard/login", timeout=30)
    response = session.post(base + "/dashboard/login", allow_redirects=False, timeout=30,
                            data={"email": email, "password": PASSWORD, "csrf_token": csrf_of(page.text)})
    assert response.status_code == 303, response.text
    return session


@contextlib.contextmanager
def delivery_worker(env, log_path):
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(BIN / "flask"), "--app", "app", "deliver-webhooks"], cwd=ROOT,
                                env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def test_five_test_events_that_hang_hold_no_web_worker(tmp_path, make_database, receiver):
    # Two sync workers, five owners each sending a test event to an endpoint that never answers
    # until the test lets it: sent by the web request (as before), they held both workers for the
    # webhook timeout and another merchant's preorders waited. Queued, the pages answer at once,
    # the delivery worker holds the five attempts, and the preorders are answered meanwhile.
    gate = threading.Event()
    receiver.default = Reply(gate=gate)
    database = make_database("tests", schema=True)
    keys = _setup(database, 6, webhook_url=receiver.url("/hook"))
    env = service_env(database, FLASK_WEBHOOK_TIMEOUT_SECONDS=60, FLASK_WEBHOOK_LEASE_SECONDS=90)
    try:
        with gunicorn(env, tmp_path / "gunicorn.log", workers=2) as base, \
                delivery_worker(env, tmp_path / "worker.log"):
            sessions = [log_in(base, f"owner{i}@shop.example") for i in range(5)]

            def send_test(session):
                page = session.get(base + "/dashboard/webhooks", timeout=10)
                return session.post(base + "/dashboard/webhooks/test", timeout=10,
                                    data={"csrf_token": csrf_of(page.text)})

            with ThreadPoolExecutor(5) as pool:
                sent = list(pool.map(send_test, sessions))
            assert [r.status_code for r in sent] == [200] * 5
            assert all("Test event queued" in r.text for r in sent)
            receiver.wait_for(5, timeout=30)  # the worker is attempting all five, which hang

            other = keys[5]["secretKey"]
            answers = [requests.post(base + PREORDER, json={"amount": 5}, timeout=10,
                                     headers={"x-secret-key": other}).status_code for _ in range(20)]
            pages = [s.get(base + "/dashboard/webhooks", timeout=10) for s in sessions]
            assert not gate.is_set() and len(receiver.requests) == 5  # still hanging
            assert answers == [200] * 20
            assert all("queued for the delivery worker" in p.text for p in pages)

            gate.set()  # the endpoint answers: each page shows the outcome when it comes
            deadline = time.monotonic() + 30
            for session in sessions:
                while not re.search(r"/hook: HTTP 200\s+in \d+ ms",
                                    session.get(base + "/dashboard/webhooks", timeout=10).text):
                    assert time.monotonic() < deadline, "no outcome shown"
                    time.sleep(0.1)
    finally:
        gate.set()
    assert "Traceback" not in (tmp_path / "gunicorn.log").read_text()
