"""The delivery worker: attempts due webhook events in a pool of threads and records them in batches.

One thread drives a worker (`run`, `run_until_idle`, `run_once`). Each poll sweeps expired processes,
then in one transaction records the attempts that ended since the last poll, releases the claims
that did not start, and leases more due events with their merchants, so attempts touch no database.
- Leases: an attempt starts only while timeout + LEASE_MARGIN_SECONDS of its lease remain, so no
  other worker claims an event while it is attempted. A killed worker's leases expire and its events
  are attempted again: at least once, receivers deduplicate on webhook-id.
- A slow merchant (an attempt of POLL_MIN_SECONDS or more, in flight or within SLOW_MEMORY_SECONDS)
  holds at most `per_merchant` threads; fast endpoints are never capped.
- `stop()` (the command's SIGTERM/SIGINT) ends claiming; attempts in flight finish and are
  recorded, unstarted claims are released.
- Idempotency keys are purged each minute, final events older than RETENTION_DAYS pruned each hour.
"""
import logging
import math
import os
import secrets
import socket
import threading
import time
from collections import Counter
from concurrent import futures
from dataclasses import dataclass

from app import operations
from app.data import events as event_rows
from app.data import idempotency as idempotency_rows
from app.data import merchants as merchant_rows
from app.processes import expire_due
from app.webhooks import delivery, transport
from app.webhooks.schedule import LEASE_MARGIN_SECONDS

log = logging.getLogger(__name__)

POLL_MIN_SECONDS = 0.2  # the most an event due while attempts are in flight waits for a poll
SLOW_MEMORY_SECONDS = 300  # how long a merchant whose attempt was slow stays capped
PURGE_EVERY_SECONDS = 60
PRUNE_EVERY_SECONDS = 3600
PRUNE_BATCHES = 25  # per poll that prunes: at most 5,000 events, then deliveries go on
_SKIPPED = "skipped"


