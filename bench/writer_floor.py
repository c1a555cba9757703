"""The storage floor through one writer process: the other design for storing each preorder.

`bench/floor_app.py` measures one durable INSERT per request made by the gunicorn worker itself, so
every request pays a write transaction, the write lock and a sync. The design usually proposed
instead is one writer process that batches every worker's inserts: a worker sends its row over a
Unix socket and answers once the writer says the batch holding it is committed and synced, so one
transaction and one sync cover several requests (group commit across processes).

This module is both halves, measured by `python -m bench.run --scenarios preorder-writer` against
the bare baseline (`preorder-floor` gives the in-process floor in the same way):
- `python -m bench.writer_floor --socket PATH`: the writer. One thread, a selector over the
  workers' connections; each turn it takes every message already waiting, inserts them in one
  transaction through the service's data layer
  (`app.db.sqlite.SqliteDatabase.transaction(sync_outside_lock=True)`,
  `app.data.processes.insert`, as the service commits a preorder), then answers each.
- `app`: the baseline's route plus that round trip (no authentication, parsing or validation, as in
  floor_app). Each gunicorn worker opens its own connection after the fork.

It is a measuring instrument, not a part of the service: no reconnection, no supervision, no
answer for a row the writer failed to store (the worker's request fails, and the run with it).

    FLASK_DATABASE=... BENCH_MERCHANT_ID=mer_... python -m bench.writer_floor --socket /tmp/w.sock
    FLASK_DATABASE=... BENCH_WRITER_SOCKET=/tmp/w.sock GUNICORN_APP=bench.writer_floor:app \
        gunicorn -c gunicorn.conf.py
"""
import argparse
import os
import selectors
import signal
import socket
import time
import uuid

from flask import Flask

from app.config import DEFAULTS
from app.data import processes as process_rows
from app.db.sqlite import SqliteDatabase as Database
from bench.seed import floor_process

MESSAGE_BYTES = 64  # a request is the process id (36 bytes); an answer is b"ok"

app = Flask(__name__)
_connection = {"pid": None, "socket": None}


def _writer_socket():
    """This worker's connection to the writer, opened on first use after the fork."""
    if _connection["pid"] != os.getpid():
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(os.environ["BENCH_WRITER_SOCKET"])
        _connection.update(pid=os.getpid(), socket=sock)
    return _connection["socket"]


@app.post("/payment-button/process/preorder")
def preorder():
    process_id = str(uuid.uuid4())
    sock = _writer_socket()
    sock.send(process_id.encode("ascii"))
    if sock.recv(MESSAGE_BYTES) != b"ok":
        raise RuntimeError("the writer did not store the row")
    return {"processId": process_id}


def serve(path, db, merchant_id):
    """Accept workers and store their rows, a batch per turn, until SIGTERM."""
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(128)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    batches = rows = 0
    while not stopping:
        batch = []
        for key, _ in selector.select(timeout=0.5):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                conn.setblocking(False)
                selector.register(conn, selectors.EVENT_READ)
                continue
            while True:  # every message this worker has waiting (one, with sync workers)
                try:
                    message = key.fileobj.recv(MESSAGE_BYTES)
                except BlockingIOError:
                    break
                if not message:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()
                    break
                batch.append((key.fileobj, message.decode("ascii")))
        if not batch:
            continue
        now = int(time.time())
        with db.transaction(sync_outside_lock=True) as conn:
            for _, process_id in batch:
                process_rows.insert(conn, floor_process(process_id, merchant_id, now))
        for conn, _ in batch:
            conn.send(b"ok")
        batches, rows = batches + 1, rows + len(batch)
    print(f"writer: {rows} rows in {batches} batches ({rows / max(batches, 1):.2f} a batch)",
          flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description="the benchmark's writer process (see the module)")
    parser.add_argument("--socket", required=True)
    opts = parser.parse_args(argv)
    synchronous = os.environ.get("FLASK_SQLITE_SYNCHRONOUS", DEFAULTS["SQLITE_SYNCHRONOUS"]).upper()
    db = Database(os.environ["FLASK_DATABASE"], synchronous=synchronous)
    try:
        serve(opts.socket, db, os.environ["BENCH_MERCHANT_ID"])
    finally:
        db.close_all()


if __name__ == "__main__":
    main()
