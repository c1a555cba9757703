"""The delivery worker: attempts due webhook deliveries (one event to one endpoint) in a pool of
threads and records them in batches.

One thread drives a worker (`run`; `run_once` is one poll). Each poll, in one transaction, records
the attempts that ended since the last poll, releases the claims that did not start, and leases more
due deliveries with their events and endpoints, so attempts touch no database. Around it the poll
runs the chores that are due (app/domain/chores.py: expiring processes first, so their events go out
in the same poll).
- Leases: an attempt starts only while timeout + LEASE_MARGIN_SECONDS of its lease remain, so no
  other worker claims a delivery while it is attempted. The database grants a lease for
  WEBHOOK_LEASE_SECONDS by its lease clock (app/data/outbox.py: on PostgreSQL the server's) and
  the worker counts them on its monotonic clock from a moment before the claim: never later than
  the lease's real end, however far its host's clock is from the others' or is set back. A killed
  worker's leases expire and its deliveries are attempted again: at least once, receivers
  deduplicate on webhook-id.
- An endpoint holds at most `per_endpoint` threads unless it has proven fast (an attempt shorter
  than POLL_MIN_SECONDS within SLOW_MEMORY_SECONDS); a slow one (an attempt of POLL_MIN_SECONDS or
  more) is capped until it answers fast again. So one that hangs, known or not, never holds every
  thread: it delays neither the merchant's other endpoints nor other merchants.
- `stop()` (what the command's SIGTERM/SIGINT handler calls: it only sets a flag) ends claiming;
  attempts in flight finish and are recorded, unstarted claims are released.
"""
import logging
import os
import secrets
import socket
import threading
import time
from collections import Counter
from concurrent import futures

from app.backoff import doubling
from app.data import endpoints as endpoint_rows
from app.data import merchants as merchant_rows
from app.data import outbox as event_rows
from app.domain.chores import Chores
from app.webhooks import delivery, transport
from app.webhooks.schedule import LEASE_MARGIN_SECONDS

log = logging.getLogger(__name__)

POLL_MIN_SECONDS = 0.2  # the most a delivery due while attempts are in flight waits for a poll
SLOW_MEMORY_SECONDS = 300  # how long an endpoint whose attempt was slow stays capped


