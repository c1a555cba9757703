"""Request and response plumbing shared by the API blueprints."""
import ipaddress
import logging
import re

from flask import Response, current_app, request
from marshmallow import ValidationError
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge
from werkzeug.routing import BaseConverter

from app.core.jsonutil import InvalidJSON, loads
from app.web.errors import ApiError, validation_error

# What gunicorn's body readers raise on a malformed chunked body (not OSErrors since gunicorn 23).
try:
    from gunicorn.http.errors import ParseException as _GunicornParseError
except ImportError:  # pragma: no cover - another WSGI server
    class _GunicornParseError(Exception):
        pass

# What a WSGI server's input stream raises when the bytes on the wire are not the body the headers
# announced: a bad chunk size or a missing CRLF (gunicorn's ParseException, werkzeug's OSError), the
# connection ending early (gunicorn's NoMoreData, an OSError; werkzeug's ClientDisconnected).
_FRAMING_ERRORS = (OSError, ClientDisconnected, _GunicornParseError)

log = logging.getLogger(__name__)

# The pages the service serves (the console, the checkout pages): nothing inline, nothing from
# another origin, never framed.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
       " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none';"
       " object-src 'none'")

# The documented layout puts nginx on the same host (deploy/nginx.conf sets X-Forwarded-For to the
# client's address): a request from loopback carries the client's address in that header. The same
# addresses gunicorn trusts for X-Forwarded-Proto (gunicorn.conf.py).
TRUSTED_PROXIES = ("127.0.0.1", "::1")


def client_address():
    """The client's address, for the per-client throttles (console logins, payment links, the
    relayer): X-Forwarded-For's last address when the peer is the local proxy and the header holds
    one, else the peer's (an address as `ipaddress` writes it: what is stored about a client is
    never longer than an address)."""
    peer = request.remote_addr or "-"
    forwarded = request.headers.get("X-Forwarded-For")
    if peer in TRUSTED_PROXIES and forwarded:
        try:
            return str(ipaddress.ip_address(forwarded.split(",")[-1].strip()))
        except ValueError:
            pass
    return peer


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def json_response(text: str, status=200) -> Response:
    return Response(text, status=status, mimetype="application/json")


def read_json_body():
    """The request body as JSON values (app.core.jsonutil), or the API's 415 / 400 / 413 error."""
    environ = request.environ
    # The common case is read straight from the WSGI environ (werkzeug's header parsing and stream
    # wrappers cost a preorder more than the read itself); anything else takes werkzeug's path.
    if environ.get("CONTENT_TYPE") != "application/json" and request.mimetype != "application/json":
        raise ApiError(415, "unsupported_media_type", "Content-Type must be application/json.")
    # A charset parameter is accepted whatever it says: JSON is UTF-8 (RFC 8259 section 8.1), and a
    # body that is not is refused as invalid_json when it is decoded.
    limit = request.max_content_length
    declared = environ.get("CONTENT_LENGTH", "")
    try:
        if declared.isascii() and declared.isdigit() and (limit is None or int(declared) <= limit):
            data = environ["wsgi.input"].read(int(declared))
            if len(data) != int(declared):
                # The client ended its side before sending the length it declared: a truncated
                # body is never parsed (its first bytes may well be valid JSON).
                raise framing_error(f"The body ended after {len(data)} of its {declared} bytes.")
        else:
            # 413 past MAX_CONTENT_LENGTH when the length is declared
            data = request.get_data(cache=False)
            if request.content_length is None and limit is not None and len(data) >= limit:
                # A chunked body is cut at the limit rather than refused: one more byte means too
                # large.
                if environ["wsgi.input"].read(1):
                    raise RequestEntityTooLarge()
    except _FRAMING_ERRORS as e:
        # The client's fault, not ours: a 400, logged as one line without a traceback, naming the
        # error only: its text may quote the body (gunicorn's InvalidChunkSize holds the line read
        # as a chunk size, a whole JSON body when it was sent unchunked), and metadata is never
        # logged.
        log.info("malformed request body on %s %s: %s", request.method, request.path,
                 type(e).__name__)
        raise framing_error(
            "The request body's framing is broken (chunked encoding or length).") from None
    try:
        return loads(data)
    except InvalidJSON as e:
        raise ApiError(400, "invalid_json", str(e)) from None


