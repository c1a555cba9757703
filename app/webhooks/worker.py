"""The delivery worker: drains the outbox, sweeps expired processes, purges old idempotency keys.

Continuous dispatch: attempts run in a pool of `concurrency` threads and the worker never waits for
one of them before claiming more, so an event that becomes due while a slow attempt is in flight
(up to WEBHOOK_TIMEOUT_SECONDS) starts as soon as a thread is free, not when the slow one ends.

`Worker.run_once(now, wait=False)` is one poll:
  1. sweep: pending processes past their expiry become `expired` (one `process.expired` each, written
     by `app.processes.expire_due`), so those events can be claimed in the same poll;
  2. reap: the attempts that ended since the last poll are collected, with the claims whose
     attempt did not start (stopping, too little lease left, or still queued POLL_MIN_SECONDS
     after the claim because slower attempts hold every thread);
  3. settle and claim, in one BEGIN IMMEDIATE transaction (one commit, one sync): record every
     attempt collected (`delivery.write_records`, a savepoint each; one log line each once
     committed), release the unstarted claims, then lease due events to this worker
     (`lease_owner`, `lease_expires_at` = now + WEBHOOK_LEASE_SECONDS): at most batch_size, and at
     most enough to fill the free threads plus, while every attempt in flight is younger than
     POLL_MIN_SECONDS, a batch queued behind them (`_room`); none while stopping; and read their
     merchants (webhook URL and secret as they are now), so the attempts touch no database.
     (Recording each attempt in its own pool thread cost a commit per attempt, a connection per
     thread whose page cache every other commit emptied, and woke every waiting thread at each
     commit: a third of the worker's CPU went to the kernel.) Records that could not be written
     are tried again at the next poll;
  4. submit each claimed event to the pool, where it is sent once by `delivery.send`, without
     waiting for it (step 3 of a later poll records it);
  5. purge Idempotency-Key records older than IDEMPOTENCY_TTL_SECONDS (at most once a minute), and
     prune final events older than RETENTION_DAYS (`app.operations.prune`, at most once an hour,
     PRUNE_BATCHES short transactions at a time; sooner again while rows are left).
`run_once()` (wait=True) also waits for every attempt in flight (`drain()`), so a test sees them
recorded when it returns. One thread drives a worker (run_once/drain/run); the pool runs attempts.

`run()` polls until stopped: again at once after a claim that may have left more due events, every
POLL_MIN_SECONDS (or as soon as half a batch of attempts, or all of them, have ended) while attempts
are in flight, and backing off to `poll_max` only when idle (nothing in flight, nothing claimed). The
sweep runs at most every POLL_MIN_SECONDS in these loops. `run_until_idle()` (the `--once` of
cron) polls the same way until nothing is due or in flight, then returns.

Recording an attempt waits for the next poll (at most POLL_MIN_SECONDS, sooner when half a batch
has ended); a worker stopped by a signal records every attempt it made before it exits. One killed
with SIGKILL loses the records of the attempts since its last poll: those events are attempted again
once their leases expire, as after a crash mid-attempt (at least once; receivers deduplicate on
webhook-id).

Leases: an attempt starts only while at least WEBHOOK_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS of
its lease remain, and the transport bounds the attempt by WEBHOOK_TIMEOUT_SECONDS, so no other worker
can claim the event while it is attempted (config refuses a lease shorter than timeout + margin + 1).
A worker killed with SIGKILL leaves its leases to expire; the events are then claimed again.

Signals (installed by the CLI): the first SIGTERM/SIGINT sets a flag: no new claim and no new attempt,
the ones in flight finish and are recorded, unstarted claims are released, the command exits 0. A second
one, a second or more later, ends the process at once (`os._exit(128 + signum)`); its leases expire
as after a crash (sooner, it is the same stop: a group-wide SIGTERM plus a script's own). A SIGINT
that was ignored when the process started (a background job of a shell, as in `make run`) stays
ignored, so only the SIGTERM of the script that started it stops the worker.

Slow merchants: a merchant with an attempt in flight for POLL_MIN_SECONDS or more, or whose last
attempt took that long (within SLOW_MEMORY_SECONDS), gets at most `per_merchant` (default half the
threads) attempts in flight; its other events wait while other merchants' are claimed. So one
merchant whose endpoint hangs cannot take every thread, once its first slow attempts have shown it
is slow. Fast endpoints are never capped.
"""
import contextlib
import logging
import math
import os
import signal
import socket
import secrets
import threading
import time
from collections import Counter
from concurrent import futures
from dataclasses import dataclass

