"""One CSV export at a time per user (docs/console.md, "Exports"): a second one, from any session of
the same user, answers a 429 page with Retry-After while the first is being sent; the slot is free
again when it ends, when its client goes away, or, after a worker died holding it, once it made no
progress for a minute. Other users are unaffected."""
import pytest
from support.console import log_in, log_in_as


def session(app, runner, merchant, email, role="owner"):
    """A logged-in test client of its own (a browser of its own)."""
    if email not in runner.invoke(args=["users", "list"]).output:
        return log_in(runner, app.test_client(), merchant, email, role)
    return log_in_as(app.test_client(), email)


@pytest.fixture
def exports(app, runner, merchant, api):
    for amount in (1, 2, 3):
        api.preorder({"amount": amount})
    return lambda email, role="owner": session(app, runner, merchant, email, role)


def test_a_user_runs_one_export_at_a_time_over_all_its_sessions(exports, clock):
    first, second = exports("ann@shop.example"), exports("ann@shop.example")
    bob = exports("bob@shop.example", "viewer")
    running = first.get("/dashboard/processes.csv", buffered=False)
    assert running.status_code == 200  # started: its rows are not read yet
    refused = second.get("/dashboard/processes.csv")
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "60"
    assert "One export at a time" in refused.text
    other = bob.get("/dashboard/processes.csv")
    assert other.status_code == 200 and other.text.count("\r\n") == 4  # another user: unaffected
    assert len(running.get_data(as_text=True).split("\r\n")) == 5  # the header, 3 rows, the end
    running.close()  # ended (a client that goes away closes it too)
    again = second.get("/dashboard/processes.csv")
    assert again.status_code == 200 and again.text.count("\r\n") == 4


def test_an_export_whose_worker_died_frees_the_slot_after_a_minute(exports, clock):
    client = exports("ann@shop.example")
    abandoned = client.get("/dashboard/processes.csv", buffered=False)  # never read nor closed
    assert abandoned.status_code == 200
    assert client.get("/dashboard/processes.csv").status_code == 429
    clock.now += 59
    assert client.get("/dashboard/processes.csv").status_code == 429
    clock.now += 1  # a minute without progress
    taken = client.get("/dashboard/processes.csv")
    assert taken.status_code == 200 and taken.text.count("\r\n") == 4
    abandoned.close()  # the test client's: its request context leaves with this test
