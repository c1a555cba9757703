"""Webhook endpoints: up to MAX_ENDPOINTS per merchant, each with its URL, the event types it
wants, its own signing secret, and a switch (docs/webhooks.md, "Several endpoints").

An event goes to the endpoints enabled and subscribed to its type when it is made (app/data/outbox
.py, `insert`). Disabling or deleting an endpoint cancels its pending deliveries; enabling it again
does not resume them (replay does). A URL is checked by the SSRF rules when it is set
(`check_url`) and again at every delivery (app/webhooks/transport.py).

The merchant's first endpoint is the one the single-URL commands act on (`set_first_url`,
`roll_first_secret`): an upgraded merchant's URL and secret became it; made later, it takes the
webhook secret the merchant was given at creation.
"""
import re
import secrets

from app.core.records import Endpoint
from app.data import endpoints as endpoint_rows
from app.data import merchants as merchant_rows
from app.data import outbox as event_rows
from app.domain.outbox import EVENT_TYPES
from app.webhooks import ssrf, transport
from app.webhooks.signing import new_secret

MAX_ENDPOINTS = 10
ALL = ("*",)
# How long setting a URL waits for its host name to resolve (a person waits for the page or the
# command); a name that does not answer in time is accepted, every delivery checks it again.
SET_TIME_RESOLVE_SECONDS = 2


class EndpointNotFound(LookupError):
    pass


class EndpointLimit(Exception):
    def __init__(self):
        super().__init__(f"A merchant has at most {MAX_ENDPOINTS} webhook endpoints: delete one"
                         " first.")


class EndpointError(ValueError):
    """An endpoint cannot be set as asked; `errors` maps the field to messages."""

    def __init__(self, field, message):
        super().__init__(message)
        self.errors = {field: [message]}


def new_endpoint_id() -> str:
    return "we_" + secrets.token_hex(12)


_ID = re.compile(r"we_[0-9a-f]{24}")
MAX_URL, MAX_DESCRIPTION = 2048, 250


def check_description(text) -> str | None:
    """None, or plain text of at most MAX_DESCRIPTION characters (the API's rule, for every
    door)."""
    if text is not None and (len(text) > MAX_DESCRIPTION or any(
            ord(c) < 32 or 127 <= ord(c) < 160 or 0xD800 <= ord(c) <= 0xDFFF for c in text)):
        raise EndpointError("description", f"Must be plain text of at most {MAX_DESCRIPTION}"
                                           " characters, without control characters.")
    return text


def check_url(url, livemode, *, allow_loopback, resolve=None) -> str | None:
    """The SSRF guard when the URL is set: EndpointError (field `url`) for a URL deliveries would
    refuse (its form, or an address its host is or resolves to: ssrf.py); a warning when the name
    does not resolve now (saved all the same: every delivery checks again); else None."""
    if len(url) > MAX_URL:
        raise EndpointError("url", f"The webhook URL is refused: longer than {MAX_URL} characters.")
    try:
        ssrf.check_url(url, livemode, allow_loopback=allow_loopback,
                       resolve=resolve or transport.bounded_resolver(SET_TIME_RESOLVE_SECONDS))
    except ssrf.Unresolvable as e:
        return f"deliveries to it would be refused now: {e}"
    except ssrf.UnsafeURL as e:
        raise EndpointError("url", f"The webhook URL is refused: {e}.") from None
    return None


def parse_events(values) -> tuple[str, ...]:
    """The event types an endpoint wants: ("*",) or known types, each once, in the given order."""
    values = [v.strip() for v in values]
    if values == ["*"]:
        return ALL
    if not values:
        raise EndpointError("events", "Name at least one event type, or \"*\" for every type.")
    unknown = [v for v in values if v not in EVENT_TYPES]
    if unknown:
        raise EndpointError("events", f"Unknown event type {unknown[0]!r}: one of "
                                      f"{', '.join(EVENT_TYPES)}, or \"*\".")
    return tuple(dict.fromkeys(values))


def list_of(db, merchant_id) -> list[Endpoint]:
    return endpoint_rows.of_merchant(db.connection(), merchant_id)


def get(db, merchant_id, endpoint_id) -> Endpoint:
    """The merchant's endpoint (None: any merchant's, as an operator sees it), not deleted. An id
    of another form names none (it never reaches the database)."""
    if not isinstance(endpoint_id, str) or not _ID.fullmatch(endpoint_id):
        raise EndpointNotFound(endpoint_id)
    endpoint = endpoint_rows.get(db.connection(), endpoint_id)
    if endpoint is None or endpoint.deleted_at is not None or (
            merchant_id is not None and endpoint.merchant_id != merchant_id):
        raise EndpointNotFound(endpoint_id)
    return endpoint


def _new(conn, merchant, url, events, description, now, secret=None) -> Endpoint:
    if len(endpoint_rows.of_merchant(conn, merchant.id)) >= MAX_ENDPOINTS:
        raise EndpointLimit()
    endpoint = Endpoint(seq=None, id=new_endpoint_id(), merchant_id=merchant.id, url=url,
                        events=events, enabled=True, description=description,
                        secret=secret or new_secret(), previous_secret=None,
                        previous_secret_until=None, created_at=int(now))
    endpoint_rows.insert(conn, endpoint)
    return endpoint


