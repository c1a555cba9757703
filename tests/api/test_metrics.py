"""GET /metrics (Prometheus text format, parsed with prometheus_client's parser) and the backlog in
/healthz: exact figures as processes, events and attempts go through their states."""
import requests
from prometheus_client.parser import text_string_to_metric_families
from support.helpers import assert_error
from support.servers import create_merchant, flask, gunicorn, service_env

from app.data import outbox as event_rows
from app.worker import Worker


def metrics(client):
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    found = {}
    for family in text_string_to_metric_families(response.get_data(as_text=True)):
        for sample in family.samples:
            labels = tuple(sorted(sample.labels.values()))
            found[(sample.name, *labels)] = sample.value
    return found


def figures(found, name):
    return {key[1]: value for key, value in found.items() if key[0] == name and len(key) == 2}


def expect(client, *, backlog, age, events, deliveries, processes):
    found = metrics(client)
    assert figures(found, "preorder_outbox_backlog") == backlog
    assert found[("preorder_outbox_oldest_due_age_seconds",)] == age
    assert figures(found, "preorder_webhook_events") == {}  # replaced by the backlog's states
    assert sum(backlog.values()) == events["pending"]
    assert figures(found, "preorder_webhook_deliveries_total") == deliveries
    assert figures(found, "preorder_processes") == processes
    assert len(found) == 3 + 1 + 3 + 4  # nothing else
    pending = sum(backlog.values())
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok", "outbox": {
        "pending": pending, "due": backlog["due"], "oldestDueAgeSeconds": age}, "networks": {}}


def test_metrics_follow_processes_events_and_deliveries(app, client, make_shop, receiver, clock):
    zero = {"delivered": 0, "failed": 0, "cancelled": 0}
    expect(client, backlog={"due": 0, "in_flight": 0, "retrying": 0}, age=0,
           events={"pending": 0, **zero}, deliveries=zero,
           processes={"pending": 0, "completed": 0, "cancelled": 0, "expired": 0})

    api = make_shop(webhook_url=receiver.url()).api
    ids = [api.preorder().get_json()["processId"] for _ in range(3)]
    for process_id in ids[:2]:
        assert api.cancel(process_id).status_code == 200
    clock.advance(7)
    expect(client, backlog={"due": 2, "in_flight": 0, "retrying": 0}, age=7,
           events={"pending": 2, **zero}, deliveries=zero,
           processes={"pending": 1, "completed": 0, "cancelled": 2, "expired": 0})

    # A worker's lease makes one of them in flight; the oldest due age still counts it.
    db = app.extensions["db"]
    with db.transaction() as conn:
        [leased] = event_rows.claim_due(conn, owner="w", now=clock(), lease_seconds=60, limit=1)
    expect(client, backlog={"due": 1, "in_flight": 1, "retrying": 0}, age=7,
           events={"pending": 2, **zero}, deliveries=zero,
           processes={"pending": 1, "completed": 0, "cancelled": 2, "expired": 0})
    with db.transaction() as conn:
        event_rows.release(conn, [leased.seq], "w")

    # Past its expiry the third process counts as expired before the sweep, as the API shows it.
    clock.advance(1800)
    expect(client, backlog={"due": 2, "in_flight": 0, "retrying": 0}, age=1807,
           events={"pending": 2, **zero}, deliveries=zero,
           processes={"pending": 0, "completed": 0, "cancelled": 2, "expired": 1})

    # The worker sweeps (one more event) and delivers all three.
    with Worker.from_app(app) as worker:
        worker.run_once()
    receiver.wait_for(3)
    delivered = {"delivered": 3, "failed": 0, "cancelled": 0}
    expect(client, backlog={"due": 0, "in_flight": 0, "retrying": 0}, age=0,
           events={"pending": 0, **delivered}, deliveries=delivered,
           processes={"pending": 0, "completed": 0, "cancelled": 2, "expired": 1})

    # An event of a merchant without an endpoint has no delivery to count.
    nowhere = make_shop(webhook_url=None).api
    assert nowhere.cancel(nowhere.preorder().get_json()["processId"]).status_code == 200
    expect(client, backlog={"due": 0, "in_flight": 0, "retrying": 0}, age=0,
           events={"pending": 0, **delivered}, deliveries=delivered,
           processes={"pending": 0, "completed": 0, "cancelled": 3, "expired": 1})

    # A refused connection is a failed attempt: the delivery waits for its retry (not due).
    closed = make_shop(webhook_url="http://127.0.0.1:9/hook").api
    assert closed.cancel(closed.preorder().get_json()["processId"]).status_code == 200
    with Worker.from_app(app) as worker:
        worker.run_once()
    expect(client, backlog={"due": 0, "in_flight": 0, "retrying": 1}, age=0,
           events={"pending": 1, **delivered}, deliveries=delivered,
           processes={"pending": 0, "completed": 0, "cancelled": 4, "expired": 1})
    clock.advance(5 + 3)
    expect(client, backlog={"due": 1, "in_flight": 0, "retrying": 0}, age=3,
           events={"pending": 1, **delivered}, deliveries=delivered,
           processes={"pending": 0, "completed": 0, "cancelled": 4, "expired": 1})


def test_metrics_methods(client):
    response = client.post("/metrics")
    assert response.status_code == 405
    assert response.get_json()["code"] == "method_not_allowed"


def test_every_gunicorn_worker_gives_the_same_figures(tmp_path):
    """Counted from the database on each scrape: 40 scrapes over fresh connections to 4 workers
    show one text, with the figures of what was done through the API and the worker."""
    env = service_env(tmp_path / "metrics.sqlite3")
    flask(env, "init-db")
    key = create_merchant(env)["secretKey"]
    with gunicorn(env, tmp_path / "gunicorn.log", workers=4) as base:
        headers = {"x-secret-key": key}
        ids = [requests.post(base + "/payment-button/process/preorder", json={"amount": 5},
                             headers=headers, timeout=30).json()["processId"] for _ in range(5)]
        for process_id in ids[:2]:
            assert requests.post(f"{base}/payment-button/process/{process_id}/cancel",
                                 headers=headers, timeout=30).status_code == 200
        flask(env, "deliver-webhooks", "--once")  # no webhook endpoint: nothing to deliver
        texts = {requests.get(base + "/metrics", headers={"Connection": "close"}, timeout=30).text
                 for _ in range(40)}
    assert len(texts) == 1
    found = {}
    for family in text_string_to_metric_families(texts.pop()):
        for sample in family.samples:
            found[(sample.name, *sample.labels.values())] = sample.value
    assert found[("preorder_processes", "pending")] == 3
    assert found[("preorder_processes", "cancelled")] == 2
    assert found[("preorder_webhook_deliveries_total", "delivered")] == 0
    assert found[("preorder_outbox_backlog", "due")] == 0


def test_metrics_on_a_database_without_the_schema(tmp_path, clock):
    from app import create_app

    app = create_app({"TESTING": True, "DATABASE": str(tmp_path / "typo.sqlite3"), "CLOCK": clock})
    assert_error(app.test_client().get("/metrics"), 503, "unavailable",
                 "The database does not answer.")
    app.extensions["db"].close_all()
