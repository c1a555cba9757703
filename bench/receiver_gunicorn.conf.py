"""Gunicorn settings for the webhook receiver (bench/receiver_app.py), the delivery benchmark's
sink.

Not the production settings: the receiver is the instrument, not the thing measured, so it gets what
keeps it out of the way:
- gthread workers: the sync worker closes the connection after every response (no keep-alive),
  which would make every delivery pay a TCP handshake and measure the receiver instead of the
  deliverer; gthread keeps connections alive, so `requests.Session` in the baseline and in the
  service reuse them.
- 2 processes (one per core) x 8 threads: enough for two delivery processes each with a thread pool,
  and no single GIL serialising the receiver.
- no access log (20,000 lines of log formatting is CPU the deliverer would not get).
Passed explicitly with `-c` so gunicorn does not pick up the top-level gunicorn.conf.py.
"""
import os

bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8001")
workers = 2
worker_class = "gthread"
threads = 8
keepalive = 30
timeout = 30
graceful_timeout = 5
backlog = 2048
accesslog = None
errorlog = "-"
loglevel = "warning"
proc_name = "bench-receiver"
