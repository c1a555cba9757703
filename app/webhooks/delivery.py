"""One attempt of one claimed delivery (`send`), and its record (`write_records`, `log_records`).

A delivery is one event to one endpoint. `send` signs the event's stored bytes with the endpoint's
current secret (and a rolled one still in its overlap) and POSTs them once to its current URL
(`transport.post`); it touches no database. `write_records` writes any number of attempts in the
caller's transaction, each in a savepoint: a 2xx makes the delivery `delivered` whoever holds its
lease (at least once); a failure schedules the next attempt (a longer Retry-After wins) or makes
it `failed`, only while this worker still holds the lease; an endpoint disabled or deleted
meanwhile (even by a change that committed after the event was written) makes it `cancelled`. The
log line names the event, the endpoint, the URL's host, the outcome: never the path, the secret, the
signature or the body.
"""
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from app.core.records import Delivery, Event
from app.data import outbox as event_rows
from app.webhooks import transport
from app.webhooks.schedule import next_attempt_delay
from app.webhooks.signing import webhook_headers

log = logging.getLogger(__name__)

DELIVERED, RETRY, FAILED, CANCELLED, LEASE_LOST, NOT_RECORDED = (
    "delivered", "retry", "failed", "cancelled", "lease_lost", "not_recorded")
GONE_ERROR = "endpoint disabled or deleted"
ALREADY = "delivered already"  # a late 2xx: the note of a delivery another attempt had delivered


@dataclass(frozen=True)
class Settings:
    timeout: float               # seconds, a whole attempt (WEBHOOK_TIMEOUT_SECONDS)
    schedule: tuple[int, ...]    # WEBHOOK_RETRY_SCHEDULE, parsed
    allow_loopback: bool = False  # WEBHOOK_ALLOW_LOOPBACK: test-mode URLs may reach loopback

    @classmethod
    def from_config(cls, config):
        return cls(timeout=config["WEBHOOK_TIMEOUT_SECONDS"],
                   schedule=tuple(config["WEBHOOK_RETRY_SCHEDULE"]),
                   allow_loopback=config["WEBHOOK_ALLOW_LOOPBACK"])


@dataclass(frozen=True)
class Sent:
    """One attempt made and not yet recorded: `result` is None when the endpoint is gone (disabled
    or deleted: nothing was sent)."""
    delivery: Delivery
    event: Event
    url: str | None
    attempted_at: int
    result: transport.AttemptResult | None
    ended_at: int


def send(session, delivery, event, endpoint, livemode, *, clock, settings) -> Sent:
    """POST `event` once to `endpoint` (None, disabled or deleted: gone, nothing is sent), signed
    with its secrets."""
    if endpoint is None or endpoint.deleted_at is not None or not endpoint.enabled:
        now = int(clock())
        return Sent(delivery, event, None, now, None, now)
    url = endpoint.url
    attempted_at = int(clock())
    body = event.payload.encode("utf-8")
    try:
        headers = webhook_headers(endpoint.signing_secrets(attempted_at), event.id, attempted_at,
                                  body)
    except ValueError as e:  # a damaged stored secret: a failed attempt, not a poison event
        result = transport.AttemptResult(False, None, f"cannot sign: {e}", 0, None)
    else:
        result = transport.post(session, url, body, headers, timeout=settings.timeout,
                                livemode=livemode, allow_loopback=settings.allow_loopback,
                                clock=clock)
    return Sent(delivery, event, url, attempted_at, result, int(clock()))


def write_records(conn, sent, *, owner, settings) -> list[tuple[str, str]]:
    """Write attempts' records in the caller's transaction, each in its own savepoint: one whose
    writes fail is rolled back alone (outcome NOT_RECORDED). Returns (outcome, note) for each, for
    `log_records` once the transaction has committed."""
    notes, reached = [], {DELIVERED: 0, FAILED: 0, CANCELLED: 0}
    for item in sent:
        conn.execute("SAVEPOINT attempt")
        try:
            notes.append(_write(conn, item, owner, settings))
        except Exception as e:  # one bad record must not lose the others
            conn.execute("ROLLBACK TO attempt")
            log.exception("webhook %s %s to %s: could not be recorded", item.event.id,
                          item.event.type, item.delivery.endpoint_id)
            notes.append((NOT_RECORDED, f"not recorded: {type(e).__name__}"))
        conn.execute("RELEASE attempt")
        if notes[-1][0] in reached and notes[-1][1] != ALREADY:
            reached[notes[-1][0]] += 1
    event_rows.count_final(conn, reached)  # the outcome names are the delivery states
    return notes


def log_records(sent, notes) -> list[str]:
    """One log line per recorded attempt; returns the outcomes."""
    for item, (outcome, note) in zip(sent, notes, strict=True):
        event, endpoint_id = item.event, item.delivery.endpoint_id
        if item.result is None:
            log.info("webhook %s %s to %s: %s (%s)", event.id, event.type, endpoint_id, GONE_ERROR,
                     outcome)
        else:
            result = item.result
            log.info("webhook %s %s to %s -> %s: %s in %d ms (%s)", event.id, event.type,
                     endpoint_id, _host(item.url),
                     result.status_code if result.ok else result.error, result.duration_ms, note)
    return [outcome for outcome, _ in notes]


def _write(conn, item, owner, settings):
    """One attempt's writes: (outcome, note for the log line)."""
    delivery, event, result, now = item.delivery, item.event, item.result, item.ended_at
    if result is None:
        recorded = event_rows.mark_attempt_failed(conn, delivery.seq, owner, error=GONE_ERROR,
                                                  next_attempt_at=None, status="cancelled")
        outcome = CANCELLED if recorded else LEASE_LOST
        return outcome, outcome
    event_rows.insert_attempt(
        conn, event_id=event.id, endpoint_id=delivery.endpoint_id, attempted_at=item.attempted_at,
        url=item.url, status_code=result.status_code, error=result.error,
        duration_ms=result.duration_ms)
    if result.ok:
        if not event_rows.mark_delivered(conn, delivery.seq, now):
            return DELIVERED, ALREADY
        return DELIVERED, DELIVERED
    attempts_made = delivery.attempts + 1
    # A test event (no process) is attempted once: its result is what the console shows.
    delay = (None if event.process_id is None else
             next_attempt_delay(settings.schedule, attempts_made, result.retry_after))
    next_at = None if delay is None else now + delay
    if not event_rows.mark_attempt_failed(conn, delivery.seq, owner, error=result.error,
                                          next_attempt_at=next_at):
        return LEASE_LOST, "lease lost to another worker, or cancelled: its state stands"
    if delay is None:
        return FAILED, f"failed after {attempts_made} attempts"
    return RETRY, f"attempt {attempts_made}, next in {delay} s"


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
