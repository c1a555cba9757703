r"""The storage floor: the baseline app plus one durable write per request, and nothing else.

Its route answers `POST /payment-button/process/preorder` like bench/baseline_app.py, after
inserting one pending process through the service's own data layer (`db.transaction()`,
`app.data.processes.insert`, COMMIT): on SQLite with its writer queue, BEGIN IMMEDIATE and the
service's SQLITE_SYNCHRONOUS; with a postgresql:// FLASK_DATABASE through psycopg and the same
per-process pool the service uses.
No authentication, no body parsing, no validation: the request body is stored as the process's
metadata, so a 9 KB request writes as much as the service writes for it. Measured against the
baseline in the same run (`python -m bench.run --scenarios preorder-floor`), it shows what a durable
commit per request costs on this machine on its own: the highest req/s ratio any service that stores
each preorder before answering 200 can reach here, whatever its validation costs.

The commit is made as the service makes a preorder's (`sync_outside_lock`: the WAL is synced after
the write lock is released); with BENCH_FLOOR_SYNC=in-lock, as SQLite makes it under FULL (synced
inside the lock), for the `preorder-sync` comparison.

    FLASK_DATABASE=... BENCH_MERCHANT_ID=mer_... GUNICORN_APP=bench.floor_app:app \
        gunicorn -c gunicorn.conf.py
"""
import os
import time
import uuid

from flask import Flask, request

from app.config import DEFAULTS
from app.core.keys import hash_key
from app.data import merchants as merchant_rows
from app.data import processes as process_rows
from app.db import open_database
from bench.seed import floor_process

app = Flask(__name__)
_db = open_database(os.environ["FLASK_DATABASE"], dict(
    DEFAULTS,
    SQLITE_SYNCHRONOUS=os.environ.get("FLASK_SQLITE_SYNCHRONOUS",
                                      DEFAULTS["SQLITE_SYNCHRONOUS"]).upper(),
))
_merchant_id = os.environ["BENCH_MERCHANT_ID"]
_sync_outside_lock = os.environ.get("BENCH_FLOOR_SYNC", "after-unlock") != "in-lock"
# BENCH_FLOOR_AUTH=1: also look the x-secret-key up as the service must (the contract revokes a key
# at once, so every request asks the database): how much of a gap to the floor that lookup is.
_authenticate = os.environ.get("BENCH_FLOOR_AUTH") == "1"


@app.post("/payment-button/process/preorder")
def preorder():
    if _authenticate:
        merchant_rows.by_secret_key_hash(_db.connection(),
                                         hash_key(request.headers.get("x-secret-key", "")),
                                         int(time.time()))
    process = floor_process(str(uuid.uuid4()), _merchant_id, int(time.time()),
                            metadata=request.get_data(as_text=True))
    with _db.transaction(sync_outside_lock=_sync_outside_lock) as conn:
        process_rows.insert(conn, process)
    return {"processId": process.id}


@app.teardown_appcontext
def _release(exc):
    _db.release()  # the connection the lookup held (PostgreSQL: back to the pool)
