"""One delivery attempt of one claimed event, and its record.

`attempt` reads the merchant's webhook URL and secret now (they may have changed since the event was
written), signs the event's stored bytes, POSTs them once through `transport.post` (SSRF guard,
timeout, no redirects) and records the outcome in one write transaction:

- 2xx: the event is `delivered`, whoever holds its lease by now (at least once).
- anything else: the next attempt is scheduled per the retry schedule (a longer Retry-After wins), or
  the event is `failed` after the last one; only while this worker still holds the lease, so a worker
  whose lease ran out cannot overwrite what the next owner recorded. The attempt row is always kept.
- no webhook URL: the event is `no_endpoint` (no attempt is made; replay delivers it later).

It logs one line per attempt: event id, type, URL host, status or error, duration. Never the path or
query of the URL, the secret, the signature, or the body (the merchant's metadata).
"""
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.data import events as event_rows
from app.data import merchants as merchant_rows
from app.webhooks import transport
from app.webhooks.schedule import next_attempt_delay
from app.webhooks.signing import webhook_headers

log = logging.getLogger(__name__)

DELIVERED, RETRY, FAILED, NO_ENDPOINT, LEASE_LOST = (
    "delivered", "retry", "failed", "no_endpoint", "lease_lost")
NO_URL_ERROR = "merchant has no webhook URL"


@dataclass(frozen=True)
class Settings:
    timeout: float               # seconds, a whole attempt (WEBHOOK_TIMEOUT_SECONDS)
    schedule: tuple[int, ...]    # WEBHOOK_RETRY_SCHEDULE, parsed

    @classmethod
    def from_config(cls, config):
        return cls(timeout=config["WEBHOOK_TIMEOUT_SECONDS"],
                   schedule=tuple(config["WEBHOOK_RETRY_SCHEDULE"]))


def attempt(db, session, event, *, owner, clock, settings) -> str:
    """Deliver `event` (leased to `owner`) once; return what became of it."""
    merchant = merchant_rows.get(db.connection(), event.merchant_id)
    if merchant is None or not merchant.webhook_url:
        with db.transaction() as conn:
            recorded = event_rows.mark_no_endpoint(conn, event.id, owner, error=NO_URL_ERROR)
        outcome = NO_ENDPOINT if recorded else LEASE_LOST
        log.info("webhook %s %s: %s (%s)", event.id, event.type, NO_URL_ERROR, outcome)
        return outcome

    url = merchant.webhook_url
    attempted_at = int(clock())
    body = event.payload.encode("utf-8")
    try:
        headers = webhook_headers(merchant.webhook_secret, event.id, attempted_at, body)
    except ValueError as e:  # a damaged stored secret: a failed attempt, not a poison event
        result = transport.AttemptResult(False, None, f"cannot sign: {e}", 0, None)
    else:
        result = transport.post(session, url, body, headers, timeout=settings.timeout,
                                livemode=merchant.livemode, clock=clock)
    outcome, note = _record(db, event, owner, url, attempted_at, result, int(clock()), settings)
    log.info("webhook %s %s -> %s: %s in %d ms (%s)", event.id, event.type, _host(url),
             result.status_code if result.ok else result.error, result.duration_ms, note)
    return outcome


def _record(db, event, owner, url, attempted_at, result, now, settings):
    """Record the attempt; committed (possibly with other threads' records: group commit) before
    this returns, so the guarantees are those of one transaction per attempt."""
    attempts_made = event.attempts + 1
    delay = None if result.ok else next_attempt_delay(
        settings.schedule, attempts_made, result.retry_after)

    def write(conn):
        event_rows.insert_attempt(
            conn, event_id=event.id, attempted_at=attempted_at, url=url,
            status_code=result.status_code, error=result.error, duration_ms=result.duration_ms)
        if result.ok:
            event_rows.mark_delivered(conn, event.id, now)
            return DELIVERED, DELIVERED
        next_at = None if delay is None else now + delay
        if not event_rows.mark_attempt_failed(conn, event.id, owner, error=result.error,
                                              next_attempt_at=next_at):
            return LEASE_LOST, "lease lost to another worker: its state stands"
        if delay is None:
            return FAILED, f"failed after {attempts_made} attempts"
        return RETRY, f"attempt {attempts_made}, next in {delay} s"

    return db.shared_transaction(write)


def _host(url) -> str:
    """host[:port] only: the path and query may carry a merchant's token."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "?", parts.port
    except ValueError:
        return "(malformed URL)"
    if ":" in host:
        host = f"[{host}]"
    return host if port is None else f"{host}:{port}"