def create(db, merchant, *, url, now, events=ALL, description=None, allow_loopback=False):
    """A new enabled endpoint: (endpoint, warning or None); its secret is in `endpoint.secret`,
    shown this once. The URL is checked before the write transaction (no lock while a resolver
    answers)."""
    warning = check_url(url, merchant.livemode, allow_loopback=allow_loopback)
    check_description(description)
    with db.transaction() as conn:
        endpoint_rows.lock_merchant(conn, merchant.id)
        return _new(conn, merchant, url, events, description, now), warning


def update(db, merchant, endpoint_id, *, now, allow_loopback=False, **fields):
    """Change some of url, events, enabled, description: (endpoint, warning or None). A changed
    URL is used from the next attempt on; disabling cancels the pending deliveries."""
    endpoint = get(db, merchant.id, endpoint_id)
    warning = None
    if "url" in fields:
        warning = check_url(fields["url"], merchant.livemode, allow_loopback=allow_loopback)
    check_description(fields.get("description"))
    with db.transaction() as conn:
        if fields and not endpoint_rows.update(conn, endpoint.id, **fields):
            raise EndpointNotFound(endpoint_id)
        if fields.get("enabled") is False:
            event_rows.cancel_pending(conn, endpoint.id)
    return get(db, merchant.id, endpoint_id), warning


def roll_secret(db, merchant_id, endpoint_id, now, overlap_seconds=0) -> str:
    """Replace the endpoint's signing secret; returns the new one. Events are signed when they
    are sent, so every delivery from now on, retries of older events included, is signed with the
    new secret and, for `overlap_seconds` (KEY_ROLL_OVERLAP_HOURS), with the old one too (two
    `v1,` signatures). 0 swaps at once. Rolling again during an overlap drops the oldest. The
    first endpoint's new secret is also the merchant's webhook secret (what a first endpoint made
    later takes), so a secret rolled away never comes back."""
    if overlap_seconds < 0:
        raise EndpointError("overlapHours", "The overlap must not be negative.")
    now = int(now)
    endpoint = get(db, merchant_id, endpoint_id)
    with db.transaction() as conn:
        endpoint_rows.lock_merchant(conn, merchant_id)
        mine = endpoint_rows.of_merchant(conn, merchant_id)
        if endpoint.id not in {e.id for e in mine}:
            raise EndpointNotFound(endpoint_id)
        endpoint = next(e for e in mine if e.id == endpoint.id)
        secret = new_secret()
        if mine[0].id == endpoint.id:
            merchant_rows.set_webhook_secret(conn, merchant_id, secret)
        if overlap_seconds:
            endpoint_rows.set_secret(conn, endpoint.id, secret, endpoint.secret,
                                     now + int(overlap_seconds))
        else:
            endpoint_rows.set_secret(conn, endpoint.id, secret)
    return secret


def delete(db, merchant_id, endpoint_id, now) -> Endpoint:
    """Delete the endpoint: out of every list, its pending deliveries cancelled, its history
    kept."""
    endpoint = get(db, merchant_id, endpoint_id)
    with db.transaction() as conn:
        if not endpoint_rows.delete(conn, endpoint.id, int(now)):
            raise EndpointNotFound(endpoint_id)
        event_rows.cancel_pending(conn, endpoint.id)
    return endpoint


# --- The merchant's first endpoint: what the single-URL commands and forms act on -------------

def first(db, merchant_id) -> Endpoint | None:
    found = endpoint_rows.of_merchant(db.connection(), merchant_id)
    return found[0] if found else None


def set_first_url(db, merchant, url, now, *, allow_loopback=False):
    """Set the first endpoint's URL, making it (enabled, every event) if the merchant has none;
    with None, disable it. (endpoint or None, warning or None)."""
    current = first(db, merchant.id)
    if url is None:
        if current is None:
            return None, None
        return update(db, merchant, current.id, now=now, enabled=False)
    if current is not None:
        return update(db, merchant, current.id, now=now, allow_loopback=allow_loopback, url=url,
                      enabled=True)
    warning = check_url(url, merchant.livemode, allow_loopback=allow_loopback)
    with db.transaction() as conn:
        endpoint_rows.lock_merchant(conn, merchant.id)
        if endpoint_rows.of_merchant(conn, merchant.id):  # made meanwhile: set it instead
            made = None
        else:
            made = add_first(conn, merchant_rows.get(conn, merchant.id), url, now)
    if made is None:
        return set_first_url(db, merchant, url, now, allow_loopback=allow_loopback)
    return made, warning


def add_first(conn, merchant, url, now) -> Endpoint:
    """In the caller's transaction: the merchant's first endpoint (every event), signing with the
    webhook secret the merchant was given at creation. The URL is the caller's to check."""
    return _new(conn, merchant, url, ALL, None, now, secret=merchant.webhook_secret)