class Worker:
    def __init__(self, db, config, *, batch_size=50, concurrency=8, poll_max=1.0,
                 per_endpoint=None):
        """`config`: the app's settings (CLOCK, WEBHOOK_*, the chores'); the rest, the command's."""
        self.db, self.clock = db, config["CLOCK"]
        self.settings = delivery.Settings.from_config(config)
        self.lease_seconds = config["WEBHOOK_LEASE_SECONDS"]
        self.chores = Chores(self.db, config)
        self.batch_size, self.concurrency, self.poll_max = batch_size, concurrency, poll_max
        self.per_endpoint = per_endpoint or max(1, concurrency // 2)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.stopping = False
        self._session = transport.new_session()
        self._pool = futures.ThreadPoolExecutor(concurrency, thread_name_prefix="webhook")
        self._in_flight = {}  # Future -> (Delivery, when it was claimed)
        self._unrecorded = []  # delivery.Sent, until a poll's transaction records them
        self._slow_until = {}  # endpoint id -> until when it counts as slow
        self._fast_until = {}  # endpoint id -> until when it counts as fast (never capped)
        self._ended = threading.Condition()  # `_wait` sleeps on it until `_ended_count` is enough
        self._ended_count = self._enough = 0

    @classmethod
    def from_app(cls, app, **options):
        """The worker of this app's database and settings (as Watcher.from_app)."""
        return cls(app.extensions["db"], app.config, **options)

    def run(self, *, until_idle=False):
        """Poll until stop() (`until_idle`: until nothing is due or in flight, cron's `--once`),
        then finish and record the attempts in flight. While attempts are in flight, poll once
        enough have ended (`_wait`); when idle, back off up to `poll_max`. A failed poll is logged
        and tried again (raised when `until_idle`: cron sees it)."""
        log.info("webhook worker %s started", self.owner)
        idle = 0  # consecutive polls that found nothing to do
        try:
            while not self.stopping:
                try:
                    self.run_once(wait=False)
                except Exception:
                    if until_idle:
                        raise
                    log.exception("webhook worker iteration failed; trying again")
                if self._in_flight:
                    self._wait()
                    idle = 0
                elif until_idle:
                    break
                else:
                    idle += 1
                    self._idle(doubling(idle, POLL_MIN_SECONDS, self.poll_max))
        finally:
            self.drain()  # if it cannot write, it raises: those leases expire as after a crash
        log.info("webhook worker %s stopped", self.owner)

    def run_once(self, now=None, *, wait=True):
        """One poll; with `wait`, then finish and record every attempt in flight."""
        read_at = time.monotonic()  # when `now` was read, on a clock no adjustment moves
        now = self.clock() if now is None else now
        self.chores.sweep(now)
        self._settle(None if self.stopping else now, read_at)
        if wait:
            self.drain()
        self.chores.purge(now)

    def drain(self):
        """Wait for every attempt in flight, record them, release the claims that did not start."""
        futures.wait(list(self._in_flight))
        self._settle(None)

    def _settle(self, now, read_at=None):
        """One write transaction: record the attempts that ended, release the claims that did not
        start and (given `now`, read at `read_at` on the monotonic clock) lease due events, then
        start them. Records that cannot be written stay for the next poll."""
        unstarted = self._reap(now)
        limit = 0
        if now is not None:  # free threads, plus a batch queued behind them while all in flight are
            # younger than POLL_MIN_SECONDS, so a thread that ends starts the next attempt at once
            young = all(now - since < POLL_MIN_SECONDS for _, since in self._in_flight.values())
            limit = self.concurrency + (self.batch_size if young else 0) - len(self._in_flight)
            limit = max(0, min(self.batch_size, limit))
        sent = self._unrecorded
        if not (sent or unstarted or limit):
            return
        with self.db.transaction() as conn:
            notes = delivery.write_records(conn, sent, owner=self.owner, settings=self.settings)
            event_rows.release(conn, unstarted, self.owner)
            claimed = self._claim(conn, now, limit) if limit else []
            events = event_rows.get_many(conn, {d.event_id for d in claimed})
            endpoints = endpoint_rows.get_many(conn, {d.endpoint_id for d in claimed})
            merchants = merchant_rows.get_many(conn, {d.merchant_id for d in claimed})
        self._unrecorded = []
        delivery.log_records(sent, notes)
        # The lease ends at int(now) + lease_seconds, counted on the monotonic clock from when
        # `now` was read and from what the wall clock says now, whichever ends first: neither a
        # wall clock set back nor a `now` read long ago lets an attempt outlive it.
        lease_ends = None
        if claimed:
            lease_ends = self.lease_seconds + min(read_at - (now - int(now)),
                                                  time.monotonic() + int(now) - self.clock())
        for item in claimed:
            future = self._pool.submit(self._attempt, item, events[item.event_id],
                                       endpoints.get(item.endpoint_id),
                                       merchants[item.merchant_id].livemode, lease_ends)
            self._in_flight[future] = (item, now)
            future.add_done_callback(self._ended_one)

    def _reap(self, now) -> list:
        """Take the attempts that ended out of `_in_flight`; returns the ids of the claims that did
        not start. Given `now`, claims still queued POLL_MIN_SECONDS after they were made (slower
        attempts hold every thread) are cancelled first, so any worker can take them."""
        with self._ended:
            self._ended_count = 0
        unstarted = []
        for future, (item, since) in list(self._in_flight.items()):
            if now is not None and now - since >= POLL_MIN_SECONDS and not future.cancel() \
                    and future.running():  # an attempt this long in flight: a slow endpoint
                self._slow_until[item.endpoint_id] = now + SLOW_MEMORY_SECONDS
                self._fast_until.pop(item.endpoint_id, None)
            if not future.done():
                continue
            del self._in_flight[future]
            ended = None if future.cancelled() else future.result()
            if ended is None:  # cancelled, or not started (`_attempt`)
                unstarted.append(item.seq)
                continue
            sent, took = ended
            self._unrecorded.append(sent)
            if took >= POLL_MIN_SECONDS:
                self._slow_until[item.endpoint_id] = self.clock() + SLOW_MEMORY_SECONDS
                self._fast_until.pop(item.endpoint_id, None)
            else:
                self._slow_until.pop(item.endpoint_id, None)
                self._fast_until[item.endpoint_id] = self.clock() + SLOW_MEMORY_SECONDS
        return unstarted

    def _claim(self, conn, now, limit):
        """Due deliveries, oldest first: to any endpoint but the slow ones and those at their cap,
        then to each slow endpoint while it has fewer than `per_endpoint` in flight. Of the first
        claim, what an endpoint not proven fast gets beyond its room is given back at once."""
        slow = {endpoint for endpoint, until in self._slow_until.items() if until > now}
        fast = {endpoint for endpoint, until in self._fast_until.items() if until > now}
        in_flight = Counter(item.endpoint_id for item, _ in self._in_flight.values())
        full = {endpoint for endpoint, n in in_flight.items()
                if n >= self.per_endpoint and endpoint not in fast}
        # The claim is made at int(now): on SQLite the lease ends at int(now) + lease_seconds, the
        # end the attempts are given (on PostgreSQL the server's end is later still, by its clock).
        lease = dict(owner=self.owner, now=int(now), lease_seconds=self.lease_seconds)
        claimed, extra = [], []
        for item in event_rows.claim_due(conn, limit=limit, skip_endpoints=slow | full, **lease):
            room = item.endpoint_id in fast or in_flight[item.endpoint_id] < self.per_endpoint
            (claimed if room else extra).append(item)
            in_flight[item.endpoint_id] += room
        event_rows.release(conn, [item.seq for item in extra], self.owner)
        for endpoint in slow:
            room = min(limit - len(claimed), self.per_endpoint - in_flight[endpoint])
            if room > 0:
                claimed += event_rows.claim_due(conn, limit=room, endpoint_id=endpoint, **lease)
        return claimed

    def _attempt(self, item, event, endpoint, livemode, lease_ends):
        """In a pool thread: (what `delivery.send` sent, seconds it took), or None without an
        attempt when stopping or when the lease has too little time left (`lease_ends`: the
        earliest its lease can end, on the monotonic clock). `send` never raises; if a bug made it,
        the poll reaping it fails and the event's lease expires as after a crash."""
        if self.stopping or (time.monotonic() + self.settings.timeout + LEASE_MARGIN_SECONDS
                             > lease_ends):
            return None
        started = self.clock()
        sent = delivery.send(self._session, item, event, endpoint, livemode, clock=self.clock,
                             settings=self.settings)
        return sent, self.clock() - started

    def _ended_one(self, future):  # a done callback, in a pool thread
        with self._ended:
            self._ended_count += 1
            if self._ended_count >= self._enough:
                self._ended.notify()

    def _wait(self):
        """Until half a batch, or every attempt in flight, has ended (POLL_MIN_SECONDS at most): a
        poll then records many in one commit, which keeps the worker's CPU per delivery low."""
        with self._ended:
            self._enough = min(max(1, self.batch_size // 2), len(self._in_flight))
            self._ended.wait_for(lambda: self._ended_count >= self._enough, POLL_MIN_SECONDS)

    def _idle(self, seconds):
        """Nothing due or in flight: wait, looking at the stop flag every 50 ms; on PostgreSQL, on
        the outbox's notifications, so a new event is claimed at once (docs/storage.md)."""
        if self.db.dialect == "postgresql":
            return self.db.wait_for_events(seconds, stopping=lambda: self.stopping)
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self):
        self.stopping = True

    def close(self):
        self._pool.shutdown(wait=True)
        self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
