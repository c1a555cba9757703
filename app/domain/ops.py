"""What the operator's kit does: retention (`prune`), the /metrics text, the online backup.

Retention removes webhook events none of whose deliveries is pending, created more than
RETENTION_DAYS ago, with their deliveries and attempts, and Idempotency-Key records past their
IDEMPOTENCY_TTL_SECONDS (they can no longer replay). Never a pending delivery, never a process.
It works in batches, one short write transaction each, so writers never wait long behind it.
"""
import os
import sqlite3

from app.core.records import Pruned
from app.data import ops

DAY = 86_400
# events looked at per transaction: a short hold of the write lock (bench/README.md)
PRUNE_BATCH = 200


def prune(db, now, *, older_than_days, idempotency_ttl, batch_size=PRUNE_BATCH, max_batches=None):
    """Delete what retention allows, `batch_size` rows looked at per transaction; with
    `max_batches`, stop after that many transactions (`more` then says whether rows were left)."""
    events = attempts = keys = batches = 0
    cursor = (-1, -1)
    while cursor is not None:  # events, then Idempotency-Key records
        if max_batches is not None and batches >= max_batches:
            return Pruned(events, attempts, keys, more=True)
        with db.transaction() as conn:
            done, removed, cursor = ops.prune_events(
                conn, int(now) - older_than_days * DAY, batch_size, cursor)
        events, attempts, batches = events + done, attempts + removed, batches + 1
    while True:
        if max_batches is not None and batches >= max_batches:
            return Pruned(events, attempts, keys, more=True)
        with db.transaction() as conn:
            done = ops.prune_idempotency_keys(conn, int(now) - idempotency_ttl, batch_size)
        keys, batches = keys + done, batches + 1
        if done < batch_size:
            return Pruned(events, attempts, keys, more=False)


# --- /metrics ------------------------------------------------------------------------------------

def outbox_backlog(db, now):
    """For /healthz: the outbox's pending and due events, and how long the oldest has waited."""
    return ops.outbox_backlog(db.connection(), now)


def snapshot(db, now):
    """For /metrics: the counts it shows, read in one go."""
    return ops.snapshot(db.connection(), now)


def metrics_text(snapshot, networks=(), now=0) -> str:
    """The Prometheus text exposition format (version 0.0.4). `networks`: (Network, Health) of
    each enabled network (app/domain/health.py)."""
    lines = []

    def family(name, kind, help_text, samples):
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            label_text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            lines.append(f"{name}{{{label_text}}} {value}" if label_text else f"{name} {value}")

    backlog = snapshot.backlog
    family("preorder_outbox_backlog", "gauge",
           "Pending webhook deliveries (an event to an endpoint): due (waiting for a worker), "
           "in_flight (leased to a worker), retrying (waiting for their next attempt).",
           [({"state": "due"}, backlog.due), ({"state": "in_flight"}, backlog.in_flight),
            ({"state": "retrying"}, backlog.retrying)])
    family("preorder_outbox_oldest_due_age_seconds", "gauge",
           "Seconds since the oldest due pending webhook delivery became due (0 when none is due).",
           [({}, backlog.oldest_due_age)])
    family("preorder_webhook_deliveries_total", "counter",
           "Webhook deliveries (an event to an endpoint) that reached a final status, each time "
           "one reaches it (a replayed one counts again when it ends again).",
           [({"outcome": status}, count) for status, count in snapshot.deliveries.items()])
    family("preorder_processes", "gauge", "Payment processes by status (as the API shows them).",
           [({"status": status}, count) for status, count in snapshot.processes.items()])
    _network_families(family, networks, now)
    return "\n".join(lines) + "\n"


def _network_families(family, networks, now):
    """Per enabled network, as the watcher's last polls left it."""
    def each(value):
        return [({"network": n.id}, value(n, h)) for n, h in networks]

    family("preorder_network_available", "gauge",
           "1 while the network is available, 0 while unavailable (its node down or stalled).",
           each(lambda n, h: int(h.ok)))
    family("preorder_network_head_block", "gauge",
           "The node's head block at the watcher's last successful poll.",
           each(lambda n, h: n.head_block))
    family("preorder_network_lag_blocks", "gauge",
           "Blocks between the node's head and the last block the watcher has read.",
           each(lambda n, h: max(0, n.head_block - n.scanned_block)))
    family("preorder_network_seconds_since_good_poll", "gauge",
           "Seconds since the watcher's last successful poll (since the network was added, before"
           " one).", each(lambda n, h: max(0, now - (n.polled_at or n.created_at))))
    family("preorder_network_head_age_seconds", "gauge",
           "Age of the head block at the last successful poll (its timestamp to now; 0 before"
           " one).",
           each(lambda n, h: max(0, now - n.head_timestamp) if n.head_timestamp else 0))


# --- backup --------------------------------------------------------------------------------------

class BackupError(Exception):
    pass


def backup(database_path, target, *, overwrite=False) -> int:
    """Copy the live database into `target` with SQLite's online backup API: one consistent
    snapshot (a read transaction; writers carry on meanwhile in WAL mode), written to a temporary
    file beside `target`, checked (integrity_check), synced, then renamed into place. The copy is
    a single self-contained file (rollback journal mode, no -wal to carry). Returns its size."""
    target = os.path.abspath(target)
    if os.path.exists(target) and not overwrite:
        raise BackupError(f"{target} exists (--force to overwrite it)")
    if not os.path.isdir(os.path.dirname(target)):
        raise BackupError(f"{os.path.dirname(target)} is not a directory")
    partial = f"{target}.partial-{os.getpid()}"
    if not os.path.exists(database_path):
        raise BackupError(f"no database at {database_path}")
    source = sqlite3.connect(database_path, timeout=30)
    try:
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)  # every page in one step: one snapshot
            copy.execute("PRAGMA journal_mode = DELETE")
            result = copy.execute("PRAGMA integrity_check").fetchone()[0]
            if result != "ok":
                raise BackupError(f"the copy failed its integrity check: {result}")
        finally:
            copy.close()
        with open(partial, "rb") as f:
            os.fsync(f.fileno())
        os.replace(partial, target)
        directory = os.open(os.path.dirname(target), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except BaseException:
        for leftover in (partial, partial + "-journal", partial + "-wal", partial + "-shm"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        raise
    finally:
        source.close()
    return os.path.getsize(target)
