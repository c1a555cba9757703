"""A network's health, read from what the watcher's polls left in the database (so cron's `--once`
and a looping watcher agree, and every web worker gives the same answer).

A network is `unavailable` when
- its polls have failed since the last successful one (or since it was added, without one) and that
  one is more than NETWORK_STALE_SECONDS old: a node down, erring, lagging or serving another chain;
- or its head block, as the last good poll read it, is older than the network's `max_block_age`
  (set by the operator; off unless set): a node stuck on an old head, or no watcher running.
Else it is `ok`. `since`: when the current state began (docs/payments.md, "Network health").
"""
from dataclasses import dataclass

OK, UNAVAILABLE = "ok", "unavailable"
RETRY_AFTER_SECONDS = 30  # what `503 network_unavailable` asks a client to wait


@dataclass(frozen=True)
class Health:
    state: str
    since: int  # unix seconds
    reason: str | None = None  # why unavailable, for the operator (never a URL)

    @property
    def ok(self) -> bool:
        return self.state == OK


def of(network, now, stale_seconds) -> Health:
    """The network's health at `now`."""
    last_ok = network.polled_at if network.polled_at is not None else network.created_at
    if network.failing_since is not None and now - last_ok > stale_seconds:
        return Health(UNAVAILABLE, max(last_ok + stale_seconds, network.failing_since),
                      f"no successful poll for {now - last_ok} s")
    if network.max_block_age is not None and network.head_timestamp is not None:
        if now - network.head_timestamp > network.max_block_age:
            return Health(UNAVAILABLE, network.head_timestamp + network.max_block_age,
                          f"the head block is {now - network.head_timestamp} s old")
    since = network.ok_since if network.ok_since is not None else network.created_at
    return Health(OK, since)


def recovered_at(before, after, now, stale_seconds) -> int | None:
    """`now` when a successful poll at `now` makes the network available again (`before` and
    `after` the poll's mark), else None: its `ok_since` moves only then."""
    if not of(before, now, stale_seconds).ok and of(after, now, stale_seconds).ok:
        return now
    return None
