"""Bulk data set-up that needs the service's data layer (app/data/*.py).

The harness needs two things it cannot do fast enough through HTTP, and must not do with its own SQL
(all SQL lives in the data layer). Until these are implemented they raise NotImplementedError, and
the scenarios that need them (`preorder-1m`, `delivery`) are reported as SKIPPED and fail the run.
(Both are now implemented on top of app/data and app/events: no SQL here.)

Both are called with the path of a database already made by `flask --app app init-db` and the
merchant made by `flask --app app merchants create --json` (a dict with merchantId, secretKey,
publicKey, webhookSecret, livemode), before any server or worker is started on that database.
"""


import time
import uuid
from dataclasses import replace

from app.config import DEFAULTS
from app.core.records import Process
from app.data import processes as process_rows
from app.db import open_database
from app.domain.outbox import emit

METADATA = '{"orderRef":"A-1042","email":"buyer@example.com"}'
SEEDED_BEFORE = 300  # seconds: the watcher scenario's payments are older than this
STATUSES = ("completed", "completed", "cancelled", "expired", "pending")


def _process(merchant_id, i, now, status="pending"):
    created = now - 86_400 * 30 + i % (86_400 * 30)
    return Process(
        seq=None, id=str(uuid.uuid4()), merchant_id=merchant_id, status=status,
        amount=f"{1 + i % 99_999}.{i % 100:02d}", metadata=METADATA, livemode=False,
        created_at=created, updated_at=created, expires_at=created + 1800,
    )


def floor_process(process_id, merchant_id, now, metadata=METADATA):
    """The pending process the storage-floor apps store per request (floor_app, writer_floor)."""
    return Process(
        seq=None, id=process_id, merchant_id=merchant_id, status="pending", amount="19.99",
        metadata=metadata, livemode=False, created_at=now, updated_at=now, expires_at=now + 900,
    )


def prefill_processes(db_path, merchant_id, n):
    """Insert `n` processes for `merchant_id`, one transaction, realistic rows (distinct uuid4 ids,
    the benchmark's metadata, a mix of statuses, creation times spread over 30 days)."""
    # A bulk load: on SQLite durability comes from the final commit (synchronous OFF until then).
    db = open_database(str(db_path), dict(DEFAULTS, SQLITE_SYNCHRONOUS="OFF"))
    now = int(time.time())
    try:
        with db.transaction() as conn:
            process_rows.insert_many(
                conn, (_process(merchant_id, i, now, STATUSES[i % len(STATUSES)]) for i in range(n))
            )
    finally:
        db.close_all()


def seed_events(db_path, merchant, n):
    """Create `n` cancelled processes and their `process.cancelled` events, due now, through the
    service's own event writer (app.domain.outbox.emit), in one transaction."""
    db = open_database(str(db_path), DEFAULTS)
    now = int(time.time())
    try:
        with db.transaction() as conn:
            for i in range(n):
                process = replace(_process(merchant["merchantId"], i, now), status="cancelled")
                process_rows.insert(conn, process)
                emit(conn, "process.cancelled", process, now)
    finally:
        db.close_all()


def seed_payments(db_path, merchant_id, rpc_url, token, start_block, addresses, confirmations):
    """The watcher scenario's data, through the data layer: network "bench" (chain 31337) read from
    `start_block`, and one pending process per address with its live payment of 1 token (6
    decimals) to that address (the row confirm writes; the addresses are the harness's own, so no
    xpub is needed). Returns the process ids, in the order of `addresses`."""
    from app.core.records import Network, Payment
    from app.data import payments as payment_rows

    db = open_database(str(db_path), DEFAULTS)
    now = int(time.time())
    ids = []
    try:
        with db.transaction() as conn:
            # Made over the last hour, none in the last SEEDED_BEFORE seconds, as a shop's watched
            # set builds up: all made at once would be "changed since the last poll" for the
            # watcher's margin (app/chain/watcher/watched.py, CLOCK_MARGIN) and read again every
            # poll.
            span = 3600 - SEEDED_BEFORE
            payment_rows.insert_network(conn, Network(
                id="bench", name="Bench", chain_id=31337, rpc_url=rpc_url,
                confirmations=confirmations, start_block=start_block,
                scanned_block=start_block - 1, head_block=start_block - 1, disabled_at=None,
                created_at=now))
            for i, address in enumerate(addresses):
                made = now - 3600 + span * i // max(1, len(addresses))
                process = replace(_process(merchant_id, i, now), amount="1", created_at=made,
                                  updated_at=made, expires_at=now + 86_400)
                process_rows.insert(conn, process)
                payment_rows.insert_payment(conn, Payment(
                    process_id=process.id, merchant_id=merchant_id, address_index=i,
                    address=address, asset_id="tusd", network_id="bench", chain_id=31337,
                    token_contract=token, decimals=6, amount_due=10**6, created_at=made,
                    updated_at=made))
                ids.append(process.id)
    finally:
        db.close_all()
    return ids


def has_event(db_path, process_id, event_type):
    from app.data import outbox as event_rows

    db = _readers.get(str(db_path))
    if db is None:
        db = _readers[str(db_path)] = open_database(str(db_path), DEFAULTS)
    return any(e.type == event_type for e in event_rows.for_process(db.connection(), process_id))


_readers = {}


def watch_outcome(db_path, process_ids):
    """Transfers recorded and events written, counted over every process (each transfer once)."""
    from collections import Counter

    from app.data import outbox as event_rows
    from app.data import payments as payment_rows

    db = open_database(str(db_path), DEFAULTS)
    counts = Counter()
    try:
        conn = db.connection()
        for process_id in process_ids:
            counts["transfers"] += len(payment_rows.transfers_of(conn, [process_id])
                                       .get(process_id, ()))
            counts.update(e.type for e in event_rows.for_process(conn, process_id))
    finally:
        db.close_all()
    return dict(counts)
