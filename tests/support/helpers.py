"""Helpers shared by the tests: a fake clock, the merchant API as a backend calls it, the error
envelope check, and readers of what the service stored. Fixtures live in conftest.py."""
import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass

import pytest

from app.data import outbox as event_rows
from support import dbutil

START = 1_795_000_000  # 2026-11-18T11:06:40Z


class FakeClock:
    """An injectable clock: tests move time forward instead of sleeping."""

    def __init__(self, now=START):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class Api:
    """The merchant API as a merchant backend calls it."""

    def __init__(self, client, secret_key):
        self.client, self.secret_key = client, secret_key

    def headers(self, extra=None):
        headers = {"x-secret-key": self.secret_key}
        headers.update(extra or {})
        return headers

    def preorder_raw(self, body, content_type="application/json", headers=None):
        return self.client.post(
            "/payment-button/process/preorder",
            data=body,
            content_type=content_type,
            headers=self.headers(headers),
        )

    def preorder(self, body=None, headers=None):
        if body is None:
            body = {"amount": 19.99, "metadata": {"orderRef": "A-1"}}
        return self.preorder_raw(json.dumps(body), headers=headers)

    def get(self, process_id):
        return self.client.get(f"/payment-button/process/{process_id}", headers=self.headers())

    def list(self, query=""):
        return self.client.get(f"/payment-button/processes{query}", headers=self.headers())

    def cancel(self, process_id, headers=None):
        return self.client.post(
            f"/payment-button/process/{process_id}/cancel", headers=self.headers(headers)
        )


@dataclass
class Shop:
    keys: dict
    api: Api

    @property
    def id(self):
        return self.keys["merchantId"]

    @property
    def secret(self):
        return self.keys["webhookSecret"]

    def preorder(self, metadata='{"orderRef":"A-1"}', headers=None):
        """A pending process; returns (processId, the response body as text)."""
        response = self.api.preorder_raw(f'{{"amount": 19.99, "metadata": {metadata}}}',
                                         headers=headers)
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()["processId"], response.get_data(as_text=True)

    def cancelled(self, metadata='{"orderRef":"A-1"}'):
        process_id, body = self.preorder(metadata)
        response = self.api.cancel(process_id)
        assert response.status_code == 200, response.get_data(as_text=True)
        return process_id, body


def assert_error(response, status, code, message=None):
    """The API's error envelope, exactly."""
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    assert set(body) <= {"code", "message", "errors"}
    if message is not None:
        assert body["message"] == message
    return body


def events_of(runner, process_id):
    """The types of a process's webhook events, oldest first, as `processes show` lists them."""
    output = runner.invoke(args=["processes", "show", process_id]).output
    return [line.split()[1] for line in output.splitlines() if line.startswith("  evt_")]


def only_event(app, process_id):
    """A process's one event (the row, as stored)."""
    [event] = event_rows.for_process(app.extensions["db"].connection(), process_id)
    return event


def only_delivery(app, process_id):
    """A process's one event's one delivery (the row, as stored)."""
    [delivery] = only_event(app, process_id).deliveries
    return delivery


def attempts_of(app, event_id):
    return event_rows.attempts_of(app.extensions["db"].connection(), event_id)


def raw_metadata(body: str) -> str:
    """The metadata of a Process object or event body, as the exact text sent."""
    start = body.index('"metadata":') + len('"metadata":')
    end = body.index(',"livemode":', start)
    return body[start:end]


def count(database, sql, *params):
    return dbutil.scalar(database, sql, *params)


def body_json(received):
    return json.loads(received.body)


def unavailable(reason, ci_reason=None):
    """A test that cannot run here: skipped on a developer's machine, failed in CI (CI=true), where
    every test must run. `ci_reason`: what CI lacks, when it says more than `reason`."""
    if os.environ.get("CI") == "true":
        pytest.fail(ci_reason or f"{reason}: CI must run this test", pytrace=False)
    pytest.skip(reason)


def wait_until(condition, what, timeout=10.0):
    """Polls `condition` (a deadline against hangs, not a timed assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def running(worker):
    """`worker.run()` (the long-running loop) in a thread; stopped on exit, attempts in flight
    finished."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        worker.stop()
        thread.join(15)
    assert not thread.is_alive()
