"""Shared by the webhook worker tests: a shop whose webhooks go to a real local receiver."""
import json
import time
from dataclasses import dataclass

import dbutil
import pytest

from app.data import events as event_rows
from app.webhooks.worker import Worker
from conftest import Api, FakeClock


@pytest.fixture
def clock():
    """Starts at the real time: standardwebhooks refuses timestamps more than 5 minutes off."""
    return FakeClock(int(time.time()))


@pytest.fixture
def worker(app):
    with Worker.from_app(app, concurrency=4) as w:
        yield w


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


@pytest.fixture
def make_shop(client, make_merchant):
    def make(webhook_url=None, live=False):
        keys = make_merchant(webhook_url=webhook_url, live=live)
        return Shop(keys, Api(client, keys["secretKey"]))

    return make


@pytest.fixture
def shop(make_shop, receiver):
    return make_shop(webhook_url=receiver.url("/hooks/preorder"))


def events_of(app, process_id):
    return event_rows.for_process(app.extensions["db"].connection(), process_id)


def only_event(app, process_id):
    [event] = events_of(app, process_id)
    return event


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
