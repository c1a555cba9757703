"""gunicorn's sync and gthread workers, answering in the API's JSON error envelope what gunicorn
refuses itself, before the application sees the request: a request line longer than
limit_request_line (414), more header fields than limit_request_fields or one longer than
limit_request_field_size (431), a malformed request line or header field, a control byte in a
header value (400), an unknown transfer coding (501). gunicorn's own answer is an HTML page.

gunicorn has no setting or hook for these pages; a worker class is its supported extension point
(`worker_class`). `Worker.handle_error` picks the status, logs, and writes the page: here it does
all of that unchanged, except that the page goes to a buffer, and the client gets the envelope
under the status line gunicorn chose. tests/deploy/test_gunicorn_limits.py holds it to the real
gunicorn.

gunicorn logs each refusal as "Invalid request from ip=...: <str(exc)>", and its parse errors quote
what the client sent: a header line without a colon ("x-secret-key sk_live_..."), a header name, a
request line with its query string. A secret key must never reach the log, so gunicorn is handed the
same exception (class and attributes, from which it picks the status and the access-log line) whose
str() is only its class name: "Invalid request from ip=...: InvalidHeader".

A long answer that is making progress (the console's CSV export of a million rows) must not be
killed by gunicorn's worker timeout, which a sync worker only resets between requests: the worker
puts its heartbeat in the WSGI environ (`HEARTBEAT`), and the export calls it after each batch it
has sent. A worker stuck in one call still times out.

Two more places where gunicorn would write what a client sent: an error the application raises
while its answer streams is logged with the request's URI, query string included (a console
search's query holds customers' e-mails), so the worker hands gunicorn the request with its path
alone; and the access log's %(U)s is the percent-decoded path, where %0A writes a forged line, so
`AccessLogger` logs the path as it was sent (gunicorn.conf.py's logger_class).

A top-level module, not part of `app`: the gunicorn master imports the worker class, and importing
the application there would keep its code from being reloaded on SIGHUP.
"""
import copy
import functools
import json

from gunicorn import util
from gunicorn.glogging import Logger
from gunicorn.http.errors import ParseException
from gunicorn.workers.gthread import ThreadWorker as _ThreadWorker
from gunicorn.workers.sync import SyncWorker as _SyncWorker

# The statuses gunicorn answers itself: reason phrase (RFC 9110; gunicorn's 501 says "Bad
# Request"), the API's code, and the message, with gunicorn's limits filled in.
ANSWERS = {
    400: ("Bad Request", "bad_request", "The request is not valid HTTP."),
    414: ("URI Too Long", "uri_too_long",
          "The request line is longer than {limit_request_line} bytes."),
    431: ("Request Header Fields Too Large", "headers_too_large",
          "The request has more than {limit_request_fields} header fields, or one longer than "
          "{limit_request_field_size} bytes."),
    500: ("Internal Server Error", "internal_error",
          "An internal error occurred; it has been logged."),
    501: ("Not Implemented", "not_implemented",
          "The request uses an HTTP feature this service does not implement (a Transfer-Encoding "
          "other than chunked)."),
}


def answer(status, reason, cfg):
    """(reason phrase, code, message) for a status gunicorn answers itself. Others it may answer
    (417 for an Expect other than 100-continue, 403 for a refused PROXY line or TLS peer) take
    their code from gunicorn's reason phrase, as app.web.errors does for werkzeug's exceptions."""
    if status not in ANSWERS:
        return reason, reason.lower().replace(" ", "_"), reason + "."
    reason, code, message = ANSWERS[status]
    return reason, code, message.format(
        limit_request_line=cfg.limit_request_line, limit_request_fields=cfg.limit_request_fields,
        limit_request_field_size=cfg.limit_request_field_size)


@functools.cache
def _named_only(cls):
    """A subclass of gunicorn's exception class `cls` whose str() is the class's name."""
    return type(cls.__name__, (cls,), {"__str__": lambda self: cls.__name__})


def without_request_content(exc):
    """`exc` as gunicorn may log it: one of gunicorn's parse errors (every one may quote the
    request) as the same exception named only; anything else as it is."""
    if not isinstance(exc, ParseException):
        return exc
    named = _named_only(type(exc))
    quiet = named.__new__(named)
    quiet.__dict__.update(vars(exc))
    return quiet


def without_query(req):
    """The request as gunicorn may log it: its URI without the query string."""
    if req is None or "?" not in (getattr(req, "uri", None) or ""):
        return req
    quiet = copy.copy(req)
    quiet.uri = req.uri.partition("?")[0]
    return quiet


class AccessLogger(Logger):
    """gunicorn's logger, %(U)s the path as the client sent it (percent-encoded, no query string)
    rather than decoded: a decoded %0A would start a forged line in the access log."""

    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        atoms["U"] = environ.get("RAW_URI", "").partition("?")[0]
        return atoms


class _Buffer:
    """The client socket, except that what gunicorn sends is kept instead."""

    def __init__(self, client):
        self._client = client
        self.sent = b""

    def __getattr__(self, name):
        return getattr(self._client, name)

    def sendall(self, data):
        self.sent += data


class EnvelopedErrors:
    """gunicorn's handle_error (status, log lines, access log), its page sent as the envelope and
    its log line without the request's content."""

    def handle_error(self, req, client, addr, exc):
        page = _Buffer(client)
        super().handle_error(without_query(req), page, addr, without_request_content(exc))
        # "HTTP/1.1 431 Request ..."
        status_line = page.sent.partition(b"\r\n")[0].decode("latin-1")
        version, _, rest = status_line.partition(" ")
        status, _, reason = rest.partition(" ")
        if not (version.startswith("HTTP/") and status.isdigit()):
            data = page.sent  # not a page this module knows: gunicorn's own, unchanged
        else:
            reason, code, message = answer(int(status), reason, self.cfg)
            body = json.dumps({"code": code, "message": message}).encode()
            data = (f"{version} {status} {reason}\r\nConnection: close\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                    ).encode("latin-1") + body
        try:
            util.write_nonblock(client, data)
        except Exception:  # the client is gone: as gunicorn does, nothing more to tell it
            self.log.debug("Failed to send error message.")


HEARTBEAT = "preorder.heartbeat"


class Heartbeat:
    """The application, called with the worker's heartbeat in environ[HEARTBEAT]."""

    def load_wsgi(self):
        super().load_wsgi()
        app, notify = self.wsgi, self.notify

        def with_heartbeat(environ, start_response):
            environ[HEARTBEAT] = notify
            return app(environ, start_response)

        self.wsgi = with_heartbeat


class SyncWorker(Heartbeat, EnvelopedErrors, _SyncWorker):
    pass


class ThreadWorker(Heartbeat, EnvelopedErrors, _ThreadWorker):
    pass
