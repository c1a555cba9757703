"""`flask --app app events ...` and `deliver-webhooks` through Flask's CLI runner."""
import re
import time

import pytest
from support.helpers import FakeClock, only_delivery, only_event
from support.receiver import Reply

from app.data import outbox as event_rows
from app.domain.representation import iso


@pytest.fixture
def clock():
    """Starts at the real time: standardwebhooks refuses timestamps more than 5 minutes off."""
    return FakeClock(int(time.time()))


def invoke(runner, *args):
    return runner.invoke(args=list(args))


def test_list_filters_by_status_and_merchant(app, make_shop, receiver, worker, runner):
    one = make_shop(webhook_url=receiver.url())
    two = make_shop(webhook_url=None)
    delivered, _ = one.cancelled()
    no_endpoint, _ = two.cancelled()
    worker.run_once()
    pending, _ = one.cancelled()
    ids = {p: only_event(app, p).id for p in (delivered, no_endpoint, pending)}

    output = invoke(runner, "events", "list").output
    lines = output.splitlines()
    assert lines[0].split() == ["EVENT", "ID", "TYPE", "STATUS", "ATTEMPTS", "NEXT", "ENDPOINTS",
                                "MERCHANT", "PROCESS", "CREATED"]
    assert [line.split()[0] for line in lines[1:]] == [ids[pending], ids[no_endpoint],
                                                       ids[delivered]]
    assert lines[3].split()[1:4] == ["process.cancelled", "delivered", "1"]

    def listed(*args):
        return [line.split()[0]
                for line in invoke(runner, "events", "list", *args).output.splitlines()[1:]]

    assert listed("--status", "no_endpoint") == [ids[no_endpoint]]
    assert listed("--status", "pending", "--merchant", one.id) == [ids[pending]]
    assert listed("--merchant", two.id) == [ids[no_endpoint]]
    assert listed("--status", "failed") == []
    refused = invoke(runner, "events", "list", "--status", "lost").output
    assert ("'lost' is not one of 'pending', 'retrying', 'failing', 'delivered', 'failed',"
            " 'cancelled', 'no_endpoint'") in refused


def test_show_prints_the_body_and_every_attempt(app, shop, receiver, worker, clock, runner):
    receiver.reply(Reply(status=503, headers={"Retry-After": "30"}))
    process_id, _ = shop.cancelled('{"orderRef":"A-7"}')
    worker.run_once()
    first = clock.now
    clock.advance(30)
    worker.run_once()
    event = only_event(app, process_id)

    output = invoke(runner, "events", "show", event.id).output
    [endpoint] = [d.endpoint_id for d in event.deliveries]
    head, attempts = output.split(f"delivery to {endpoint}: delivered, 2 attempt(s) since the last"
                                  f" replay, next: delivered {iso(first + 30)}\n")
    assert f"event:     {event.id}\n" in head
    assert "status:    delivered\n" in head
    assert f"process:   {process_id}\n" in head
    assert f"payload:\n{event.payload}\n" in head  # the exact bytes sent
    rows = attempts.splitlines()
    assert rows[0].split() == ["#", "TIME", "STATUS", "RESULT", "DURATION", "URL"]
    assert re.fullmatch(rf"1 +{iso(first)} +503 +HTTP 503 +\d+ ms"
                        rf" +{re.escape(receiver.url('/hooks/preorder'))}", rows[1])
    assert re.fullmatch(rf"2 +{iso(first + 30)} +200 +ok +\d+ ms +\S+", rows[2])


def test_show_unknown_event(runner):
    result = invoke(runner, "events", "show", "evt_nope")
    assert (result.exit_code, result.output) == (
        1, f"Error: No event evt_nope in {runner.app.config['DATABASE']}.\n")


@pytest.mark.parametrize("args, message", [
    ([], "Give either EVENT_ID or --failed/--cancelled/--no-endpoint."),
    (["evt_1", "--failed"], "Give either EVENT_ID or --failed/--cancelled/--no-endpoint."),
    (["evt_1", "--merchant", "mer_1"],
     "--merchant and --since go with --failed/--cancelled/--no-endpoint."),
    (["--endpoint", "we_1", "--failed"], "--endpoint goes with EVENT_ID."),
    (["--failed", "--since", "yesterday"], "not an ISO 8601 time"),
])
def test_replay_usage_errors(runner, args, message):
    result = invoke(runner, "events", "replay", *args)
    assert result.exit_code == 2 and message in result.output


