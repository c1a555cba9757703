import pytest

from app.webhooks.schedule import (
    DEFAULT_SCHEDULE,
    MAX_RETRY_AFTER,
    next_attempt_delay,
    parse_retry_after,
    parse_schedule,
)


def test_default_schedule_matches_the_contract():
    assert DEFAULT_SCHEDULE == (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
    assert parse_schedule("0,5,300,1800,7200,18000,36000,36000") == DEFAULT_SCHEDULE


@pytest.mark.parametrize("value, expected", [
    ("0,5,300", (0, 5, 300)),
    (" 0 , 5 ,300 ", (0, 5, 300)),
    ("7", (7,)),
    ([0, 1, 2], (0, 1, 2)),
    ((10,), (10,)),
])
def test_parse_schedule_valid(value, expected):
    assert parse_schedule(value) == expected


@pytest.mark.parametrize("value", [
    "", " ", "0,,5", "0,5,", "-1", "1.5", "+5", "a", "0;5", "١",
    [], (), [-1], [1.5], ["5"], [True], None, 5,
])
def test_parse_schedule_invalid(value):
    with pytest.raises(ValueError):
        parse_schedule(value)


@pytest.mark.parametrize("attempts_made, retry_after, expected", [
    (0, None, 0),            # the first attempt: at once
    (1, None, 5),
    (2, None, 300),
    (7, None, 36000),
    (8, None, None),         # schedule exhausted: the event becomes failed
    (9, None, None),
    (1, 60, 60),             # Retry-After longer than the schedule wins
    (2, 60, 300),            # ... but never shortens it
    (1, 0, 5),
    (1, -5, 5),
    (1, 10**12, MAX_RETRY_AFTER),  # capped
    (8, 60, None),           # Retry-After does not extend the schedule
])
def test_next_attempt_delay(attempts_made, retry_after, expected):
    assert next_attempt_delay(DEFAULT_SCHEDULE, attempts_made, retry_after) == expected


def test_next_attempt_delay_rejects_negative_attempts():
    with pytest.raises(ValueError):
        next_attempt_delay(DEFAULT_SCHEDULE, -1, None)


@pytest.mark.parametrize("value, expected", [
    ("0", 0), (" 30 ", 30), ("Sun, 06 Nov 1994 08:49:37 GMT", 0),
    ("Sun, 06 Nov 1994 08:50:37 GMT", 60), ("Sun, 06 Nov 1994 08:49:37", None),
    ("-5", None), ("1.5", None), ("", None), ("٣", None),
])
def test_parse_retry_after(value, expected):
    now = 784111777  # 1994-11-06T08:49:37Z
    assert parse_retry_after(value, now=now) == expected
