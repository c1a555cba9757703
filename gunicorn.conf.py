"""Gunicorn settings for production: `gunicorn -c gunicorn.conf.py`.

Plain assignments grouped by section (as in gunicorn's examples/example_config.py); every one can be
overridden from the environment with the GUNICORN_ variable named beside it. The application itself
is configured with FLASK_ variables (see README.md).
"""
import multiprocessing
import os


def _env(name, default, cast=str):
    value = os.environ.get(name)
    return default if value in (None, "") else cast(value)


# Application
wsgi_app = _env("GUNICORN_APP", "wsgi:app")

# Server socket
bind = _env("GUNICORN_BIND", "127.0.0.1:8000")
backlog = _env("GUNICORN_BACKLOG", 2048, int)

# Worker processes: sync workers, one request at a time each; SQLite serialises writes anyway, so
# more processes than 2 x cores only adds lock waiting. gunicorn's own sync worker, answering what
# gunicorn refuses itself (the limits below, malformed HTTP) in the API's JSON error envelope
# (gunicorn_workers.py; gunicorn_workers.ThreadWorker is the same for gthread).
workers = _env("GUNICORN_WORKERS", multiprocessing.cpu_count() * 2 + 1, int)
worker_class = _env("GUNICORN_WORKER_CLASS", "gunicorn_workers.SyncWorker")
threads = _env("GUNICORN_THREADS", 1, int)
timeout = _env("GUNICORN_TIMEOUT", 30, int)
graceful_timeout = _env("GUNICORN_GRACEFUL_TIMEOUT", 30, int)
keepalive = _env("GUNICORN_KEEPALIVE", 2, int)
max_requests = _env("GUNICORN_MAX_REQUESTS", 0, int)
max_requests_jitter = _env("GUNICORN_MAX_REQUESTS_JITTER", 0, int)

# Behind nginx (deploy/nginx.conf, on this host): X-Forwarded-Proto and -For are trusted from these
# addresses only (gunicorn's default, stated because the production layout relies on it).
forwarded_allow_ips = _env("GUNICORN_FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
# Only X-Forwarded-Proto says https: nginx overwrites it, while a client's X-Forwarded-Ssl or
# X-Forwarded-Protocol would pass through nginx (gunicorn's default list has all three, and
# refuses a request where they disagree).
secure_scheme_headers = {"X-FORWARDED-PROTO": "https"}

# Request limits. Behind nginx, nginx refuses a request line over 8190 bytes and a header field
# over 8190 bytes itself (deploy/nginx.conf), so these are reached only by the number of fields or
# by a client on gunicorn's own port; either way the answer is the JSON envelope (worker_class).
# Header fields up to 16 KiB so that an oversized x-secret-key sent straight to gunicorn still
# reaches the application and gets its 401 invalid_secret_key.
limit_request_line = _env("GUNICORN_LIMIT_REQUEST_LINE", 8190, int)
limit_request_fields = _env("GUNICORN_LIMIT_REQUEST_FIELDS", 100, int)
limit_request_field_size = _env("GUNICORN_LIMIT_REQUEST_FIELD_SIZE", 16384, int)

# Logging: one access line per request. The default format carries no header values, so no secret
# key is ever written, and the path without its query string (%(U)s, not the request line %(r)s): a
# console search's query holds customers' e-mails and order references, metadata never logged.
accesslog = _env("GUNICORN_ACCESSLOG", "-")
errorlog = _env("GUNICORN_ERRORLOG", "-")
loglevel = _env("GUNICORN_LOGLEVEL", "info")
access_log_format = _env(
    "GUNICORN_ACCESS_LOG_FORMAT", '%(h)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms'
)
logger_class = "gunicorn_workers.AccessLogger"  # %(U)s as sent, never decoded (a %0A forges a line)

# Process naming
proc_name = _env("GUNICORN_PROC_NAME", "preorder-service")
