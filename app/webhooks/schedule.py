"""Delivery timing: the retry schedule, a receiver's Retry-After, the lease margin. Pure: config.py
validates settings with it and the worker applies it; it imports neither."""

from __future__ import annotations

import re
import time
from email.utils import parsedate_to_datetime

# Seconds before attempt 1, 2, ...: at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h.
DEFAULT_SCHEDULE = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)

# A receiver's Retry-After is honoured up to this many seconds.
MAX_RETRY_AFTER = 24 * 3600

# An attempt starts only while this much of its lease is left beyond WEBHOOK_TIMEOUT_SECONDS, so
# resolving the name and recording the result also happen under the lease.
LEASE_MARGIN_SECONDS = 1

_DIGITS = re.compile(r"[0-9]+")


def parse_schedule(value: str | list | tuple) -> tuple[int, ...]:
    """``"0,5,300"`` or ``[0, 5, 300]`` -> ``(0, 5, 300)``; ValueError if invalid."""
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
        if items == [""]:
            raise ValueError("retry schedule is empty")
        for item in items:
            if not _DIGITS.fullmatch(item):
                raise ValueError(
                    f"retry schedule entry {item!r} is not a whole number of seconds >= 0"
                )
        result = tuple(int(item) for item in items)
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ValueError(
                    f"retry schedule entry {item!r} is not a whole number of seconds >= 0"
                )
        result = tuple(value)
    else:
        raise ValueError("retry schedule must be a comma-separated string or a list of ints")
    if not result:
        raise ValueError("retry schedule is empty")
    return result


def next_attempt_delay(schedule, attempts_made: int, retry_after: int | None) -> int | None:
    """Seconds to wait before the next attempt, or None when the schedule is exhausted.

    `attempts_made` counts attempts already done. A `retry_after` from the
    receiver (capped at MAX_RETRY_AFTER) lengthens the wait, never shortens it.
    """
    if attempts_made < 0:
        raise ValueError("attempts_made must be >= 0")
    if attempts_made >= len(schedule):
        return None
    delay = schedule[attempts_made]
    if retry_after is not None:
        delay = max(delay, min(max(retry_after, 0), MAX_RETRY_AFTER))
    return delay


def parse_retry_after(value: str | None, now: float | None = None) -> int | None:
    """Retry-After as whole seconds from now (delta-seconds or HTTP-date), capped."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit() and value.isascii():
        if len(value) > 9:  # beyond any cap; int() of thousands of digits would raise
            return MAX_RETRY_AFTER
        seconds = int(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        now = time.time() if now is None else now
        seconds = max(0, int(when.timestamp() - now + 0.999))
    return min(seconds, MAX_RETRY_AFTER)
