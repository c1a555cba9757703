"""SEAMS FOR THE LEAD: bulk data set-up that needs the service's data layer (app/data/*.py).

The harness needs two things it cannot do fast enough through HTTP, and must not do with its own SQL
(all SQL lives in the data layer). Until these are implemented they raise NotImplementedError, and
the scenarios that need them (`preorder-1m`, `delivery`) are reported as SKIPPED and fail the run.

Both are called with the path of a database already made by `flask --app app init-db` and the
merchant made by `flask --app app merchants create --json` (a dict with merchantId, secretKey,
publicKey, webhookSecret, livemode), before any server or worker is started on that database.
"""


def prefill_processes(db_path, merchant_id, n):
    """Insert `n` processes for `merchant_id` into the database at `db_path`, fast.

    For `preorder-1m` (n = 1,000,000; the target is a preorder rate within 10 % of the empty
    database's). Expected: one data-layer function doing a bulk INSERT in one transaction (executemany
    over a generator, or INSERT ... SELECT over a recursive CTE), with realistic rows: distinct uuid4
    processIds, the realistic metadata, a mix of statuses and creation times, so every index the
    preorder path touches is as big as it would be in production. Must take well under a minute.
    """
    raise NotImplementedError(
        "bench.seed.prefill_processes: to be implemented against the data layer (app/data) by the lead"
    )


def seed_events(db_path, merchant, n):
    """Create `n` webhook events due now for `merchant` (whose webhook URL points at the receiver).

    For `delivery` (n = 20,000). Expected: one data-layer function creating n cancelled processes and
    their `process.cancelled` events through the same event-writing function the service uses (so the
    stored body is exactly what the worker would send), in one transaction, all due immediately with
    no attempts yet. Must take well under a minute.
    """
    raise NotImplementedError(
        "bench.seed.seed_events: to be implemented against the data layer (app/data) by the lead"
    )