def test_replay_unknown_event(runner):
    result = invoke(runner, "events", "replay", "evt_nope")
    assert (result.exit_code, result.output) == (
        1, f"Error: No event evt_nope in {runner.app.config['DATABASE']}.\n")


def test_replay_refuses_an_event_being_attempted(app, shop, clock, runner, leases_run_out):
    process_id, _ = shop.cancelled()
    with app.extensions["db"].transaction() as conn:
        event_rows.claim_due(conn, owner="busy", now=clock.now, lease_seconds=2, limit=1)
    event = only_event(app, process_id)
    result = invoke(runner, "events", "replay", event.id)
    assert (result.exit_code, result.output) == (
        1, f"Error: Event {event.id} has nothing to re-queue now: its deliveries are being"
           " attempted (try again shortly) or their endpoints are disabled.\n")
    leases_run_out(2)  # the lease ran out: its worker is presumed dead
    assert invoke(runner, "events", "replay", event.id).exit_code == 0
    assert only_delivery(app, process_id).lease_owner is None


def test_replay_a_delivered_event_sends_it_again(app, shop, receiver, worker, clock, runner):
    process_id, _ = shop.cancelled()
    worker.run_once()
    event = only_event(app, process_id)
    clock.advance(10)
    assert invoke(runner, "events", "replay", event.id).exit_code == 0
    assert (only_event(app, process_id).status, only_event(app, process_id).delivered_at) == (
        "pending", None)
    worker.run_once()
    first, second = receiver.wait_for(2)
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == event.id
    assert first.body == second.body
    assert only_event(app, process_id).delivered_at == clock.now


@pytest.mark.parametrize("app_config", [{"WEBHOOK_RETRY_SCHEDULE": "0"}])
def test_replay_since_accepts_offsets_and_naive_utc(app, shop, receiver, worker, clock, runner):
    receiver.default = Reply(status=410)
    process_id, _ = shop.cancelled()
    worker.run_once()
    assert only_event(app, process_id).status == "failed"
    after = iso(clock.now + 1)
    an_hour_earlier = iso(clock.now + 1)[:-1] + "+01:00"
    for since, count in [(after, 0), (after.replace("Z", "+00:00"), 0),
                         (after.rstrip("Z").replace("T", " "), 0), (an_hour_earlier, 1)]:
        result = invoke(runner, "events", "replay", "--failed", "--since", since)
        assert result.exit_code == 0, result.output
        assert result.output.startswith(f"Re-queued {count} event"), (since, result.output)


def test_deliver_webhooks_once_through_the_cli(app, shop, receiver, runner):
    shop.cancelled()
    shop.cancelled()
    result = invoke(runner, "deliver-webhooks", "--once", "--batch-size", "1", "--concurrency", "2")
    assert result.exit_code == 0, result.output
    assert len(receiver.wait_for(2)) == 2
    assert invoke(runner, "events", "list", "--status", "pending").output.count("\n") == 1


@pytest.mark.parametrize("args", [["--batch-size", "0"], ["--concurrency", "0"],
                                  ["--poll-max", "0.1"]])
def test_deliver_webhooks_option_ranges(runner, args):
    assert invoke(runner, "deliver-webhooks", "--once", *args).exit_code == 2


def test_a_test_event_is_listed_without_a_process_and_never_replayed(app, make_shop, receiver,
                                                                       worker, runner, clock):
    from app.data import merchants as merchant_rows
    from app.domain import endpoints, outbox

    shop = make_shop(webhook_url=receiver.url())
    merchant = merchant_rows.get(app.extensions["db"].connection(), shop.id)
    [endpoint] = endpoints.list_of(app.extensions["db"], shop.id)
    event_id = outbox.queue_test(app.extensions["db"], merchant, endpoint, clock())
    worker.run_once()
    [line] = [line for line in invoke(runner, "events", "list").output.splitlines()
              if event_id in line]
    assert line.split()[1:4] == ["webhook.test", "delivered", "1"]
    assert re.search(rf"{shop.id}\s+-\s", line)  # no process
    assert "process:   - (a test event)" in invoke(runner, "events", "show", event_id).output
    refused = invoke(runner, "events", "replay", event_id)
    assert refused.exit_code == 1
    assert f"Event {event_id} is a test event, sent once: send another instead." in refused.output
    assert invoke(runner, "events", "replay", "--failed").output == (
        "Re-queued 0 events for delivery now.\n")