from app import operations
from app.config import LEASE_MARGIN_SECONDS
from app.data import events as event_rows
from app.data import idempotency as idempotency_rows
from app.data import merchants as merchant_rows
from app.processes import expire_due
from app.webhooks import delivery, transport

log = logging.getLogger(__name__)

POLL_MIN_SECONDS = 0.2
SLOW_MEMORY_SECONDS = 300  # how long a merchant whose attempt was slow stays capped (see _claim)
PURGE_EVERY_SECONDS = 60
PRUNE_EVERY_SECONDS = 3600
PRUNE_BATCHES = 25  # per poll that prunes: at most 5,000 events, then deliveries go on
_SLEEP_SLICE = 0.05  # how often a sleeping worker looks at its stop flag
STOP_AGAIN_SECONDS = 1.0  # a signal this soon after the first is the same stop (install_signal_handlers)
_SKIPPED, _ERROR = "skipped", "error"


@dataclass(frozen=True)
class Summary:
    """What one poll did: attempted/released count the attempts that ended since the last poll."""
    expired: int = 0
    claimed: int = 0
    attempted: int = 0
    released: int = 0
    in_flight: int = 0  # attempts still running when the poll returned

    @property
    def busy(self):
        return bool(self.expired or self.claimed)


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Worker:
    def __init__(self, db, *, clock, settings, lease_seconds, idempotency_ttl, batch_size=50,
                 concurrency=8, poll_max=5.0, owner=None, per_merchant=None, retention_days=0):
        self.db, self.clock, self.settings = db, clock, settings
        self.lease_seconds, self.idempotency_ttl = lease_seconds, idempotency_ttl
        self.batch_size, self.poll_max = batch_size, max(poll_max, POLL_MIN_SECONDS)
        self.owner = owner or new_owner()
        self.stopping = False  # set by stop() or a signal; read by every thread
        self._purged_at = None
        self.retention_days, self._pruned_at = retention_days, None
        self._session = transport.new_session()
        self.concurrency = concurrency
        # A slow merchant gets at most this many attempts in flight (see _claim).
        self.per_merchant = per_merchant or max(1, concurrency // 2)
        self._slow_until = {}  # merchant id -> until when (clock) it counts as slow
        self._pool = futures.ThreadPoolExecutor(concurrency, thread_name_prefix="webhook")
        self._in_flight = {}  # Future -> (the claimed Event it attempts, when it was claimed)
        self._ended = threading.Condition()  # notified by the pool as attempts end (see _wait)
        self._ended_count = 0  # attempts ended and not yet reaped
        self._unrecorded = []  # what ended attempts sent, until a poll's transaction records it

    @classmethod
    def from_app(cls, app, **options):
        config = app.config
        return cls(app.extensions["db"], clock=config["CLOCK"],
                   settings=delivery.Settings.from_config(config),
                   lease_seconds=config["WEBHOOK_LEASE_SECONDS"],
                   idempotency_ttl=config["IDEMPOTENCY_TTL_SECONDS"],
                   retention_days=config["RETENTION_DAYS"], **options)

    # --- one poll --------------------------------------------------------------------------------

    def run_once(self, now=None, *, wait=True, sweep=True) -> Summary:
        """One poll (see the module docstring); with `wait`, also finish every attempt in flight;
        without `sweep`, no expiry sweep (the loops sweep at most every POLL_MIN_SECONDS)."""
        now = self.clock() if now is None else now
        expired = expire_due(self.db, now) if sweep else 0
        attempted, unstarted = self._reap(now)
        limit = 0 if self.stopping else self._room(now)
        # One transaction: record what ended, give back what did not start, claim more.
        with self._settling(unstarted, claiming=bool(limit)) as (conn, released):
            events, merchants = self._claim(conn, now, limit) if limit else ([], {})
        for event in events:
            future = self._pool.submit(self._attempt, event, merchants.get(event.merchant_id))
            self._in_flight[future] = (event, now)
        if wait:
            drained = self.drain()
            attempted, released = attempted + drained[0], released + drained[1]
        self._purge(now)
        return Summary(expired=expired, claimed=len(events), attempted=attempted,
                       released=released, in_flight=len(self._in_flight))

    def _room(self, now) -> int:
        """How many events a poll may claim: enough for the free threads and, while every attempt
        in flight is younger than POLL_MIN_SECONDS, a batch queued behind them, so that a
        thread that finishes starts the next attempt at once instead of idling until a poll has
        claimed one (claiming only into free threads cost a quarter of the delivery rate). While
        any attempt is slower than that, only the free threads are filled: no new claim queues
        behind a slow endpoint (and `_reap` releases those queued before it turned slow)."""
        capacity = self.concurrency
        if all(now - since < POLL_MIN_SECONDS for _, since in self._in_flight.values()):
            capacity += self.batch_size
        return max(0, min(self.batch_size, capacity - len(self._in_flight)))

    def _slow_merchants(self, now) -> Counter:
        """Slow merchants, each with its attempts in flight: an attempt of theirs ran
        POLL_MIN_SECONDS or more within the last SLOW_MEMORY_SECONDS (and no fast one since), or
        one in flight has been running that long."""
        in_flight = Counter(event.merchant_id for event, _ in self._in_flight.values())
        slow = Counter({merchant: 0 for merchant, until in self._slow_until.copy().items()
                        if until > now})
        for future, (event, since) in self._in_flight.items():
            if now - since >= POLL_MIN_SECONDS and not future.done():
                slow[event.merchant_id] = 0
        for merchant in slow:
            slow[merchant] = in_flight[merchant]
        return slow

    def drain(self) -> tuple[int, int]:
        """Wait for every attempt in flight, then record them and release the unstarted claims;
        (attempts made, claims released)."""
        futures.wait(list(self._in_flight))
        attempted, unstarted = self._reap()
        with self._settling(unstarted, claiming=False) as (_, released):
            pass
        return attempted, released

    def _reap(self, now=None) -> tuple[int, list]:
        """Forget the finished attempts, keeping what they sent for `_settling` to record; cancel
        (given `now`) the claims still queued POLL_MIN_SECONDS after they were claimed, every
        thread being taken by slower attempts, so another worker, or this one once a thread is
        free, takes them. Returns (attempts made, ids of the claims whose attempt did not start)."""
        if now is not None:
            for future, (_, since) in self._in_flight.items():
                if now - since >= POLL_MIN_SECONDS:
                    future.cancel()  # only an attempt that has not started can be cancelled
        done = {f: event for f, (event, _) in self._in_flight.items() if f.done()}
        for future in done:
            del self._in_flight[future]
        cancelled = [event.id for f, event in done.items() if f.cancelled()]
        with self._ended:
            self._ended_count -= len(done) - len(cancelled)
        unstarted = cancelled
        for future, event in done.items():
            if future.cancelled():
                continue
            result = future.result()
            if isinstance(result, delivery.Sent):
                self._unrecorded.append(result)
            elif result == _SKIPPED:
                unstarted.append(event.id)
        return len(done) - len(unstarted), unstarted

    @contextlib.contextmanager
    def _settling(self, unstarted, *, claiming):
        """A write transaction that first records the attempts sent and not yet recorded and
        releases the `unstarted` claims; yields (its connection, claims released) so the caller
        can add to it (a claim, when `claiming`). The records are logged once it commits. If it
        fails, they stay unrecorded for the next poll to try again (before their leases expire,
        normally; after, a failure is not recorded over the new owner's state, a delivery is).
        With nothing to write and no claim to make, no transaction is opened."""
        sent = self._unrecorded
        if not sent and not unstarted and not claiming:
            yield None, 0
            return
        with self.db.transaction() as conn:
            notes = delivery.write_records(conn, sent, owner=self.owner, settings=self.settings)
            released = event_rows.release(conn, unstarted, self.owner)
            yield conn, released
        self._unrecorded = []
        delivery.log_records(sent, notes)

    def _claim(self, conn, now, limit):
        """Up to `limit` due events, in `conn`'s transaction: first any merchant's but the slow
        ones', then each slow merchant's up to `per_merchant` in flight. So one merchant whose
        endpoint hangs holds at most `per_merchant` threads while others' events are due (after
        its first slow attempts show it is slow), and a fast endpoint is never capped. Returns the
        events and their merchants by id."""
        slow = self._slow_merchants(now)
        claim = dict(owner=self.owner, now=int(now),
                     lease_until=math.ceil(now) + self.lease_seconds)
        events = event_rows.claim_due(conn, limit=limit, skip_merchants=slow, **claim)
        for merchant, in_flight in slow.items():
            room = min(limit - len(events), self.per_merchant - in_flight)
            if room > 0:
                events += event_rows.claim_due(conn, limit=room, merchant_id=merchant, **claim)
        # Their merchants' URLs and secrets as they are now, read once for the batch: the
        # attempts themselves touch no database.
        return events, merchant_rows.get_many(conn, {event.merchant_id for event in events})

    def _attempt(self, event, merchant):
        """Runs in a pool thread; marks its merchant slow or not (`_claim`), and counts itself as
        ended for `_wait_for_free_threads`."""
        started = self.clock()
        try:
            return self._attempt_once(event, merchant)
        finally:
            ended = self.clock()
            if ended - started >= POLL_MIN_SECONDS:
                self._slow_until[event.merchant_id] = ended + SLOW_MEMORY_SECONDS
            else:
                self._slow_until.pop(event.merchant_id, None)
            with self._ended:
                self._ended_count += 1
                if self._ended_count >= self._refill_at or self._ended_count >= len(self._in_flight):
                    self._ended.notify()

    def _attempt_once(self, event, merchant):
        """Starts only if not stopping and the lease covers the attempt; returns what `_reap`
        records (`delivery.Sent`), or why nothing was sent."""
        if self.stopping:
            return _SKIPPED
        if self.clock() + self.settings.timeout + LEASE_MARGIN_SECONDS > event.lease_expires_at:
            return _SKIPPED
        try:
            return delivery.send(self._session, event, merchant, clock=self.clock,
                                 settings=self.settings)
        except Exception:  # a bug: the lease expires and the event is attempted again
            log.exception("webhook %s %s: could not be attempted", event.id, event.type)
            return _ERROR

    def _purge(self, now):
        if self._purged_at is not None and now - self._purged_at < PURGE_EVERY_SECONDS:
            return
        with self.db.transaction() as conn:
            purged = idempotency_rows.purge(conn, int(now) - self.idempotency_ttl)
        self._purged_at = now
        if purged:
            log.info("purged %d idempotency keys older than %d s", purged, self.idempotency_ttl)
        if self.retention_days and (self._pruned_at is None
                                    or now - self._pruned_at >= PRUNE_EVERY_SECONDS):
            pruned = operations.prune(self.db, now, older_than_days=self.retention_days,
                                      idempotency_ttl=self.idempotency_ttl, max_batches=PRUNE_BATCHES)
            # Rows left: again at the next purge, a minute from now, not in an hour.
            self._pruned_at = now - (PRUNE_EVERY_SECONDS - PURGE_EVERY_SECONDS) * pruned.more
            if pruned.events:
                log.info("pruned %d events older than %d days (%d delivery attempts)",
                         pruned.events, self.retention_days, pruned.attempts)

    # --- loops -----------------------------------------------------------------------------------

    def run(self):
        """Poll and deliver until stop() or a signal; then finish the attempts in flight."""
        log.info("webhook worker %s started", self.owner)
        self._loop(until_idle=False)
        log.info("webhook worker %s stopped", self.owner)

    def run_until_idle(self):
        """Deliver everything due now, sweep, and return once nothing is due or in flight (cron's
        `--once`)."""
        self._loop(until_idle=True)

    def _loop(self, *, until_idle):
        """A failed poll is logged and retried by `run()`; `run_until_idle()` lets it raise (cron
        sees the failure). Either way the attempts in flight are finished before returning."""
        delay = POLL_MIN_SECONDS
        swept_at = None
        try:
            while not self.stopping:
                sweep = swept_at is None or time.monotonic() - swept_at >= POLL_MIN_SECONDS
                if sweep:
                    swept_at = time.monotonic()
                try:
                    summary = self.run_once(wait=False, sweep=sweep)
                except Exception:
                    if until_idle:
                        raise
                    log.exception("webhook worker iteration failed; trying again")
                    summary = Summary()
                if summary.claimed and self._room(self.clock()):
                    continue  # the claim may have left more due: claim again at once
                if self._in_flight:
                    self._wait_for_free_threads()
                    delay = POLL_MIN_SECONDS
                elif summary.busy:
                    delay = POLL_MIN_SECONDS
                elif until_idle:
                    return
                else:  # idle: nothing in flight, nothing claimed
                    self._idle(delay)
                    delay = min(delay * 2, self.poll_max)
        finally:
            self._finish()

    @property
    def _refill_at(self):
        return max(1, self.batch_size // 2)

    def _wait_for_free_threads(self):
        """Return once half a batch of attempts have ended since the last poll, or all of them,
        or after POLL_MIN_SECONDS: an event that becomes due while a slow attempt is in flight
        starts within POLL_MIN_SECONDS, and a poll (a claim transaction, a commit) covers several
        events rather than one. The pool notifies; nothing here walks the futures."""
        with self._ended:
            self._ended.wait_for(
                lambda: self.stopping or self._ended_count >= self._refill_at
                or self._ended_count >= len(self._in_flight),
                timeout=POLL_MIN_SECONDS)

    def _finish(self):
        """Wait for the attempts in flight, record them and release unstarted claims."""
        try:
            self.drain()
        except Exception:  # not written: those leases expire as after a crash
            log.exception("webhook worker could not record its last attempts or release its claims")

    def stop(self):
        self.stopping = True

    def _idle(self, seconds):
        """Nothing to do: wait `seconds`. On PostgreSQL, wait on the outbox's notifications
        instead, so a new event is claimed at once rather than at the next poll."""
        if self.db.dialect == "postgresql":
            self.db.wait_for_events(seconds, stopping=lambda: self.stopping)
        else:
            self._sleep(seconds)

    def _sleep(self, seconds):
        deadline = time.monotonic() + seconds
        while not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, _SLEEP_SLICE))

    def install_signal_handlers(self):
        """Main thread only. The handler sets a flag; only a second signal acts (exits at once), and
        only once STOP_AGAIN_SECONDS have passed since the first: one stop often delivers two (a
        SIGTERM to the whole process group, then the starting script's own, as under `make run`)."""
        first = []

        def handle(signum, frame):
            if first and time.monotonic() - first[0] >= STOP_AGAIN_SECONDS:
                os._exit(128 + signum)
            if not first:
                first.append(time.monotonic())
            self.stopping = True

        signal.signal(signal.SIGTERM, handle)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, handle)

    def close(self):
        self._pool.shutdown(wait=True)
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
