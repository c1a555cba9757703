"""Webhook delivery for the end-to-end tests, STAND-IN until the delivery worker lands on main.

replace with the worker's run_once when it lands: the body of `deliver_due` becomes one call of the
worker's single iteration (sweep, claim, deliver, record) on `app` at `app.config["CLOCK"]()`, and this
module's outbox walk below goes away. Callers only need: "every event due now has been POSTed".

Until then it uses only real parts: the outbox read through `app.data.events`, the real signing
(`signing.webhook_headers`) and the real transport (`transport.post`, SSRF check included) over real
HTTP to the merchant's webhook URL. It records nothing in the outbox (attempts and statuses are the
worker's job); it remembers in memory which events it delivered, so each is POSTed once per app.
"""
import weakref

from app import merchants, processes
from app.data import events as event_rows
from app.webhooks import signing, transport

_delivered = weakref.WeakKeyDictionary()  # app -> ids of the events already delivered


def deliver_due(app):
    """POST every event that is due now, not yet delivered, to its merchant's webhook URL, signed.
    Returns [(event type, AttemptResult)] in outbox order."""
    db, now = app.extensions["db"], int(app.config["CLOCK"]())
    delivered = _delivered.setdefault(app, set())
    session, results = transport.new_session(), []
    for merchant in merchants.list_all(db):
        if not merchant.webhook_url:
            continue
        for event in _due_events(db, merchant.id, now):
            if event.id in delivered:
                continue
            body = event.payload.encode("utf-8")
            result = transport.post(
                session, merchant.webhook_url, body,
                signing.webhook_headers(merchant.webhook_secret, event.id, now, body),
                timeout=app.config["WEBHOOK_TIMEOUT_SECONDS"], livemode=merchant.livemode,
            )
            if result.ok:
                delivered.add(event.id)
            results.append((event.type, result))
    return results


def _due_events(db, merchant_id, now):
    events, starting_after = [], None
    while True:
        page, has_more = processes.page(db, merchant_id, now=now, limit=100, starting_after=starting_after)
        for process in page:
            events += [e for e in event_rows.for_process(db.connection(), process.id)
                       if e.status == "pending" and e.next_attempt_at is not None and e.next_attempt_at <= now]
        if not has_more:
            return sorted(events, key=lambda e: e.seq)
        starting_after = page[-1].id
