"""The delivery worker: drains the outbox, sweeps expired processes, purges old idempotency keys.

`Worker.run_once(now)` is one iteration:
  1. sweep: pending processes past their expiry become `expired` (one `process.expired` each, written
     by `app.processes.expire_due`), so those events are delivered in the same iteration;
  2. claim: in one BEGIN IMMEDIATE transaction, lease up to `batch_size` due events to this worker
     (`lease_owner`, `lease_expires_at` = now + WEBHOOK_LEASE_SECONDS); only rows the UPDATE touched;
  3. deliver: each claimed event is attempted once in a thread pool of `concurrency` threads (one slow
     endpoint holds one thread, not the batch), each attempt recorded by `delivery.attempt`;
  4. release the claims that were not attempted (stopping, or too little lease left);
  5. purge Idempotency-Key records older than IDEMPOTENCY_TTL_SECONDS (at most once a minute).
`run()` repeats it until stopped, polling every 0.2 s while busy and backing off to `poll_max` when
idle. `run_until_idle()` (the `--once` of cron) repeats it until nothing is left due.

Leases: an attempt starts only while at least WEBHOOK_TIMEOUT_SECONDS + LEASE_MARGIN_SECONDS of
its lease remain, and the transport bounds the attempt by WEBHOOK_TIMEOUT_SECONDS, so no other worker
can claim the event while it is attempted (config refuses a lease shorter than timeout + margin + 1).
A worker killed with SIGKILL leaves its leases to expire; the events are then claimed again.

Signals (installed by the CLI): the first SIGTERM/SIGINT sets a flag: no new attempt starts, the ones
in flight finish and are recorded, unstarted claims are released, the command exits 0. A second
one ends the process at once (`os._exit(128 + signum)`); its leases expire as after a crash. A SIGINT
that was ignored when the process started (a background job of a shell, as in `make run`) stays
ignored, so only the SIGTERM of the script that started it stops the worker.
"""
import logging
import math
import os
import signal
import socket
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.config import LEASE_MARGIN_SECONDS
from app.data import events as event_rows
from app.data import idempotency as idempotency_rows
from app.processes import expire_due
from app.webhooks import delivery, transport

log = logging.getLogger(__name__)

POLL_MIN_SECONDS = 0.2
PURGE_EVERY_SECONDS = 60
_SLEEP_SLICE = 0.05  # how often a sleeping worker looks at its stop flag
_SKIPPED, _ERROR = "skipped", "error"


@dataclass(frozen=True)
class Summary:
    """What one iteration did."""
    expired: int = 0
    claimed: int = 0
    attempted: int = 0
    released: int = 0

    @property
    def busy(self):
        return bool(self.expired or self.claimed)


def new_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Worker:
    def __init__(self, db, *, clock, settings, lease_seconds, idempotency_ttl, batch_size=50,
                 concurrency=8, poll_max=5.0, owner=None):
        self.db, self.clock, self.settings = db, clock, settings
        self.lease_seconds, self.idempotency_ttl = lease_seconds, idempotency_ttl
        self.batch_size, self.poll_max = batch_size, max(poll_max, POLL_MIN_SECONDS)
        self.owner = owner or new_owner()
        self.stopping = False  # set by stop() or a signal; read by every thread
        self._signals = 0
        self._purged_at = None
        self._session = transport.new_session()
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="webhook")

    @classmethod
    def from_app(cls, app, **options):
        config = app.config
        return cls(app.extensions["db"], clock=config["CLOCK"],
                   settings=delivery.Settings.from_config(config),
                   lease_seconds=config["WEBHOOK_LEASE_SECONDS"],
                   idempotency_ttl=config["IDEMPOTENCY_TTL_SECONDS"], **options)

    # --- one iteration ---------------------------------------------------------------------------

    def run_once(self, now=None) -> Summary:
        now = self.clock() if now is None else now
        expired = expire_due(self.db, now)
        events = [] if self.stopping else self._claim(now)
        outcomes = [future.result() for future in
                    [self._pool.submit(self._attempt, event) for event in events]]
        unstarted = [e.id for e, outcome in zip(events, outcomes) if outcome == _SKIPPED]
        released = 0
        if unstarted:
            with self.db.transaction() as conn:
                released = event_rows.release(conn, unstarted, self.owner)
        self._purge(now)
        return Summary(expired=expired, claimed=len(events),
                       attempted=len(events) - len(unstarted), released=released)

    def _claim(self, now):
        with self.db.transaction() as conn:
            return event_rows.claim_due(
                conn, owner=self.owner, now=int(now),
                lease_until=math.ceil(now) + self.lease_seconds, limit=self.batch_size)

    def _attempt(self, event) -> str:
        """Runs in a pool thread. Starts only if not stopping and the lease covers the attempt."""
        if self.stopping:
            return _SKIPPED
        if self.clock() + self.settings.timeout + LEASE_MARGIN_SECONDS > event.lease_expires_at:
            return _SKIPPED
        try:
            return delivery.attempt(self.db, self._session, event, owner=self.owner,
                                    clock=self.clock, settings=self.settings)
        except Exception:
            # e.g. the database stayed locked past its busy timeout: the lease expires and the
            # event is attempted again (at least once).
            log.exception("webhook %s %s: could not be attempted or recorded", event.id, event.type)
            return _ERROR

    def _purge(self, now):
        if self._purged_at is not None and now - self._purged_at < PURGE_EVERY_SECONDS:
            return
        with self.db.transaction() as conn:
            purged = idempotency_rows.purge(conn, int(now) - self.idempotency_ttl)
        self._purged_at = now
        if purged:
            log.info("purged %d idempotency keys older than %d s", purged, self.idempotency_ttl)

    # --- loops -----------------------------------------------------------------------------------

    def run(self):
        """Poll and deliver until stop() or a signal."""
        log.info("webhook worker %s started", self.owner)
        delay = POLL_MIN_SECONDS
        while not self.stopping:
            try:
                busy = self.run_once().busy
            except Exception:
                log.exception("webhook worker iteration failed; trying again")
                busy = False
            if busy:
                delay = POLL_MIN_SECONDS
                continue
            self._sleep(delay)
            delay = min(delay * 2, self.poll_max)
        log.info("webhook worker %s stopped", self.owner)

    def run_until_idle(self):
        """Deliver everything due now, sweep, and return (cron's `--once`)."""
        while not self.stopping and self.run_once().busy:
            pass

    def stop(self):
        self.stopping = True

    def _sleep(self, seconds):
        deadline = time.monotonic() + seconds
        while not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, _SLEEP_SLICE))

    def install_signal_handlers(self):
        """Main thread only. The handler sets a flag; only a second signal acts (exits at once)."""
        def handle(signum, frame):
            self._signals += 1
            if self._signals > 1:
                os._exit(128 + signum)
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