@dataclass(frozen=True)
class Summary:
    """What one poll did; attempted/released count the attempts that ended since the last poll."""
    expired: int = 0
    claimed: int = 0
    attempted: int = 0
    released: int = 0
    in_flight: int = 0


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Worker:
    def __init__(self, db, *, clock, settings, lease_seconds, idempotency_ttl, batch_size=50,
                 concurrency=8, poll_max=5.0, owner=None, per_merchant=None, retention_days=0):
        self.db, self.clock, self.settings = db, clock, settings
        self.lease_seconds, self.idempotency_ttl = lease_seconds, idempotency_ttl
        self.retention_days = retention_days
        self.batch_size, self.concurrency = batch_size, concurrency
        self.per_merchant = per_merchant or max(1, concurrency // 2)
        self.poll_max = max(poll_max, POLL_MIN_SECONDS)
        self.owner = owner or new_owner()
        self.stopping = False  # set by stop() or a signal
        self._session = transport.new_session()
        self._pool = futures.ThreadPoolExecutor(concurrency, thread_name_prefix="webhook")
        self._in_flight = {}  # Future -> (Event, when it was claimed)
        self._unrecorded = []  # delivery.Sent, until a poll's transaction records them
        self._slow_until = {}  # merchant id -> until when it counts as slow
        self._ended = threading.Condition()  # notified once enough attempts ended (_wait)
        self._ended_count = 0  # attempts ended since the last reap
        self._purged_at = self._pruned_at = -math.inf

    @classmethod
    def from_app(cls, app, **options):
        config = app.config
        return cls(app.extensions["db"], clock=config["CLOCK"],
                   settings=delivery.Settings.from_config(config),
                   lease_seconds=config["WEBHOOK_LEASE_SECONDS"],
                   idempotency_ttl=config["IDEMPOTENCY_TTL_SECONDS"],
                   retention_days=config["RETENTION_DAYS"], **options)

    def run_once(self, now=None, *, wait=True, sweep=True) -> Summary:
        """One poll; with `wait`, also finish and record every attempt in flight."""
        now = self.clock() if now is None else now
        expired = expire_due(self.db, now) if sweep else 0
        attempted, unstarted = self._reap(now)
        released, claimed = self._settle(unstarted, now, claim=not self.stopping)
        if wait:
            more = self.drain()
            attempted, released = attempted + more[0], released + more[1]
        self._purge(now)
        return Summary(expired, claimed, attempted, released, len(self._in_flight))

    def drain(self) -> tuple[int, int]:
        """Wait for every attempt in flight, record them, release the unstarted claims:
        (attempts made, claims released)."""
        futures.wait(list(self._in_flight))
        attempted, unstarted = self._reap()
        released, _ = self._settle(unstarted, None, claim=False)
        return attempted, released

    def _room(self, now) -> int:
        """How many events a poll may claim: the free threads plus, while every attempt in flight
        is younger than POLL_MIN_SECONDS, a batch queued behind them, so a thread that finishes
        starts the next attempt at once (filling only free threads cost a quarter of the rate)."""
        capacity = self.concurrency
        if all(now - since < POLL_MIN_SECONDS for _, since in self._in_flight.values()):
            capacity += self.batch_size
        return max(0, min(self.batch_size, capacity - len(self._in_flight)))

    def _reap(self, now=None) -> tuple[int, list]:
        """Collect the attempts that ended, keeping what they sent for `_settle`. Given `now`,
        first cancel the claims still queued POLL_MIN_SECONDS after they were made (slower attempts
        hold every thread) so they go back to any worker. Returns (attempts made, unstarted ids)."""
        with self._ended:
            self._ended_count = 0
        attempted, unstarted = 0, []
        for future, (event, since) in list(self._in_flight.items()):
            if now is not None and now - since >= POLL_MIN_SECONDS:
                future.cancel()  # only an attempt that has not started can be cancelled
            if not future.done():
                continue
            del self._in_flight[future]
            sent, took = (_SKIPPED, 0) if future.cancelled() else future.result()
            if sent is _SKIPPED:
                unstarted.append(event.id)
                continue
            attempted += 1
            if isinstance(sent, delivery.Sent):
                self._unrecorded.append(sent)
            if took >= POLL_MIN_SECONDS:
                self._slow_until[event.merchant_id] = self.clock() + SLOW_MEMORY_SECONDS
            else:
                self._slow_until.pop(event.merchant_id, None)
        return attempted, unstarted

    def _settle(self, unstarted, now, *, claim) -> tuple[int, int]:
        """One write transaction: record the attempts that ended, release `unstarted`, and (given
        `claim`) lease due events and start them. Records that cannot be written now stay for the
        next poll. Returns (claims released, events claimed)."""
        limit = self._room(now) if claim else 0
        sent = self._unrecorded
        if not (sent or unstarted or limit):
            return 0, 0
        with self.db.transaction() as conn:
            notes = delivery.write_records(conn, sent, owner=self.owner, settings=self.settings)
            released = event_rows.release(conn, unstarted, self.owner)
            events = self._claim(conn, now, limit) if limit else []
            merchants = merchant_rows.get_many(conn, {event.merchant_id for event in events})
        self._unrecorded = []
        delivery.log_records(sent, notes)
        for event in events:
            future = self._pool.submit(self._attempt, event, merchants.get(event.merchant_id))
            self._in_flight[future] = (event, now)
            future.add_done_callback(self._ended_one)
        return released, len(events)

    def _claim(self, conn, now, limit):
        """Due events, oldest first: any merchant's but the slow ones', then each slow merchant's
        while it has fewer than `per_merchant` in flight."""
        in_flight = Counter(event.merchant_id for event, _ in self._in_flight.values())
        slow = {merchant for merchant, until in self._slow_until.items() if until > now}
        slow.update(event.merchant_id for future, (event, since) in self._in_flight.items()
                    if now - since >= POLL_MIN_SECONDS and not future.done())
        lease = dict(owner=self.owner, now=int(now), lease_until=math.ceil(now) + self.lease_seconds)
        events = event_rows.claim_due(conn, limit=limit, skip_merchants=slow, **lease)
        for merchant in slow:
            room = min(limit - len(events), self.per_merchant - in_flight[merchant])
            if room > 0:
                events += event_rows.claim_due(conn, limit=room, merchant_id=merchant, **lease)
        return events

    def _attempt(self, event, merchant):
        """In a pool thread: (what `delivery.send` sent, or _SKIPPED or None, seconds it took)."""
        started = self.clock()
        if self.stopping or started + self.settings.timeout + LEASE_MARGIN_SECONDS > (
                event.lease_expires_at):
            return _SKIPPED, 0
        try:
            sent = delivery.send(self._session, event, merchant, clock=self.clock,
                                 settings=self.settings)
        except Exception:  # a bug: the lease expires and the event is attempted again
            log.exception("webhook %s %s: could not be attempted", event.id, event.type)
            sent = None
        return sent, self.clock() - started

    def _ended_one(self, future):
        """Done callback (a pool thread): wakes `_wait` once enough attempts have ended."""
        with self._ended:
            self._ended_count += 1
            if self._enough_ended():
                self._ended.notify()

    def _enough_ended(self):
        """Half a batch, or every attempt in flight: a poll then covers several attempts (one
        commit for many, which is what keeps the worker's CPU per delivery low)."""
        return self.stopping or self._ended_count >= min(max(1, self.batch_size // 2),
                                                         len(self._in_flight))

    def _wait(self):
        with self._ended:
            self._ended.wait_for(self._enough_ended, timeout=POLL_MIN_SECONDS)

    def _purge(self, now):
        if now - self._purged_at < PURGE_EVERY_SECONDS:
            return
        self._purged_at = now
        with self.db.transaction() as conn:
            purged = idempotency_rows.purge(conn, int(now) - self.idempotency_ttl)
        if purged:
            log.info("purged %d idempotency keys older than %d s", purged, self.idempotency_ttl)
        if self.retention_days and now - self._pruned_at >= PRUNE_EVERY_SECONDS:
            pruned = operations.prune(self.db, now, older_than_days=self.retention_days,
                                      idempotency_ttl=self.idempotency_ttl, max_batches=PRUNE_BATCHES)
            # Rows left: again at the next purge, a minute from now.
            self._pruned_at = -math.inf if pruned.more else now
            if pruned.events:
                log.info("pruned %d events older than %d days (%d delivery attempts)",
                         pruned.events, self.retention_days, pruned.attempts)

    def run(self):
        """Poll and deliver until stop() or a signal; then finish the attempts in flight."""
        log.info("webhook worker %s started", self.owner)
        self._loop(until_idle=False)
        log.info("webhook worker %s stopped", self.owner)

    def run_until_idle(self):
        """Deliver what is due and return once nothing is due or in flight (cron's `--once`)."""
        self._loop(until_idle=True)

    def _loop(self, *, until_idle):
        """Poll again at once after a claim that may have left more due; while attempts are in
        flight, once enough have ended (`_wait`); when idle, back off up to `poll_max`. A failed
        poll is logged and retried, or raised by `run_until_idle` (cron sees it)."""
        delay, swept_at = POLL_MIN_SECONDS, -math.inf
        try:
            while not self.stopping:
                sweep = time.monotonic() - swept_at >= POLL_MIN_SECONDS
                swept_at = time.monotonic() if sweep else swept_at
                try:
                    summary = self.run_once(wait=False, sweep=sweep)
                except Exception:
                    if until_idle:
                        raise
                    log.exception("webhook worker iteration failed; trying again")
                    summary = Summary()
                if summary.claimed and self._room(self.clock()):
                    continue
                if self._in_flight or summary.expired or summary.claimed:
                    self._wait()
                    delay = POLL_MIN_SECONDS
                elif until_idle:
                    return
                else:
                    self._idle(delay)
                    delay = min(delay * 2, self.poll_max)
        finally:
            try:
                self.drain()
            except Exception:  # not written: those leases expire as after a crash
                log.exception("webhook worker could not record its last attempts")

    def _idle(self, seconds):
        """Nothing due, nothing in flight: wait, looking at the stop flag every 50 ms. On PostgreSQL,
        wait on the outbox's notifications instead, so a new event is claimed at once rather than at
        the next poll (docs/storage.md)."""
        if self.db.dialect == "postgresql":
            self.db.wait_for_events(seconds, stopping=lambda: self.stopping)
            return
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def stop(self):
        self.stopping = True

    def close(self):
        self._pool.shutdown(wait=True)
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
