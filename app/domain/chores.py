"""The upkeep a delivery worker does beside its polls, each chore once its interval has passed:
expire processes past their expiry (so their `process.expired` events go out), purge Idempotency-Key
records past IDEMPOTENCY_TTL_SECONDS and the chain watcher's watch_list rows of processes final for
longer than PAYMENT_MONITORING_SECONDS, prune final events older than RETENTION_DAYS
(app/domain/ops.py). Every worker may run them at once: each is a guarded write that one of them
wins per row."""
import logging
import math

from app.data import idempotency as idempotency_rows
from app.data import transfers as transfer_rows
from app.domain import ops
from app.domain.processes import expire_due

log = logging.getLogger(__name__)

SWEEP_EVERY_SECONDS = 0.2  # a write transaction: not at every poll of a busy worker
PURGE_EVERY_SECONDS = 60
PRUNE_EVERY_SECONDS = 3600  # looked at with the purge
PRUNE_BATCHES = 25  # per purge that prunes: at most 5,000 events, then deliveries go on
UNWATCH_BATCH = 10_000  # watch_list rows a purge looks at, at most (more at the next one)
# Rows are deleted this much after the monitoring window would allow: a worker whose clock runs
# ahead of a watcher's by less never stops a watching early; a row kept longer costs only its read.
UNWATCH_MARGIN_SECONDS = 3600


class Chores:
    def __init__(self, db, config):
        self.db = db
        self.idempotency_ttl = config["IDEMPOTENCY_TTL_SECONDS"]
        self.retention_days = config["RETENTION_DAYS"]
        self.monitoring_seconds = config["PAYMENT_MONITORING_SECONDS"]
        self._last = {}  # chore ("sweep", "purge", "prune") -> when it last ran

    def sweep(self, now):
        """Expire the processes past their expiry, at most every SWEEP_EVERY_SECONDS."""
        if self._due("sweep", SWEEP_EVERY_SECONDS, now):
            expire_due(self.db, now)

    def purge(self, now):
        """Idempotency keys and watch_list rows each minute; old final events each hour, in
        bounded batches: any left are pruned at the next purge."""
        if not self._due("purge", PURGE_EVERY_SECONDS, now):
            return
        with self.db.transaction() as conn:
            purged = idempotency_rows.purge(conn, int(now) - self.idempotency_ttl)
            unwatched = transfer_rows.prune_watch_list(
                conn, int(now) - self.monitoring_seconds - UNWATCH_MARGIN_SECONDS, UNWATCH_BATCH)
        if purged:
            log.info("purged %d idempotency keys older than %d s", purged, self.idempotency_ttl)
        if unwatched:
            log.info("stopped watching %d addresses final for more than %d s", unwatched,
                     self.monitoring_seconds)
        if self.retention_days and self._due("prune", PRUNE_EVERY_SECONDS, now):
            pruned = ops.prune(self.db, now, older_than_days=self.retention_days,
                               idempotency_ttl=self.idempotency_ttl, max_batches=PRUNE_BATCHES)
            if pruned.more:
                del self._last["prune"]
            if pruned.events:
                log.info("pruned %d events older than %d days (%d delivery attempts)",
                         pruned.events, self.retention_days, pruned.attempts)

    def _due(self, chore, seconds, now) -> bool:
        """Whether `chore` ran `seconds` or more ago (or the clock went back); if so, it runs
        now."""
        if 0 <= now - self._last.get(chore, -math.inf) < seconds:
            return False
        self._last[chore] = now
        return True
