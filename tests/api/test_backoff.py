"""The one backoff of the long-running commands (app/backoff.py): the webhook worker's idle polls
and the chain watcher's failing nodes."""
from app.backoff import doubling


def test_it_doubles_from_the_base_up_to_the_cap():
    assert [doubling(n, 0.2, 5.0) for n in range(1, 8)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert [doubling(n, 1.0, 60.0) for n in (1, 2, 6, 7)] == [1.0, 2.0, 32.0, 60.0]


def test_a_long_outage_stays_at_the_cap():
    # A node down for a day at 60 s a poll is 1,440 failures: 2 ** 1439 is past any float.
    assert doubling(1_440, 1.0, 60.0) == 60.0
    assert doubling(10**9, 0.2, 5.0) == 5.0
