"""A fast webhook receiver for the delivery benchmark (plain WSGI, no framework).

`POST` to any path answers `200 ok` and appends one line `<key>\t<body bytes>\t<unix time>` to
the file named by env `RECEIVER_LOG` (the key: the webhook-id, and the path when it is not `/hook`,
so one event sent to several endpoints counts once per endpoint), with one `write()` on an
`O_APPEND` descriptor, so the several gunicorn worker processes can share the file without
interleaving lines. `GET /stats` answers the summary of that file (`summarize()`), which the harness
also reads directly to check that every event was delivered exactly once. Nothing is verified or
parsed: the receiver must never be the bottleneck.

Run it with `gunicorn -c bench/receiver_gunicorn.conf.py bench.receiver_app:app` (gthread workers,
so connections are kept alive; see that file).
"""
import json
import os
import time

_fd = None


def _log_fd():
    global _fd
    if _fd is None:
        _fd = os.open(os.environ["RECEIVER_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    return _fd


def summarize(path):
    """Counts of what the receiver got: total, distinct ids, duplicated ids, bytes, time span."""
    counts, total_bytes, first, last = {}, 0, None, None
    try:
        with open(path, encoding="utf-8") as log:
            for line in log:
                webhook_id, size, at = line.rstrip("\n").split("\t")
                counts[webhook_id] = counts.get(webhook_id, 0) + 1
                total_bytes += int(size)
                at = float(at)
                first = at if first is None else min(first, at)
                last = at if last is None else max(last, at)
    except FileNotFoundError:
        pass
    received = sum(counts.values())
    return {
        "received": received,
        "unique": len(counts),
        "duplicated_ids": sum(1 for n in counts.values() if n > 1),
        "missing_id": counts.get("-", 0),
        "mean_body_bytes": round(total_bytes / received, 1) if received else 0,
        "first_at": first,
        "last_at": last,
    }


def _answer(start_response, status, body, content_type="text/plain"):
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start_response):
    method = environ["REQUEST_METHOD"]
    if method == "POST":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read()
        webhook_id = environ.get("HTTP_WEBHOOK_ID", "-").replace("\t", " ").replace("\n", " ")
        path = environ.get("PATH_INFO", "")
        key = webhook_id if path == "/hook" else f"{webhook_id}@{path}"
        line = f"{key}\t{len(body)}\t{time.time():.6f}\n"
        os.write(_log_fd(), line.encode())
        return _answer(start_response, "200 OK", b"ok")
    if method == "GET" and environ.get("PATH_INFO") == "/stats":
        stats = json.dumps(summarize(os.environ["RECEIVER_LOG"])).encode()
        return _answer(start_response, "200 OK", stats, "application/json")
    return _answer(start_response, "404 Not Found", b"not found")