def framing_error(message):
    return ApiError(400, "invalid_request_framing", message)


def load_json_body(schema):
    """The JSON body, which must be an object, validated by a marshmallow schema."""
    data = read_json_body()
    if not isinstance(data, dict):
        raise ApiError(400, "validation_error", "The request body must be a JSON object.")
    return load(schema, data)


def load(schema, data):
    try:
        return schema.load(data)
    except ValidationError as e:
        raise validation_error(e.messages) from None


# --- Path, query and form values are read as ASCII -----------------------------------------------
# Python reads other scripts' digits as numbers: int("٣"), int("𝟑") and int("३") are 3, and
# "³".isdigit() is true though int("³") raises. A value typed into an address or a form is read as
# the ASCII it must be: any other character is refused as written (400, naming the field), so no
# other spelling names the same thing (an alias) and none reaches a conversion that raises (a 500).
# A key or number read from a path, a query or a form passes here before it is parsed: the API's
# with ascii_param (its JSON error), the console's with app/console/pages.py ascii_value (its 400
# page). (The API's JSON bodies need none: JSON's own grammar has ASCII digits only.)
NOT_ASCII = ("Must be written in ASCII characters: digits are 0-9 only, never another script's"
             " digits, superscripts or circled ones.")
_ASCII_DIGITS = re.compile(r"[0-9]+")  # an explicit class: `\d` would match every script's digits


class NotAscii(ValueError):
    """A path, query or form value holding a character outside ASCII; `field` names it."""

    def __init__(self, field):
        super().__init__(f"{field}: {NOT_ASCII}")
        self.field = field
        self.errors = {field: [NOT_ASCII]}


def ascii_text(value, field):
    """`value` (a str, or None) unchanged when it is ASCII, else NotAscii naming `field`."""
    if value is not None and not value.isascii():
        raise NotAscii(field)
    return value


def ascii_int(value, field, *, digits=9):
    """A whole number written in 1 to `digits` ASCII digits 0-9 (nothing else: no sign, no space),
    or None for other ASCII text; NotAscii for anything outside ASCII."""
    ascii_text(value, field)
    if value is None or len(value) > digits or not _ASCII_DIGITS.fullmatch(value):
        return None
    return int(value)


def ascii_param(value, field):
    """For the API: `value` read as ASCII, else 400 validation_error naming `field`."""
    try:
        return ascii_text(value, field)
    except NotAscii as e:
        raise validation_error(e.errors) from None


def parse_process_id(value: str) -> str | None:
    """The canonical (lowercase) form of a UUID written in its usual 36-character form, or None.
    UUIDs compare case-insensitively (RFC 9562)."""
    return value.lower() if _UUID.fullmatch(value) else None


class ProcessIdConverter(BaseConverter):
    """`<process_id:name>` in a route: only a UUID in its 36-character form matches, passed to the
    view in its canonical lowercase form. Anything else is not this route: the router answers 404
    not_found, and `/process/preorder` is not mistaken for a process id (so `GET` there is 405 with
    an honest `Allow`, not a 404 while `OPTIONS` advertises `GET`)."""

    regex = _UUID.pattern

    def to_python(self, value):
        return value.lower()



def public_base_url() -> str:
    """The service's base URL as customers reach it: PUBLIC_BASE_URL, else this request's own
    scheme and host (behind the shipped nginx, the forwarded ones)."""
    return current_app.config.get("PUBLIC_BASE_URL") or request.host_url.rstrip("/")
