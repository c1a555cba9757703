r"""The naive durable floor: bare Flask plus one INSERT committed under synchronous=FULL, written as
an operator trying SQLite would write it, with none of the service's machinery.

Each worker opens one plain `sqlite3` connection (WAL, as the service, synchronous=FULL, a busy
timeout: SQLite's own sleeping busy handler, no writer queue, no file-identity guard) and answers
`POST /payment-button/process/preorder` after one `INSERT INTO processes` (the body as the
metadata, the service's row otherwise; no search rows) and its COMMIT. No authentication, no body
parsing. `python -m bench.run --scenarios preorder-naive` measures the service against it: what the
service's own work costs, measured against the plainest durable app on the same machine.

    FLASK_DATABASE=... BENCH_MERCHANT_ID=mer_... GUNICORN_APP=bench.naive_floor_app:app \
        gunicorn -c gunicorn.conf.py
"""
import os
import sqlite3
import time
import uuid

from flask import Flask, request

app = Flask(__name__)
_merchant_id = os.environ["BENCH_MERCHANT_ID"]
_connection = None  # opened in the worker (after gunicorn's fork), once

INSERT = ("INSERT INTO processes (id, merchant_id, status, amount, metadata, livemode, created_at,"
          " updated_at, expires_at) VALUES (?, ?, 'pending', '19.99', ?, 0, ?, ?, ?)")


def connection():
    global _connection
    if _connection is None:
        _connection = sqlite3.connect(os.environ["FLASK_DATABASE"], timeout=30)
        _connection.execute("PRAGMA journal_mode = WAL")
        _connection.execute("PRAGMA synchronous = FULL")
    return _connection


@app.post("/payment-button/process/preorder")
def preorder():
    process_id, now = str(uuid.uuid4()), int(time.time())
    with connection() as conn:  # COMMIT on success, ROLLBACK on an exception
        conn.execute(INSERT, (process_id, _merchant_id, request.get_data(as_text=True), now, now,
                              now + 900))
    return {"processId": process_id}
