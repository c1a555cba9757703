"""The webhooks page: the URL, a test event, the failing deliveries and replaying them, and the
merchant's events with their delivery states. Nothing here waits on a merchant's endpoint: a test
event and a resend go through the outbox (docs/console.md "Webhooks").

  GET  /dashboard/webhooks; POST /dashboard/webhooks/url, /test, /replay-failed
"""
from flask import current_app, g, render_template, request, url_for

from app.clock import now
from app.console import pages
from app.console.pages import bp
from app.console.security import PageError, login_required, owner_required
from app.db import get_db
from app.domain import merchants, outbox


@bp.get("/webhooks")
@login_required
def webhooks_page(notice=None, error=None, status=200):
    notice = notice or pages.notice()
    failing = outbox.failing(get_db(), g.merchant.id)
    tests = outbox.tests_of(get_db(), g.merchant.id)
    refresh = pages.refresh(url_for("dashboard.webhooks_page"), [event for event, _ in tests], now())
    chosen = {name: request.args.get(name, "").strip() for name in ("type", "state")}
    types = (*outbox.EVENT_TYPES, outbox.TEST_EVENT_TYPE)
    if chosen["type"] not in ("", *types) or chosen["state"] not in ("", *outbox.DELIVERY_STATES):
        raise PageError(400, "No such filter", "Choose an event type and a delivery state from the lists.")
    events, more = outbox.page_of(get_db(), g.merchant.id, type=chosen["type"] or None,
                                  state=chosen["state"] or None, before=request.args.get("before"))
    query = {k: v for k, v in chosen.items() if v}
    older = (url_for("dashboard.webhooks_page", **query, before=events[-1][0].id, _anchor="events")
             if more else None)
    return render_template("dashboard/webhooks.html", failing=failing, webhook_url=g.merchant.webhook_url,
                           notice=notice, error=error, tests=tests, refresh=refresh, events=events,
                           chosen=chosen, types=types, states=outbox.DELIVERY_STATES, older=older), status


@bp.post("/webhooks/url")
@login_required
@owner_required
def set_webhook_url():
    url = request.form.get("url", "").strip()
    try:
        _, warning = merchants.set_webhook_url(
            get_db(), g.merchant.id, url or None,
            allow_loopback=current_app.config["WEBHOOK_ALLOW_LOOPBACK"])
    except merchants.MerchantError as e:
        return webhooks_page(error=str(e), status=400)
    return pages.done("dashboard.webhooks_page", "url-set" if url else "url-removed",
                 **({"warning": warning} if warning else {}))


@bp.post("/webhooks/test")
@login_required
@owner_required
def send_test_event():
    """Queued for the delivery worker, never sent from here: no page waits on an endpoint."""
    if not g.merchant.webhook_url:
        return webhooks_page(error="No webhook URL is set: set one first.", status=409)
    try:
        outbox.queue_test(get_db(), g.merchant, now())
    except outbox.TestEventWaiting as e:
        return webhooks_page(error=str(e), status=409)
    return pages.done("dashboard.webhooks_page", "test")


@bp.post("/webhooks/replay-failed")
@login_required
@owner_required
def replay_failed():
    replayed = outbox.replay_where(get_db(), now(), statuses=["failed"], merchant_id=g.merchant.id)
    return pages.done("dashboard.webhooks_page", "replayed", count=len(replayed))
